package grounding

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	gotoken "go/token"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
)

// goCheckReason says why a change to a Go module's file changes what the
// check tests when the check runs go (runs["go"]; the source rules need
// go test, runs["gotest"]), or "" when it does not. The rules:
//
//   - a non-test .go file whose new text adds or changes code that runs
//     before or instead of the tests in a test binary, or that can end it
//     or tell it apart (goTestHooks): an init function, TestMain,
//     os.Exit/os.Args, flag.Set("test.…"), a //go:linkname, cgo, a
//     package-level variable initialised by a call, an import or use of
//     syscall, golang.org/x/sys/unix, unsafe, os/exec, runtime/debug or
//     plugin, most of runtime, a "/proc/" path, a package-level name that
//     shadows a built-in. Names are resolved through the file's imports and
//     the package's declarations (decls gives those of a folder's
//     package). The file's package is the one tested
//     or one of its imports: go test ./... builds every package of the
//     module, and a narrower pattern still runs the init code of every
//     package the tested ones import, so any package in the tree counts;
//   - other sources go builds into a package (assembly, C, .syso);
//   - go.mod: replace, require, go, toolchain, godebug, tool or ignore
//     changed (other code is built, or a folder is left out of ./...), or
//     a new go.mod (its folder leaves the enclosing module's ./...);
//   - go.sum: a recorded hash changed or removed for the same version;
//   - go.work and go.work.sum, and anything under vendor/ (modules.txt
//     and the vendored code).
//
// A file that cannot be read counts (fail safe).
func goCheckReason(p string, runs map[string]bool, added bool, oldText, newText []byte, oldOK, newOK bool, decls func(dir string) map[string]bool) string {
	base := path.Base(p)
	inVendor := strings.HasPrefix(p, "vendor/") || strings.Contains(p, "/vendor/")
	switch {
	case !runs["go"]:
		return ""
	case inVendor:
		return "vendored dependency code or vendor/modules.txt changed (the check builds it)"
	case base == "go.work" || base == "go.work.sum":
		return base + " changed (it decides which module copies the check builds)"
	case base == "go.mod" && added:
		return "a new go.mod (its folder becomes a module of its own, left out of the enclosing module's ./...)"
	case base == "go.mod":
		if !oldOK || !newOK {
			return "go.mod could not be compared (the check builds with it)"
		}
		return goModChanged(oldText, newText)
	case base == "go.sum":
		if !oldOK || !newOK {
			return "go.sum could not be compared"
		}
		return goSumChanged(oldText, newText)
	case !runs["gotest"]:
		return ""
	case strings.HasSuffix(base, "_test.go"):
		return "" // a test file: already the check's
	case strings.HasSuffix(base, ".go"):
		if !newOK {
			return "a Go file goalrun could not read (it may run code in the test binary)"
		}
		return goHooksAdded(oldText, newText, oldOK, decls(path.Dir(p)))
	}
	switch strings.ToLower(path.Ext(base)) {
	case ".s", ".sx", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".m", ".f", ".f90", ".for", ".syso", ".swig", ".swigcxx":
		return "a source go builds into the package besides Go (assembly, C or an object file)"
	}
	return ""
}

// goModChanged names what changed between two go.mod texts that changes
// the code the check builds or which folders ./... covers; "" when only
// other lines (comments, exclude, retract, the module's own line) changed.
func goModChanged(a, b []byte) string {
	fa, errA := modfile.Parse("go.mod", a, nil)
	fb, errB := modfile.Parse("go.mod", b, nil)
	if errA != nil || errB != nil {
		return "go.mod does not parse (the check builds with it)"
	}
	show := func(lines []string) string { sort.Strings(lines); return strings.Join(lines, "\n") }
	var ra, rb, qa, qb, da, db, ta, tb, ia, ib []string
	for _, r := range fa.Replace {
		ra = append(ra, r.Old.String()+" => "+r.New.String())
	}
	for _, r := range fb.Replace {
		rb = append(rb, r.Old.String()+" => "+r.New.String())
	}
	for _, r := range fa.Require {
		qa = append(qa, r.Mod.String())
	}
	for _, r := range fb.Require {
		qb = append(qb, r.Mod.String())
	}
	for _, g := range fa.Godebug {
		da = append(da, g.Key+"="+g.Value)
	}
	for _, g := range fb.Godebug {
		db = append(db, g.Key+"="+g.Value)
	}
	for _, x := range fa.Tool {
		ta = append(ta, x.Path)
	}
	for _, x := range fb.Tool {
		tb = append(tb, x.Path)
	}
	for _, x := range fa.Ignore {
		ia = append(ia, x.Path)
	}
	for _, x := range fb.Ignore {
		ib = append(ib, x.Path)
	}
	goOf := func(f *modfile.File) string {
		s := ""
		if f.Go != nil {
			s = f.Go.Version
		}
		if f.Toolchain != nil {
			s += " " + f.Toolchain.Name
		}
		return s
	}
	switch {
	case show(ra) != show(rb):
		return "go.mod replace directives changed (the check builds other code for a dependency)"
	case show(ia) != show(ib):
		return "go.mod ignore directives changed (folders left out of ./...)"
	case show(qa) != show(qb):
		return "go.mod requirements changed (the check builds other dependency versions)"
	case show(da) != show(db):
		return "go.mod godebug settings changed"
	case goOf(fa) != goOf(fb):
		return "go.mod go or toolchain line changed"
	case show(ta) != show(tb):
		return "go.mod tool directives changed"
	}
	return ""
}

// goSumChanged reports a go.sum line whose module and version stay but
// whose hash changed or went away; new versions alone are not a change of
// the check (go.mod's requirements are).
func goSumChanged(a, b []byte) string {
	sums := func(t []byte) map[string]string {
		m := map[string]string{}
		for _, l := range strings.Split(string(t), "\n") {
			f := strings.Fields(l)
			if len(f) == 3 {
				m[f[0]+" "+f[1]] = f[2]
			}
		}
		return m
	}
	old, cur := sums(a), sums(b)
	for k, h := range old {
		if g, ok := cur[k]; ok && g != h {
			return "go.sum hash changed for " + k
		}
	}
	return ""
}

// goHooksAdded compares the test-binary hooks (goTestHooks) of the old and
// new text of a non-test Go file and names the first one the new text
// adds or changes; "" when there is none. With no old text (a new file),
// every hook is new. decls are the names the file's package declares at
// package level in any of its files (the current tree), which shadow Go's
// built-ins.
func goHooksAdded(a, b []byte, aOK bool, decls map[string]bool) string {
	old := map[string]int{}
	if aOK && len(a) > 0 {
		for _, h := range goTestHooks(a, decls) {
			old[h.key]++
		}
	}
	for _, h := range goTestHooks(b, decls) {
		if old[h.key] > 0 {
			old[h.key]--
			continue
		}
		return h.what
	}
	return ""
}

// goHook is one construct of a Go file that changes what a test binary
// does before or instead of running the tests: key identifies it (kind,
// where, and for init and TestMain their whole text), what says it for
// people.
type goHook struct{ key, what string }

// goSteeringPackages are the packages whose mere use can end a test binary
// with status 0 in the middle of a test, or tell a test binary apart from
// the program: raw system calls, memory tricks, other programs, the
// runtime's debug hooks, native code loaded at run time.
var goSteeringPackages = map[string]string{
	"syscall":               "raw system calls can end the test binary with status 0",
	"golang.org/x/sys/unix": "raw system calls can end the test binary with status 0",
	"unsafe":                "it can rewrite memory the testing package reads",
	"os/exec":               "another program can end or signal the test binary",
	"runtime/debug":         "it reads the binary's build information and changes the runtime's behaviour",
	"plugin":                "it loads native code at run time",
}

// goRuntimeHarmless are the runtime package's names a non-test file may
// use without it counting: they neither end the program nor show its call
// stack (which would tell a test binary apart).
var goRuntimeHarmless = map[string]bool{
	"GOOS": true, "GOARCH": true, "NumCPU": true, "GOMAXPROCS": true, "Gosched": true, "GC": true,
	"KeepAlive": true, "NumGoroutine": true, "Version": true, "Compiler": true, "MemStats": true,
	"ReadMemStats": true, "LockOSThread": true, "UnlockOSThread": true, "SetFinalizer": true,
	"AddCleanup": true, "Error": true, "TypeAssertionError": true, "Pinner": true,
}

// goPredeclared are Go's predeclared identifiers (the universe block:
// https://go.dev/ref/spec#Predeclared_identifiers). A package-level
// declaration of one shadows it in every file of the package.
var goPredeclared = map[string]bool{
	"any": true, "bool": true, "byte": true, "comparable": true, "complex64": true, "complex128": true,
	"error": true, "float32": true, "float64": true, "int": true, "int8": true, "int16": true, "int32": true,
	"int64": true, "rune": true, "string": true, "uint": true, "uint8": true, "uint16": true, "uint32": true,
	"uint64": true, "uintptr": true, "true": true, "false": true, "iota": true, "nil": true,
	"append": true, "cap": true, "clear": true, "close": true, "complex": true, "copy": true, "delete": true,
	"imag": true, "len": true, "make": true, "max": true, "min": true, "new": true, "panic": true,
	"print": true, "println": true, "real": true, "recover": true,
}

// initCallsAllowed are package-level initialisers that run no code of the
// module: constructors of values and flag definitions of the standard
// library (by import path, so a package imported under one of these
// names is not taken for it), and built-ins and conversions (only while
// the package does not declare the name itself).
var initCallsAllowed = map[string]bool{
	"errors.New": true, "fmt.Errorf": true, "regexp.MustCompile": true, "regexp.MustCompilePOSIX": true,
	"strings.NewReplacer": true, "math/big.NewInt": true, "math/big.NewFloat": true, "math/big.NewRat": true,
	"reflect.TypeOf": true, "reflect.TypeFor": true, "time.Date": true, "sync.OnceFunc": true,
	"sync.OnceValue": true, "sync.OnceValues": true, "flag.String": true, "flag.Int": true, "flag.Bool": true,
	"flag.Duration": true, "flag.Float64": true, "flag.Int64": true, "flag.Uint": true, "flag.Uint64": true,
	"expvar.NewInt": true, "expvar.NewString": true, "expvar.NewMap": true, "log/slog.New": true,
	"text/template.Must": true, "text/template.New": true, "html/template.Must": true, "html/template.New": true,
	"net/http.NewServeMux": true, "context.Background": true, "time.Duration": true, "os.Getenv": true,
	"path/filepath.Join": true, "path.Join": true,
	"make": true, "new": true, "len": true, "cap": true, "append": true, "min": true, "max": true,
	"string": true, "int": true, "int64": true, "uint": true, "uint64": true, "float64": true, "byte": true,
	"rune": true, "[]byte": true,
}

// GoPackageDecls returns the names declared at package level in a Go
// source (functions without a receiver, variables, constants, types), for
// goHooksAdded's decls.
func GoPackageDecls(src []byte, into map[string]bool) {
	f, _ := parser.ParseFile(gotoken.NewFileSet(), "x.go", src, parser.SkipObjectResolution)
	if f == nil {
		return
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				into[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						into[n.Name] = true
					}
				case *ast.TypeSpec:
					into[s.Name.Name] = true
				}
			}
		}
	}
}

// goTestHooks lists a Go file's test-binary hooks. Names are resolved as
// the compiler would: a selector's package through the file's imports
// (whatever local name they are given), a built-in only while decls (the
// package's own package-level names) and the file do not declare it. A
// file that does not parse yields what its partial syntax tree shows.
func goTestHooks(src []byte, decls map[string]bool) []goHook {
	fset := gotoken.NewFileSet()
	f, _ := parser.ParseFile(fset, "x.go", src, parser.ParseComments|parser.SkipObjectResolution)
	if f == nil {
		return []goHook{{key: "unparsable", what: "a Go file that does not parse"}}
	}
	mine := map[string]bool{} // this file's package-level names
	GoPackageDecls(src, mine)
	own := maps.Clone(mine) // the package's
	if own == nil {
		own = map[string]bool{}
	}
	maps.Copy(own, decls)
	var out []goHook
	// Every import by the name the file uses for it (a path's last element
	// stands for the package's name; an import whose package is named
	// otherwise then resolves to nothing, which allows nothing).
	imports := map[string]string{} // local name → import path
	var steering []goHook
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		switch {
		case p == "testing":
			out = append(out, goHook{key: "import testing", what: "imports testing in a non-test file (it can tell a test binary apart)"})
		case p == "C":
			out = append(out, goHook{key: "cgo", what: "imports C (cgo code runs when the test binary loads)"})
			continue
		case goSteeringPackages[p] != "":
			steering = append(steering, goHook{key: "import " + p, what: "imports " + p + " (" + goSteeringPackages[p] + ")"})
		}
		if name == "." {
			switch p {
			case "os", "syscall", "golang.org/x/sys/unix", "runtime", "flag", "unsafe", "testing", "os/exec", "runtime/debug", "plugin":
				out = append(out, goHook{key: "dot " + p, what: "dot-imports " + p + " (its Exit, Args … unqualified)"})
			}
			continue
		}
		if name != "_" {
			imports[name] = p
		}
	}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			if strings.HasPrefix(c.Text, "//go:linkname") {
				out = append(out, goHook{key: "linkname " + c.Text, what: "adds a //go:linkname directive (reaches into the runtime or testing)"})
			}
		}
	}
	out = append(out, steering...)
	for _, name := range slices.Sorted(maps.Keys(mine)) {
		if goPredeclared[name] {
			out = append(out, goHook{key: "shadow " + name + " " + goDeclText(fset, f, name),
				what: "declares " + name + " at package level, shadowing Go's built-in " + name + " in every file of the package"})
		}
	}
	show := func(n ast.Node) string {
		var b bytes.Buffer
		printer.Fprint(&b, fset, n)
		return b.String()
	}
	text := func(n ast.Node) string { // identifies a construct by its whole text
		sum := sha256.Sum256([]byte(show(n)))
		return hex.EncodeToString(sum[:8])
	}
	calls := func(where string, n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BasicLit:
				if x.Kind == gotoken.STRING && strings.Contains(x.Value, "/proc/") {
					out = append(out, goHook{key: "proc " + x.Value + " " + where,
						what: "names " + x.Value + " in " + where + " (a process can read there whether it is a test binary)"})
				}
			case *ast.SelectorExpr:
				id, ok := x.X.(*ast.Ident)
				if !ok {
					// flag.CommandLine.Set(…)
					if in, ok := x.X.(*ast.SelectorExpr); ok && x.Sel.Name == "Set" {
						if pid, ok := in.X.(*ast.Ident); ok && imports[pid.Name] == "flag" {
							out = append(out, goHook{key: "flagset " + where, what: "sets a flag with flag.CommandLine.Set in " + where})
						}
					}
					return true
				}
				p := imports[id.Name]
				name := x.Sel.Name
				switch {
				case p == "":
				case p == "os" && (name == "Exit" || name == "Args" || name == "Executable"),
					(p == "syscall" || p == "golang.org/x/sys/unix") && name == "Exit",
					p == "runtime" && name == "Goexit",
					p == "testing" && (name == "MainStart" || name == "Init" || name == "Testing"),
					p == "unsafe" && name == "Pointer":
					out = append(out, goHook{key: p + "." + name + " " + where, what: fmt.Sprintf("uses %s.%s in %s", path.Base(p), name, where)})
				case goSteeringPackages[p] != "":
					out = append(out, goHook{key: "use " + p + "." + name + " " + where,
						what: fmt.Sprintf("uses %s.%s in %s (%s)", p, name, where, goSteeringPackages[p])})
				case p == "runtime" && !goRuntimeHarmless[name]:
					out = append(out, goHook{key: "use runtime." + name + " " + where,
						what: fmt.Sprintf("uses runtime.%s in %s (it can end the program or read its call stack)", name, where)})
				case p == "flag" && name == "Lookup":
					out = append(out, goHook{key: "flag.Lookup " + where, what: "calls flag.Lookup in " + where + " (it can tell a test binary apart)"})
				case p == "flag" && name == "Set":
					out = append(out, goHook{key: "flag.Set " + where, what: "calls flag.Set in " + where + " (test.run, test.count … steer the test binary)"})
				case p == "flag" && (name == "CommandLine" || name == "Visit" || name == "VisitAll" || name == "Parsed" ||
					name == "Args" || name == "Arg" || name == "NArg" || name == "NFlag" || name == "Parse"):
					out = append(out, goHook{key: "flag." + name + " " + where, what: "uses flag." + name + " in " + where + " (it can tell a test binary apart)"})
				}
			}
			return true
		})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			where := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) > 0 {
				where = "(" + show(d.Recv.List[0].Type) + ")." + where
			}
			if d.Recv == nil && (d.Name.Name == "init" || d.Name.Name == "TestMain") {
				out = append(out, goHook{key: d.Name.Name + " " + text(d),
					what: "adds or changes " + d.Name.Name + "() (it runs before the tests)"})
			}
			calls(where, d)
		case *ast.GenDecl:
			if d.Tok == gotoken.IMPORT {
				continue
			}
			if d.Tok != gotoken.VAR {
				calls("a package-level "+d.Tok.String(), d)
				continue
			}
			for _, s := range d.Specs {
				vs := s.(*ast.ValueSpec)
				names := make([]string, len(vs.Names))
				for i, n := range vs.Names {
					names[i] = n.Name
				}
				where := "the initialiser of var " + strings.Join(names, ", ")
				calls(where, vs)
				for _, v := range vs.Values {
					ast.Inspect(v, func(n ast.Node) bool {
						call, ok := n.(*ast.CallExpr)
						if !ok {
							return true
						}
						if _, lit := call.Fun.(*ast.FuncLit); !lit && initCallsAllowed[resolvedCall(call.Fun, imports, own)] {
							return true
						}
						out = append(out, goHook{key: "initcall " + text(call),
							what: "calls a function in " + where + " (it runs at package initialisation, before the tests)"})
						return false
					})
				}
			}
		}
	}
	return out
}

// goDeclText identifies the package-level declarations of name in f by
// their text (so changing a shadowing function's body is a change).
func goDeclText(fset *gotoken.FileSet, f *ast.File, name string) string {
	var b bytes.Buffer
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == name {
				printer.Fprint(&b, fset, d)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.Name == name {
							printer.Fprint(&b, fset, s)
						}
					}
				case *ast.TypeSpec:
					if s.Name.Name == name {
						printer.Fprint(&b, fset, s)
					}
				}
			}
		}
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:8])
}

// resolvedCall is the function a call expression names, resolved: a
// package's function by its import path ("path/filepath.Join"), a built-in
// or a conversion by its name ("max", "[]byte") when the package does not
// declare that name (own), "" for anything else — a method, a function of
// the package, a name the imports do not explain.
func resolvedCall(e ast.Expr, imports map[string]string, own map[string]bool) string {
	switch x := e.(type) {
	case *ast.Ident:
		if goPredeclared[x.Name] && !own[x.Name] {
			return x.Name
		}
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok && imports[id.Name] != "" && !own[id.Name] {
			return imports[id.Name] + "." + x.Sel.Name
		}
	case *ast.ArrayType:
		if id, ok := x.Elt.(*ast.Ident); ok && x.Len == nil && goPredeclared[id.Name] && !own[id.Name] {
			return "[]" + id.Name
		}
	case *ast.ParenExpr:
		return resolvedCall(x.X, imports, own)
	}
	return ""
}
