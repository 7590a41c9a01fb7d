package lazyre

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// TestMethods: every method answers what regexp.Regexp's method of the
// same name answers for the same expression and input.
func TestMethods(t *testing.T) {
	const expr = `(\w+)=(\d+)`
	const in = "a=1 b=x c=22 d=333"
	want := regexp.MustCompile(expr)
	tests := []struct {
		name      string
		got, want any
	}{
		{"Match", New(expr).Match([]byte(in)), want.Match([]byte(in))},
		{"Match none", New(expr).Match([]byte("none")), false},
		{"MatchString", New(expr).MatchString(in), want.MatchString(in)},
		{"MatchString none", New(expr).MatchString("none"), false},
		{"FindIndex", New(expr).FindIndex([]byte(in)), want.FindIndex([]byte(in))},
		{"FindStringSubmatch", New(expr).FindStringSubmatch(in), want.FindStringSubmatch(in)},
		{"FindStringSubmatch none", New(expr).FindStringSubmatch("none"), []string(nil)},
		{"FindAllString", New(expr).FindAllString(in, -1), want.FindAllString(in, -1)},
		{"FindAllString at most 2", New(expr).FindAllString(in, 2), want.FindAllString(in, 2)},
		{"FindAllStringSubmatch", New(expr).FindAllStringSubmatch(in, -1), want.FindAllStringSubmatch(in, -1)},
		{"FindAllSubmatch", New(expr).FindAllSubmatch([]byte(in), -1), want.FindAllSubmatch([]byte(in), -1)},
		{"ReplaceAllString", New(expr).ReplaceAllString(in, "$2:$1"), want.ReplaceAllString(in, "$2:$1")},
		{"ReplaceAllStringFunc", New(expr).ReplaceAllStringFunc(in, strings.ToUpper), want.ReplaceAllStringFunc(in, strings.ToUpper)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

// TestCompiledOnFirstUse: New compiles nothing; the first call compiles
// once and later calls reuse that value.
func TestCompiledOnFirstUse(t *testing.T) {
	var g registry
	r := g.add(`a+`)
	if r.re != nil {
		t.Fatalf("compiled by New")
	}
	if !r.MatchString("caab") {
		t.Fatalf(`a+ does not match "caab"`)
	}
	first := r.re
	if first == nil {
		t.Fatalf("not compiled after the first call")
	}
	r.MatchString("b")
	if r.re != first {
		t.Errorf("compiled again on the second call")
	}
}

// TestBadExpression: a bad expression panics at its first use with
// regexp.MustCompile's message, and again at every later use.
func TestBadExpression(t *testing.T) {
	tests := []struct {
		name string
		expr string
	}{
		{"unclosed group", `(a`},
		{"bad repetition", `*a`},
		{"bad escape", `\8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g registry
			r := g.add(tt.expr)
			want := panicOf(func() { regexp.MustCompile(tt.expr) })
			if want == "" {
				t.Fatalf("regexp.MustCompile(%q) did not panic", tt.expr)
			}
			for i := range 2 {
				if got := panicOf(func() { r.MatchString("a") }); got != want {
					t.Errorf("call %d panicked with %q, want %q", i+1, got, want)
				}
			}
		})
	}
}

// panicOf returns the panic value of f as text, "" when f returns.
func panicOf(f func()) (msg string) {
	defer func() {
		if v := recover(); v != nil {
			msg = fmt.Sprint(v)
		}
	}()
	f()
	return ""
}

// TestCompileAll: CompileAll compiles every recorded expression and names
// each bad one in its error.
func TestCompileAll(t *testing.T) {
	tests := []struct {
		name    string
		exprs   []string
		wantErr []string // expressions the error must name, as written there; nil: no error
	}{
		{"none", nil, nil},
		{"all valid", []string{`^a$`, `(?i)b+`, `x|y`}, nil},
		{"one bad", []string{`^a$`, `(b`, `c`}, []string{"`(b`"}},
		{"two bad", []string{`[z`, `ok`, `a**`}, []string{"`[z`", "`a**`"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g registry
			var rs []*Regexp
			for _, e := range tt.exprs {
				rs = append(rs, g.add(e))
			}
			err := g.compileAll()
			if (err != nil) != (tt.wantErr != nil) {
				t.Fatalf("compileAll() = %v, want an error: %t", err, tt.wantErr != nil)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			for _, r := range rs {
				if r.re == nil && r.err == nil {
					t.Errorf("%q left uncompiled", r.expr)
				}
			}
		})
	}
}

// TestGlobalCompileAll: the values New created are in CompileAll's set.
func TestGlobalCompileAll(t *testing.T) {
	r := New(`^global-\d+$`)
	if err := CompileAll(); err != nil {
		t.Fatal(err)
	}
	if r.re == nil {
		t.Errorf("CompileAll left a value of New uncompiled")
	}
}

// TestConcurrentFirstUse: goroutines racing to the first call all get the
// same answer (run with -race).
func TestConcurrentFirstUse(t *testing.T) {
	r := New(`^(\d+)-(\d+)$`)
	var wg sync.WaitGroup
	got := make([][]string, 8)
	for i := range got {
		wg.Go(func() { got[i] = r.FindStringSubmatch("12-34") })
	}
	wg.Wait()
	for i, g := range got {
		if want := []string{"12-34", "12", "34"}; !reflect.DeepEqual(g, want) {
			t.Errorf("goroutine %d got %q, want %q", i, g, want)
		}
	}
}
