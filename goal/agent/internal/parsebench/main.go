// Command parsebench measures goalrun's Claude stream-json parser on a file
// (docs/bench-agents.sh drives it; docs/benchmarks.md, "agents", has the
// figures).
//
//	parsebench gen SIZE FILE [HUGE]  write a synthetic transcript of SIZE (e.g. 1GiB, 64MiB) to FILE;
//	                                 with HUGE=N every Nth round has a 12 MiB tool output (an oversize line)
//	parsebench parse FILE      parse FILE as one Claude turn's stdout and report
//
// parse reads FILE in 256 KiB chunks through agent.LineWriter into the
// Claude parser, exactly as a sandbox step's stdout would arrive, and prints
// one line: bytes, wall seconds and MB/s (10^6 bytes per second), CPU
// seconds (user+system, from getrusage) and MB per CPU second — the figure
// that holds on a busy machine — lines, receipts, how the turn ended, and
// the process's peak resident memory (VmHWM from /proc/self/status).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/goal/agent/internal/streamgen"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "parsebench:", err)
		os.Exit(2)
	}
}

func run(args []string, out io.Writer) error {
	switch {
	case (len(args) == 3 || len(args) == 4) && args[0] == "gen":
		size, err := parseSize(args[1])
		if err != nil {
			return err
		}
		huge := 0
		if len(args) == 4 {
			if huge, err = strconv.Atoi(args[3]); err != nil || huge < 0 {
				return fmt.Errorf("bad HUGE %q: a round count", args[3])
			}
		}
		f, err := os.Create(args[2])
		if err != nil {
			return err
		}
		n, err := streamgen.ClaudeHuge(f, size, 1, huge)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %d bytes to %s\n", n, args[2])
		return nil
	case len(args) == 2 && args[0] == "parse":
		return parse(args[1], out)
	}
	return errors.New("usage: parsebench gen SIZE FILE [HUGE] | parsebench parse FILE")
}

func parse(name string, out io.Writer) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	p := agent.Claude{}.NewParser()
	receipts := 0
	emit := func(ev agent.Event) {
		if ev.Kind == agent.KindToolResult {
			receipts++
		}
	}
	w := agent.NewLineWriter(p, emit)
	buf := make([]byte, 256<<10)
	cpu0 := cpuSeconds()
	start := time.Now()
	var total int64
	for {
		n, err := f.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			total += int64(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	w.Close()
	res := p.End(0, emit)
	secs := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpu0
	fmt.Fprintf(out, "bytes=%d seconds=%.3f MB/s=%.1f cpu_seconds=%.3f MB/cpu_s=%.1f lines=%d receipts=%d status=%s skipped=%d oversize=%d peak_rss_kib=%s\n",
		total, secs, float64(total)/secs/1e6, cpu, float64(total)/cpu/1e6, w.Lines(), receipts, res.Status, res.SkippedLines, res.OversizeLines, peakRSS())
	return nil
}

// parseSize reads 123, 64KiB, 512MiB, 1GiB.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q: use e.g. 1GiB, 64MiB or a byte count", s)
	}
	return n * mult, nil
}

// cpuSeconds returns the process's user+system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// peakRSS returns VmHWM from /proc/self/status in KiB ("?" when unknown).
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
		}
	}
	return "?"
}
