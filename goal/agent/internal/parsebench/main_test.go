package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1GiB", 1 << 30, true}, {"64MiB", 64 << 20, true}, {"3KiB", 3 << 10, true}, {"1000", 1000, true},
		{"0", 0, false}, {"-1MiB", 0, false}, {"1GB", 0, false}, {"", 0, false},
	}
	for _, c := range cases {
		got, err := parseSize(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseSize(%q) = %d, %v", c.in, got, err)
		}
	}
}

// TestGenAndParse runs the tool end to end on a small transcript, with and
// without oversize lines.
func TestGenAndParse(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args     []string
		oversize string
	}{
		{[]string{"gen", "2MiB", filepath.Join(dir, "a.jsonl")}, "oversize=0"},
		{[]string{"gen", "1MiB", filepath.Join(dir, "b.jsonl"), "1"}, "oversize=1 "},
	} {
		var out bytes.Buffer
		if err := run(c.args, &out); err != nil || !strings.HasPrefix(out.String(), "wrote ") {
			t.Fatalf("%v: %q, %v", c.args, out.String(), err)
		}
		out.Reset()
		if err := run([]string{"parse", c.args[2]}, &out); err != nil {
			t.Fatal(err)
		}
		line := out.String()
		for _, want := range []string{"status=success", "skipped=0", c.oversize, "MB/cpu_s=", "peak_rss_kib="} {
			if !strings.Contains(line, want) {
				t.Errorf("%v: %q lacks %q", c.args, line, want)
			}
		}
		if len(c.args) == 4 && strings.Contains(line, "oversize=0 ") {
			t.Errorf("huge outputs made no oversize line: %q", line)
		}
	}
	if err := run([]string{"gen", "x", "y"}, &bytes.Buffer{}); err == nil {
		t.Error("a bad size was accepted")
	}
	if err := run([]string{"frob"}, &bytes.Buffer{}); err == nil {
		t.Error("a bad command was accepted")
	}
}
