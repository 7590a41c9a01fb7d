// Package calc is goalrun's demo project: two small functions with one bug
// each, so the demo's fix script (fix.sh) needs two turns to make
// `go test ./...` pass.
package calc

// Sum returns the sum of xs (0 for none).
func Sum(xs []int) int {
	total := 0
	for i := 1; i < len(xs); i++ { // bug: the loop starts at 1 and skips xs[0]
		total += xs[i]
	}
	return total
}

// Mean returns the arithmetic mean of xs (0 for none).
func Mean(xs []int) float64 {
	if len(xs) == 0 {
		return 0
	}
	return float64(Sum(xs)) / float64(len(xs)-1) // bug: divides by one less than the count
}
