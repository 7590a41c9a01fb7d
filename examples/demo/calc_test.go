package calc

import "testing"

func TestSum(t *testing.T) {
	cases := []struct {
		name string
		xs   []int
		want int
	}{
		{"none", nil, 0},
		{"one", []int{7}, 7},
		{"several", []int{1, 2, 3, 4}, 10},
		{"negative", []int{-5, 5, -1}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sum(tc.xs); got != tc.want {
				t.Errorf("Sum(%v) = %d, want %d", tc.xs, got, tc.want)
			}
		})
	}
}

func TestMean(t *testing.T) {
	cases := []struct {
		name string
		xs   []int
		want float64
	}{
		{"none", nil, 0},
		{"one", []int{7}, 7},
		{"several", []int{1, 2, 3, 4}, 2.5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Mean(tc.xs); got != tc.want {
				t.Errorf("Mean(%v) = %g, want %g", tc.xs, got, tc.want)
			}
		})
	}
}
