package docs

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const module = "github.com/goalrun/goalrun"

// Outside modules only some packages may import (docs/architecture.md,
// "Package map"; CONTRIBUTING.md, "Dependencies between packages").
const (
	goGitHub        = "github.com/google/go-github/"
	goGitHubActions = "github.com/sethvargo/go-githubactions"
)

// testOnlyModules are outside modules only tests may use: the goalrun
// binary links none of them (CONTRIBUTING.md, "Dependencies between
// packages").
var testOnlyModules = []string{
	"github.com/santhosh-tekuri/jsonschema/", // reporttest, githubtest
	"github.com/getkin/kin-openapi/",         // githubtest
}

// listedPackage is what go list says of one package.
type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// goList runs go list -json on the module's packages (from the root).
func goList(t *testing.T, args ...string) []listedPackage {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(gobin, append([]string{"list", "-json"}, args...)...)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %s listed no package", strings.Join(args, " "))
	}
	return pkgs
}

// inModule reports whether import path p is one of the module's packages.
func inModule(p string) bool { return p == module || strings.HasPrefix(p, module+"/") }

// under reports whether import path p is the module's package dir or one
// below it.
func under(p, dir string) bool {
	d := module + "/" + dir
	return p == d || strings.HasPrefix(p, d+"/")
}

// standard reports whether import path p is of the standard library: its
// first element has no dot, as every module path outside it has
// (https://go.dev/ref/mod#module-path).
func standard(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

// TestDependencyRules enforces the layering of docs/architecture.md on the
// packages' direct imports: the sandbox knows nothing of agents, documents
// or GitHub; the loop and the agents know nothing of GitHub, the agents
// nothing of the document; the workspace tracker nothing of the loop, the
// document or the sandbox; the document knows nothing of the loop;
// grounding knows nothing of goalrun but the shared leaves (internal), and
// only the loop, the workspace tracker and the command use it; only the command and
// the GitHub package import go-github and go-githubactions; the lazy
// regular expressions import only the standard library.
func TestDependencyRules(t *testing.T) {
	type rule struct {
		name      string
		applies   func(pkg string) bool
		forbidden func(imp string) bool
	}
	rules := []rule{
		{"the sandbox imports no goal, report, setup or command package",
			func(p string) bool { return under(p, "sandbox") },
			func(i string) bool {
				return under(i, "goal") || under(i, "report") || under(i, "setup") || under(i, "cmd")
			}},
		{"the egress proxy imports nothing of goalrun",
			func(p string) bool { return under(p, "sandbox/egress") },
			func(i string) bool { return inModule(i) && !under(i, "sandbox/egress") }},
		{"the loop and the agents import nothing of GitHub or the command",
			func(p string) bool { return under(p, "goal") },
			func(i string) bool { return under(i, "report/ghreport") || under(i, "cmd") }},
		{"the workspace tracker imports nothing of the loop, the agents, the document, the sandbox or the command",
			func(p string) bool { return under(p, "goal/workspace") },
			func(i string) bool {
				return under(i, "goal") && !under(i, "goal/workspace") || under(i, "report") || under(i, "sandbox") || under(i, "cmd")
			}},
		{"the agents import nothing of the document (they cap with internal/textcap)",
			func(p string) bool { return under(p, "goal/agent") },
			func(i string) bool { return under(i, "report") }},
		{"the document imports nothing of the loop, the agents or the command",
			func(p string) bool { return under(p, "report") && !under(p, "report/ghreport") },
			func(i string) bool { return under(i, "goal") || under(i, "cmd") || under(i, "report/ghreport") }},
		{"grounding imports nothing of goalrun but its shared leaves (internal)",
			func(p string) bool { return under(p, "grounding") },
			func(i string) bool { return inModule(i) && !under(i, "grounding") && !under(i, "internal") }},
		{"only the loop, the workspace tracker and the command import grounding",
			func(p string) bool {
				return p != module+"/goal" && !under(p, "goal/workspace") && !under(p, "cmd/goalrun") && !under(p, "grounding")
			},
			func(i string) bool { return under(i, "grounding") }},
		{"the GitHub package imports nothing of the loop, the sandbox or the command",
			func(p string) bool { return under(p, "report/ghreport") },
			func(i string) bool { return under(i, "goal") || under(i, "sandbox") || under(i, "cmd") }},
		{"only the command and the GitHub package import go-github and go-githubactions",
			func(p string) bool { return !under(p, "cmd/goalrun") && !under(p, "report/ghreport") },
			func(i string) bool { return strings.HasPrefix(i, goGitHub) || i == goGitHubActions }},
		{"setup imports nothing of goalrun but its shared leaves (internal)",
			func(p string) bool { return under(p, "setup") },
			func(i string) bool { return inModule(i) && !under(i, "setup") && !under(i, "internal") }},
		{"only the sandbox writes the agent's tree to the host (internal/treecopy)",
			func(p string) bool { return !under(p, "sandbox") || under(p, "sandbox/egress") },
			func(i string) bool { return under(i, "internal/treecopy") }},
		{"the shared leaves (internal) import nothing of goalrun",
			func(p string) bool { return under(p, "internal") },
			func(i string) bool { return inModule(i) && !under(i, "internal") }},
		{"the lazy regular expressions (internal/lazyre) import only the standard library",
			func(p string) bool { return under(p, "internal/lazyre") },
			func(i string) bool { return !standard(i) }},
		{"the docs package imports nothing of goalrun",
			func(p string) bool { return under(p, "docs") },
			func(i string) bool { return inModule(i) && !under(i, "docs") }},
	}
	pkgs := goList(t, "./...")
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			applied := 0
			for _, p := range pkgs {
				if !r.applies(p.ImportPath) {
					continue
				}
				applied++
				for _, imp := range p.Imports {
					if r.forbidden(imp) {
						t.Errorf("%s imports %s", strings.TrimPrefix(p.ImportPath, module+"/"), imp)
					}
				}
			}
			if applied == 0 {
				t.Errorf("no package of the module matches the rule: a package was renamed; update the rule")
			}
		})
	}
}

// TestLeafBuilds: the rules packages build without the loop, the document,
// the sandbox or the Docker client, through no package at all (go list
// -deps): grounding is a leaf, and the workspace tracker needs only it, so
// a change to the sandbox or the Engine's client never rebuilds, nor can
// break, the snapshot and diff (docs/architecture.md, "Package map").
func TestLeafBuilds(t *testing.T) {
	forbidden := []struct {
		name string
		in   func(dep string) bool
	}{
		{"the loop or the agents", func(d string) bool { return under(d, "goal") && !under(d, "goal/workspace") }},
		{"the document", func(d string) bool { return under(d, "report") }},
		{"the sandbox", func(d string) bool { return under(d, "sandbox") }},
		{"the Docker client", func(d string) bool { return strings.HasPrefix(d, "github.com/docker/") }},
	}
	for _, pkg := range []string{"grounding", "goal/workspace"} {
		t.Run(pkg, func(t *testing.T) {
			deps := goList(t, "-deps", "./"+pkg)
			for _, d := range deps {
				for _, f := range forbidden {
					if f.in(d.ImportPath) {
						t.Errorf("%s builds %s (%s)", pkg, d.ImportPath, f.name)
					}
				}
			}
			if last := deps[len(deps)-1].ImportPath; last != module+"/"+pkg {
				t.Errorf("go list -deps ./%s ended with %s, not the package itself", pkg, last)
			}
		})
	}
}

// TestNoTestHelpersInBinary: the goalrun binary (go list -deps
// ./cmd/goalrun) links no test helper — a package whose name ends in
// "test": the module's fakes, net/http/httptest, testing — and no outside
// module only tests use. What the binary needs of a fake lives in a package
// of its own (goal/agent/scripted for the demo).
func TestNoTestHelpersInBinary(t *testing.T) {
	pkgs := goList(t, "-deps", "./cmd/goalrun")
	for _, p := range pkgs {
		path := p.ImportPath
		name := path[strings.LastIndex(path, "/")+1:]
		if path == "testing" || strings.HasSuffix(name, "test") && !strings.HasPrefix(path, "internal/") {
			t.Errorf("the goalrun binary links %s, a test helper: move what needs it into a _test.go file, or what the binary needs of it into a package of its own", path)
		}
		for _, m := range testOnlyModules {
			if strings.HasPrefix(path+"/", m) {
				t.Errorf("the goalrun binary links %s, a library only tests may use", path)
			}
		}
	}
}
