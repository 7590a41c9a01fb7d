// Package lazyre holds regular expressions that are compiled on first use
// instead of at package initialisation.
//
// Why: a package-level regexp.MustCompile runs in every process that links
// the package, whether or not that process ever matches a line. goalrun
// starts two processes per run (the run and its __janitor, which needs none
// of the claims, check-output or agent-stream expressions), and compiling
// them all at start-up cost ~25 ms of CPU per process on the 2-core machines
// where the time to the first check matters (docs/benchmarks.md, "already
// green"). A value declared as
//
//	var reFoo = lazyre.New(`expr`)
//
// costs one small allocation at initialisation; the expression is compiled
// once, by the first method call, and shared by every goroutine after that.
// A bad expression panics at that first call, with regexp.MustCompile's
// message; CompileAll lets a package's tests compile every expression the
// test binary links, so a typo still fails a test and never a run.
package lazyre

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
)

// Regexp is a regular expression compiled on first use. Declare it with
// New; the zero value is not usable. Its methods are regexp.Regexp's of
// the same names; all are safe for concurrent use.
type Regexp struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
	err  error
}

// registry is the set of every Regexp New created, for CompileAll.
type registry struct {
	mu  sync.Mutex
	all []*Regexp
}

// add creates a Regexp of expr and records it.
func (g *registry) add(expr string) *Regexp {
	r := &Regexp{expr: expr}
	g.mu.Lock()
	g.all = append(g.all, r)
	g.mu.Unlock()
	return r
}

// compileAll compiles every recorded Regexp and returns the errors of the
// bad ones, joined, each naming its expression; nil when all are valid.
func (g *registry) compileAll() error {
	g.mu.Lock()
	all := append([]*Regexp(nil), g.all...)
	g.mu.Unlock()
	var errs []error
	for _, r := range all {
		if err := r.compile(); err != nil {
			errs = append(errs, fmt.Errorf("lazyre: %s: %w", quote(r.expr), err))
		}
	}
	return errors.Join(errs...)
}

var global registry

// New returns a Regexp of expr, to be compiled (with regexp.Compile, RE2
// syntax) on first use. It does not compile expr: call it in package-level
// declarations, where regexp.MustCompile would cost start-up time.
func New(expr string) *Regexp { return global.add(expr) }

// CompileAll compiles every Regexp created so far in this process and
// returns the errors of the invalid ones joined (nil when all compile).
// Tests call it: in a test binary it covers every package-level Regexp of
// the packages the binary links.
func CompileAll() error { return global.compileAll() }

// compile compiles the expression once and returns its error.
func (r *Regexp) compile() error {
	r.once.Do(func() { r.re, r.err = regexp.Compile(r.expr) })
	return r.err
}

// get returns the compiled expression; it panics, as regexp.MustCompile
// does, when the expression does not compile.
func (r *Regexp) get() *regexp.Regexp {
	if err := r.compile(); err != nil {
		panic(`regexp: Compile(` + quote(r.expr) + `): ` + err.Error())
	}
	return r.re
}

// quote writes expr as regexp.MustCompile's panic does: backquoted when it
// can be, double-quoted otherwise.
func quote(expr string) string {
	if strconv.CanBackquote(expr) {
		return "`" + expr + "`"
	}
	return strconv.Quote(expr)
}

// Match reports whether b contains a match (regexp.Regexp.Match).
func (r *Regexp) Match(b []byte) bool { return r.get().Match(b) }

// MatchString reports whether s contains a match
// (regexp.Regexp.MatchString).
func (r *Regexp) MatchString(s string) bool { return r.get().MatchString(s) }

// FindIndex returns the byte offsets of the leftmost match in b, nil when
// none (regexp.Regexp.FindIndex).
func (r *Regexp) FindIndex(b []byte) []int { return r.get().FindIndex(b) }

// FindStringSubmatch returns the leftmost match in s and its submatches,
// nil when none (regexp.Regexp.FindStringSubmatch).
func (r *Regexp) FindStringSubmatch(s string) []string { return r.get().FindStringSubmatch(s) }

// FindAllString returns at most n successive matches in s (all when n < 0),
// nil when none (regexp.Regexp.FindAllString).
func (r *Regexp) FindAllString(s string, n int) []string { return r.get().FindAllString(s, n) }

// FindAllStringSubmatch returns at most n successive matches in s with
// their submatches (all when n < 0), nil when none
// (regexp.Regexp.FindAllStringSubmatch).
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.get().FindAllStringSubmatch(s, n)
}

// FindAllSubmatch returns at most n successive matches in b with their
// submatches (all when n < 0), nil when none
// (regexp.Regexp.FindAllSubmatch).
func (r *Regexp) FindAllSubmatch(b []byte, n int) [][][]byte { return r.get().FindAllSubmatch(b, n) }

// ReplaceAllString returns s with every match replaced by repl, in which $
// signs are expanded as regexp.Regexp.Expand does
// (regexp.Regexp.ReplaceAllString).
func (r *Regexp) ReplaceAllString(s, repl string) string { return r.get().ReplaceAllString(s, repl) }

// ReplaceAllStringFunc returns s with every match m replaced by repl(m)
// (regexp.Regexp.ReplaceAllStringFunc).
func (r *Regexp) ReplaceAllStringFunc(s string, repl func(string) string) string {
	return r.get().ReplaceAllStringFunc(s, repl)
}
