package setup

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/sandbox"
)

func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDetect(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  Project
		steps []string // "dir: command"
	}{
		{"empty", nil, Project{}, nil},
		{"one Go module", map[string]string{"go.mod": "module example.com/a\n\nrequire example.com/b v1.0.0\n", "a.go": "package a\n"},
			Project{Ecosystems: []string{"go"}, GoModules: []string{"."}},
			[]string{".: go mod download", ".: " + GoWarmCommand}},
		{"a module that requires nothing: no download", map[string]string{"go.mod": "module example.com/a\n\ngo 1.22\n\nrequire ()\n", "a.go": "package a\n"},
			Project{Ecosystems: []string{"go"}, GoModules: []string{"."}, GoRequireless: map[string]bool{".": true}},
			[]string{".: " + GoWarmCommand}},
		{"a module without Go source or requirements: nothing to prepare", map[string]string{"go.mod": "module example.com/a\n", "README.md": "x", "testdata/x.go": "package x\n", "_tools/y.go": "package y\n"},
			Project{Ecosystems: []string{"go"}, GoModules: []string{"."}, GoRequireless: map[string]bool{".": true}, GoSourceless: map[string]bool{".": true}},
			nil},
		{"a folder the walk does not enter may hold Go: the warm step stays", map[string]string{"go.mod": "module example.com/a\n", "build/b.go": "package build\n"},
			Project{Ecosystems: []string{"go"}, GoModules: []string{"."}, GoRequireless: map[string]bool{".": true}},
			[]string{".: " + GoWarmCommand}},
		{"multi-module repository", map[string]string{
			"go.mod": "module example.com/r\nrequire example.com/x v1.0.0\n", "r.go": "package r\n",
			"api/go.mod": "module example.com/r/api\nrequire example.com/x v1.0.0\n", "api/v1/api.go": "package v1\n",
			"tools/lint/go.mod": "module x\n"},
			Project{Ecosystems: []string{"go"}, GoModules: []string{".", "api", "tools/lint"}, GoRequireless: map[string]bool{"tools/lint": true}, GoSourceless: map[string]bool{"tools/lint": true}},
			[]string{".: go mod download", ".: " + GoWarmCommand, "api: go mod download", "api: " + GoWarmCommand}},
		{"Go source only in a nested module", map[string]string{"go.mod": "module example.com/r\nrequire example.com/x v1.0.0\n", "sub/go.mod": "module example.com/r/sub\n", "sub/s.go": "package sub\n"},
			Project{Ecosystems: []string{"go"}, GoModules: []string{".", "sub"}, GoRequireless: map[string]bool{"sub": true}, GoSourceless: map[string]bool{".": true}},
			[]string{".: go mod download", "sub: " + GoWarmCommand}},
		{"go.work: the root covers the workspace", map[string]string{"go.work": "go 1.22\nuse ./a\nuse ./b\n", "a/go.mod": "module a\n", "b/go.mod": "module b\n"},
			Project{Ecosystems: []string{"go"}, GoModules: []string{"a", "b"}, GoWork: true, GoRequireless: map[string]bool{"a": true, "b": true}, GoSourceless: map[string]bool{"a": true, "b": true}},
			[]string{".: go mod download", ".: " + GoWarmCommand}},
		{"vendored module: no download", map[string]string{"go.mod": "module v\nrequire x v1.0.0\n", "v.go": "package v\n", "vendor/modules.txt": "# x\n", "vendor/x/go.mod": "module x\n"},
			Project{Ecosystems: []string{"go"}, GoModules: []string{"."}, GoVendored: map[string]bool{".": true}},
			[]string{".: " + GoWarmCommand}},
		{"npm with a lock file", map[string]string{"package.json": "{}", "package-lock.json": "{}", "web/package.json": "{}", "web/package-lock.json": "{}", "web/node_modules/x/package.json": "{}"},
			Project{Ecosystems: []string{"npm"}, NpmLocked: []string{"."}},
			[]string{".: npm ci"}},
		{"npm without a lock file: nothing run", map[string]string{"package.json": "{}"}, Project{Ecosystems: []string{"npm"}}, nil},
		{"python manifests", map[string]string{
			"requirements.txt":     "# comment\nrequests>=2.31\n-r requirements-dev.txt\nPyYAML==6.0.1 ; python_version>'3'\n--index-url https://x\nattrs\n",
			"requirements-dev.txt": "pytest[testing]~=7.0\n",
			"pyproject.toml":       "[project]\nname = \"demo\"\ndependencies = [\n  \"httpx>=0.27\",\n  'rich',\n]\n[project.optional-dependencies]\ndocs = [\"mkdocs\"]\n[tool.poetry.dependencies]\npython = \"^3.11\"\nclick = \"^8\"\n",
			"setup.cfg":            "[options]\ninstall_requires =\n    numpy>=1.26\n    pandas\n",
			"Pipfile":              "[packages]\nflask = \"*\"\n[dev-packages]\nblack = \"*\"\n",
			"setup.py":             "from setuptools import setup\nsetup(name='x', install_requires=['six', \"jinja2>=3\"])\n"},
			Project{Ecosystems: []string{"pypi"}, PythonDeps: []string{"PyYAML", "attrs", "black", "click", "flask", "httpx", "jinja2", "mkdocs", "numpy", "pandas", "pytest", "requests", "rich", "six"}},
			nil},
		{"rust, maven, gradle", map[string]string{"Cargo.toml": "[package]\n", "svc/pom.xml": "<project/>", "app/build.gradle.kts": ""},
			Project{Ecosystems: []string{"crates", "gradle", "maven"}}, nil},
		{"dependency and hidden folders are not read", map[string]string{"node_modules/x/go.mod": "module x\n", "vendor/y/Cargo.toml": "", ".cache/z/pom.xml": "", "testdata/m/go.mod": "module m\n"},
			Project{}, nil},
		{"too deep", map[string]string{"a/b/c/d/e/f/g/go.mod": "module deep\n"}, Project{}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Detect(tree(t, c.files))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []*map[string]bool{&c.want.GoVendored, &c.want.GoRequireless, &c.want.GoSourceless} {
				if *m == nil {
					*m = map[string]bool{}
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Detect =\n%+v\nwant\n%+v", got, c.want)
			}
			var steps []string
			for _, s := range got.Steps() {
				steps = append(steps, s.Dir+": "+s.Command)
				if !s.Detected || s.Why == "" {
					t.Errorf("step %+v: not marked detected or no reason", s)
				}
			}
			if !reflect.DeepEqual(steps, c.steps) {
				t.Errorf("Steps = %q, want %q", steps, c.steps)
			}
			if !reflect.DeepEqual(got.AllowHosts(), got.Ecosystems) {
				t.Errorf("AllowHosts = %q", got.AllowHosts())
			}
		})
	}
}

// TestDetectDoesNotFollowLinks: a link in the workspace to a folder
// outside it is not walked, and a manifest that is a link is not read (the
// tree may come from a pull request).
func TestDetectDoesNotFollowLinks(t *testing.T) {
	outside := tree(t, map[string]string{"go.mod": "module outside\n", "requirements.txt": "secret-package\n"})
	ws := tree(t, map[string]string{"README": "x"})
	if err := os.Symlink(outside, filepath.Join(ws, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "requirements.txt"), filepath.Join(ws, "requirements.txt")); err != nil {
		t.Fatal(err)
	}
	got, err := Detect(ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Ecosystems) != 0 || len(got.PythonDeps) != 0 {
		t.Errorf("Detect followed a link: %+v", got)
	}
}

func TestDetectBounded(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < 300; i++ {
		files[filepath.Join("many", strings.Repeat("d", i%7+1)+string(rune('a'+i%26)), "f"+string(rune('a'+i%26))+".txt")] = ""
	}
	files["go.mod"] = "module m\n"
	ws := tree(t, files)
	got, err := Detect(ws)
	if err != nil || len(got.GoModules) != 1 || got.Truncated {
		t.Errorf("Detect = %+v, %v", got, err)
	}
}

func TestEnv(t *testing.T) {
	p := Project{Ecosystems: []string{"crates", "go", "gradle", "npm", "pypi"}}
	setup, check := p.Env(sandbox.DepsDir, false), p.Env(sandbox.DepsDir, true)
	for k, v := range setup {
		if check[k] != v {
			t.Errorf("%s: setup %q, check %q: the check must find what the setup step prepared where it put it", k, v, check[k])
		}
		if !strings.HasPrefix(v, sandbox.DepsDir) && k != "GOTOOLCHAIN" && !strings.Contains(v, sandbox.DepsDir) {
			t.Errorf("%s=%q is not under %s", k, v, sandbox.DepsDir)
		}
	}
	for k, v := range map[string]string{"GOPROXY": "off", "npm_config_offline": "true", "CARGO_NET_OFFLINE": "true"} {
		if check[k] != v || setup[k] != "" {
			t.Errorf("%s: check %q setup %q, want %q offline only", k, check[k], setup[k], v)
		}
	}
	if env := (Project{}).Env(sandbox.DepsDir, true); len(env) != 0 {
		t.Errorf("no ecosystem, yet %v", env)
	}
	if env := (Project{Ecosystems: []string{"npm"}}).Env(sandbox.DepsDir, true); env["GOCACHE"] != "" {
		t.Errorf("Go variables without Go: %v", env)
	}
}
