package report

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

func TestRollup(t *testing.T) {
	type add struct {
		tool  string
		ok    bool
		brief string
		via   string
	}
	many := func(n int, f func(i int) add) []add {
		out := make([]add, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		adds       []add
		wantTotal  int
		wantFailed int
		wantByTool map[string]int
		wantSample []string // "tool ok brief"
	}{
		{
			name:       "empty",
			wantByTool: map[string]int{},
			wantSample: []string{},
		},
		{
			name: "failures first, then successes in order",
			adds: []add{
				{"Read", true, "a.go", ""}, {"Bash", false, "go test ./...", ""}, {"Edit", true, "a.go", ""},
				{"Bash", false, "go vet ./...", "task:linter"},
			},
			wantTotal: 4, wantFailed: 2,
			wantByTool: map[string]int{"Read": 1, "Bash": 2, "Edit": 1},
			wantSample: []string{"Bash false go test ./...", "Bash false go vet ./... via task:linter", "Read true a.go", "Edit true a.go"},
		},
		{
			name:      "sample holds 8, failures win",
			adds:      many(30, func(i int) add { return add{"Bash", i%3 == 0, "cmd " + strconv.Itoa(i), ""} }),
			wantTotal: 30, wantFailed: 20,
			wantByTool: map[string]int{"Bash": 30},
			wantSample: []string{"Bash false cmd 1", "Bash false cmd 2", "Bash false cmd 4", "Bash false cmd 5", "Bash false cmd 7", "Bash false cmd 8", "Bash false cmd 10", "Bash false cmd 11"},
		},
		{
			name:       "identical successes are shown once",
			adds:       many(5, func(i int) add { return add{"Read", true, "go.mod", ""} }),
			wantTotal:  5,
			wantByTool: map[string]int{"Read": 5},
			wantSample: []string{"Read true go.mod"},
		},
		{
			name:      "by_tool folds into (other) beyond 32 keys",
			adds:      many(40, func(i int) add { return add{fmt.Sprintf("tool%02d", i), true, "x" + strconv.Itoa(i), ""} }),
			wantTotal: 40,
			wantByTool: func() map[string]int {
				m := map[string]int{OtherTool: 9}
				for i := 0; i < 31; i++ {
					m[fmt.Sprintf("tool%02d", i)] = 1
				}
				return m
			}(),
			wantSample: []string{"tool00 true x0", "tool01 true x1", "tool02 true x2", "tool03 true x3", "tool04 true x4", "tool05 true x5", "tool06 true x6", "tool07 true x7"},
		},
		{
			name:       "unnamed tool, multi-line brief folded",
			adds:       []add{{"", true, "line1\nline2", ""}},
			wantTotal:  1,
			wantByTool: map[string]int{UnnamedTool: 1},
			wantSample: []string{UnnamedTool + " true line1 line2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := NewRollup()
			for _, a := range tc.adds {
				u.Add(Receipt{Tool: a.tool, OK: a.ok, Brief: a.brief, Via: a.via})
			}
			r := u.Receipts()
			if r.Total != tc.wantTotal || r.Failed != tc.wantFailed {
				t.Errorf("total/failed = %d/%d, want %d/%d", r.Total, r.Failed, tc.wantTotal, tc.wantFailed)
			}
			if fmt.Sprint(r.ByTool) != fmt.Sprint(tc.wantByTool) {
				t.Errorf("by_tool = %v, want %v", r.ByTool, tc.wantByTool)
			}
			got := []string{}
			for _, s := range r.Sample {
				line := fmt.Sprintf("%s %v %s", s.Tool, s.OK, s.Brief)
				if s.Via != "" {
					line += " via " + s.Via
				}
				got = append(got, line)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.wantSample) {
				t.Errorf("sample = %q\nwant     %q", got, tc.wantSample)
			}
			if r.SampleOmitted != r.Total-len(r.Sample) {
				t.Errorf("sample_omitted = %d, want %d", r.SampleOmitted, r.Total-len(r.Sample))
			}
			if len(r.ByTool) > ByToolMax || len(r.Sample) > SampleMax {
				t.Errorf("bounds broken: %d keys, %d samples", len(r.ByTool), len(r.Sample))
			}
			// The roll-up in a document validates.
			run := passedRun()
			run.Receipts = r
			validate(t, Encode(Finish(run, nil)))
		})
	}
}

func TestRollupConcurrent(t *testing.T) {
	u := NewRollup()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				u.Add(Receipt{Tool: "t" + strconv.Itoa(i%50), OK: i%7 != 0, Brief: "b"})
				if i%100 == 0 {
					_ = u.Receipts()
				}
			}
		}()
	}
	wg.Wait()
	if r := u.Receipts(); r.Total != 4000 || u.Total() != 4000 {
		t.Errorf("total = %d", r.Total)
	}
}

// TestRollupMemoryFlat proves the roll-up's memory does not grow with the
// number of receipts: the live heap after 1e6 receipts (with 1000 distinct
// tools, unique 200-byte briefs, a third of them failures) is within a small
// constant of the heap after 1e3. It measures bytes, not time.
func TestRollupMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 1e6-receipt memory measurement")
	}
	pad := huge("p", 200)
	feed := func(u *Rollup, from, to int) {
		for i := from; i < to; i++ {
			u.Add(Receipt{Tool: "tool" + strconv.Itoa(i%1000), OK: i%3 != 0, Brief: pad + strconv.Itoa(i)})
		}
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	u := NewRollup()
	feed(u, 0, 1000)
	before := heap()
	feed(u, 1000, 1_000_000)
	after := heap()
	runtime.KeepAlive(u)
	growth := int64(after) - int64(before)
	t.Logf("live heap after 1e3 receipts: %d B; after 1e6: %d B; growth %d B", before, after, growth)
	if growth > 256<<10 {
		t.Errorf("the roll-up grew by %d bytes over 999000 receipts; it must stay O(1)", growth)
	}
	r := u.Receipts()
	if r.Total != 1_000_000 || r.Failed != 333_334 || len(r.ByTool) != ByToolMax || len(r.Sample) != SampleMax {
		t.Errorf("roll-up = total %d failed %d keys %d sample %d", r.Total, r.Failed, len(r.ByTool), len(r.Sample))
	}
}

// BenchmarkRollupAdd reports the cost of one receipt and the roll-up's
// retained heap ("retained-B") after b.N receipts, which stays flat as N
// grows: go test ./report -bench RollupAdd -benchmem
func BenchmarkRollupAdd(b *testing.B) {
	pad := huge("p", 200)
	u := NewRollup()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		u.Add(Receipt{Tool: "tool" + strconv.Itoa(i%100), OK: i%3 != 0, Brief: pad})
	}
	b.StopTimer()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapAlloc), "retained-B")
	runtime.KeepAlive(u)
}

func TestIterationLog(t *testing.T) {
	for _, n := range []int{0, 1, 2, 5, 6, 7, 12, 100} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			var l IterationLog
			for i := 0; i < n; i++ {
				l.Add(Iteration{N: i})
			}
			got := []int{}
			for _, it := range l.Iterations() {
				got = append(got, it.N)
			}
			want := []int{}
			for i := 0; i < n; i++ {
				if i < IterHead || i >= n-IterTail {
					want = append(want, i)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("kept %v, want %v", got, want)
			}
			if l.Omitted() != n-len(want) || l.Len() != n {
				t.Errorf("omitted %d len %d, want %d %d", l.Omitted(), l.Len(), n-len(want), n)
			}
			// Finish agrees whether it gets the log's result or all iterations.
			all := make([]Iteration, n)
			for i := range all {
				all[i] = Iteration{N: i}
			}
			a := passedRun()
			a.Iterations, a.IterationsOmitted = l.Iterations(), l.Omitted()
			b := passedRun()
			b.Iterations = all
			da, db := Finish(a, nil), Finish(b, nil)
			if fmt.Sprint(da.Iterations) != fmt.Sprint(db.Iterations) || *da.IterationsOmitted != *db.IterationsOmitted {
				t.Errorf("Finish differs: log %v+%d, all %v+%d", da.Iterations, *da.IterationsOmitted, db.Iterations, *db.IterationsOmitted)
			}
			validate(t, Encode(da))
		})
	}
}
