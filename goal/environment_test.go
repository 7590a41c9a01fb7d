package goal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fixtures under testdata/checkoutput are real output of the real
// tools on this project's CI machine; testdata/checkoutput/README.md says
// how each was made.
func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "checkoutput", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// classify reads out as the loop does: the scanner's environment lines,
// then the last CheckTailKeep bytes.
func classify(out string, env Environment) *EnvFailure {
	s := NewOutputScanner()
	s.Write([]byte(out))
	tail := out
	if len(tail) > CheckTailKeep {
		tail = tail[len(tail)-CheckTailKeep:]
	}
	return EnvironmentFailure(s.EnvLines()+"\n"+tail, env)
}

func TestEnvironmentFailure(t *testing.T) {
	pyDeps := Environment{Declared: map[string][]string{"pypi": {"PyYAML", "requests>=2"}}}
	cases := []struct {
		name, fixture string
		env           Environment
		// want: ecosystem, cause, missing; cause "" means the agent's.
		eco, cause, missing string
	}{
		// Go: no network, no module cache: the download is refused.
		{"go: no resolver, no network", "go-dns.txt", Environment{}, "go", EnvDownload, "github.com/google/uuid@v1.6.0"},
		{"go: no nameserver answering", "go-nores.txt", Environment{}, "go", EnvDownload, "github.com/google/uuid@v1.6.0"},
		{"go: GOPROXY=off and an empty module cache", "go-proxyoff.txt", Environment{}, "go", EnvMissingDependency, "github.com/google/uuid@v1.6.0"},
		{"go: go.sum lacks the dependency", "go-nosum.txt", Environment{}, "go", EnvMissingDependency, "github.com/google/uuid"},
		{"go: a dependency the prepared cache lacks (-mod=mod)", "go-newdep-modmod.txt", Environment{}, "go", EnvMissingDependency, "github.com/google/go-cmp/cmp"},
		{"go: an import no module in go.mod provides", "go-newdep-plain.txt", Environment{}, "go", EnvMissingDependency, "github.com/google/go-cmp/cmp"},
		{"go: the setup step did not fill the read-only module cache", "go-deps-readonly.txt", Environment{}, "go", EnvMissingDependency, "github.com/mattn/go-colorable"},
		{"go: go.mod needs a newer Go (GOTOOLCHAIN=local)", "go-toolchain-local.txt", Environment{}, "go", EnvToolchain, "go >= 1.99"},
		{"go: toolchain download refused", "go-toolchain-auto.txt", Environment{}, "go", EnvToolchain, "go1.99.0"},
		// Go: the code's own failures.
		{"go: a plain test failure", "go-plain-fail.txt", Environment{}, "", "", ""},
		{"go: two packages' plain test failures", "go-two-packages.txt", Environment{}, "", "", ""},
		{"go: a failing test beside a passing test that logs a lookup error", "go-plain-fail-v.txt", Environment{}, "", "", ""},
		{"go: a package of the module itself is missing", "go-localmissing.txt", Environment{}, "", "", ""},
		{"go: an import path that is not in std", "go-notstd.txt", Environment{}, "", "", ""},
		{"go: an import cycle", "go-cycle.txt", Environment{}, "", "", ""},
		{"go: vet failure and a panic", "go-vet-panic.txt", Environment{}, "", "", ""},
		{"go: failures among usage text", "go-cli-usage.txt", Environment{}, "", "", ""},
		{"go -v: failures among usage text", "go-cli-usage-v.txt", Environment{}, "", "", ""},
		{"go -v: parallel subtests fail", "go-parallel-v.txt", Environment{}, "", "", ""},
		{"go -v: many failing tests in a long output", "go-many-failing-v.txt", Environment{}, "", "", ""},
		{"go -v: a failing test whose output lacks a final newline", "go-fail-v-glued.txt", Environment{}, "", "", ""},

		// npm and node.
		{"npm install: EAI_AGAIN", "npm-install-offline.txt", Environment{}, "npm", EnvDownload, "https://registry.npmjs.org/left-pad"},
		{"npm install: ENOTFOUND", "npm-install-enotfound.txt", Environment{}, "npm", EnvDownload, "https://registry.npmjs.org/left-pad"},
		{"npx: ENOTFOUND", "npx-enotfound.txt", Environment{}, "npm", EnvDownload, "https://registry.npmjs.org/jest"},
		{"node: a dependency not installed (require)", "npm-cannot-find-module.txt", Environment{}, "npm", EnvMissingDependency, "left-pad"},
		{"node: a dependency not installed (import)", "npm-esm-cannot-find-package.txt", Environment{}, "npm", EnvMissingDependency, "left-pad"},
		{"npm test: the test runner is not installed", "npm-jest-not-found.txt", Environment{}, "npm", EnvMissingDependency, "jest"},
		{"node: a plain test failure", "npm-plain-fail.txt", Environment{}, "", "", ""},
		{"jest: a plain test failure", "jest-fail.txt", Environment{}, "", "", ""},
		{"node: a relative module of the project is missing", "npm-local-module-missing.txt", Environment{}, "", "", ""},

		// Python.
		{"python -m pytest without pytest", "python-no-pytest.txt", Environment{}, "pypi", EnvMissingTool, "pytest"},
		{"pip: no index reachable", "pip-offline.txt", Environment{}, "pypi", EnvDownload, "requests==2.31.0"},
		{"pytest: a declared dependency is not installed", "pytest-requests-missing.txt", pyDeps, "pypi", EnvMissingDependency, "requests"},
		{"pytest: an undeclared module is the code's", "pytest-requests-missing.txt", Environment{}, "", "", ""},
		{"pytest: a module the agent is to write", "pytest-local-module-missing.txt", pyDeps, "", "", ""},
		{"pytest: an unknown module, nothing declared", "pytest-modulenotfound.txt", Environment{}, "", "", ""},
		{"pytest: a plain test failure", "pytest-plain-fail.txt", pyDeps, "", "", ""},
		{"pytest: long output with failures", "pytest-long.txt", pyDeps, "", "", ""},
		{"unittest: failures", "unittest-fail.txt", Environment{}, "", "", ""},

		// Rust.
		{"cargo: the index cannot be reached", "cargo-offline-net.txt", Environment{}, "crates", EnvDownload, "itoa"},
		{"cargo --offline: the crate is not cached", "cargo-offline-flag.txt", Environment{}, "crates", EnvMissingDependency, "itoa"},
		{"cargo: a plain test failure", "cargo-plain-fail.txt", Environment{}, "", "", ""},

		// Maven and Gradle.
		{"maven: a plugin cannot be transferred", "mvn-offline-net.txt", Environment{}, "maven", EnvDownload, "org.apache.maven.plugins:maven-resources-plugin:pom:2.6"},
		{"maven -o: a plugin not downloaded before", "mvn-offline-flag.txt", Environment{}, "maven", EnvMissingDependency, "org.apache.maven.plugins:maven-resources-plugin:jar:2.6"},
		{"maven -o: a dependency not downloaded before", "mvn-deps-offline.txt", Environment{}, "maven", EnvMissingDependency, "com.google.guava:guava:jar:33.0.0-jre"},
		{"maven: a dependency cannot be transferred", "mvn-deps-net.txt", Environment{}, "maven", EnvDownload, "com.google.guava:guava:pom:33.0.0-jre"},
		{"gradle: a dependency cannot be fetched", "gradle-net.txt", Environment{}, "gradle", EnvDownload, "https://repo.maven.apache.org/maven2/com/google/guava/guava/33.0.0-jre/guava-33.0.0-jre.pom"},
		{"gradle --offline: not cached", "gradle-offline-flag.txt", Environment{}, "gradle", EnvMissingDependency, "com.google.guava:guava:33.0.0-jre"},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.fixture] = true
		t.Run(c.name, func(t *testing.T) {
			out := fixture(t, c.fixture)
			got := classify(out, c.env)
			if c.cause == "" {
				if got != nil {
					t.Fatalf("the agent's failure taken for the environment's: %+v", *got)
				}
				return
			}
			if got == nil {
				t.Fatalf("not recognised as an environment failure; want %s %s %q", c.eco, c.cause, c.missing)
			}
			if got.Ecosystem != c.eco || got.Cause != c.cause || got.Missing != c.missing {
				t.Errorf("got %s %s %q, want %s %s %q (line %q)", got.Ecosystem, got.Cause, got.Missing, c.eco, c.cause, c.missing, got.Line)
			}
			if got.Line == "" || !strings.Contains(out, strings.TrimSuffix(got.Line, "…")) {
				t.Errorf("line %q is not from the output", got.Line)
			}
			d := got.Describe()
			if c.missing != "" && !strings.Contains(d, c.missing) {
				t.Errorf("Describe() = %q does not name %q", d, c.missing)
			}
			fixes := strings.Join(got.Fixes(Environment{}), " ")
			for _, flag := range []string{"--image", "--mount", "--setup"} {
				if !strings.Contains(fixes, flag) && got.Cause != EnvNetwork {
					t.Errorf("fixes do not name %s: %q", flag, fixes)
				}
			}
		})
	}
	// Every fixture is used by a case (or by the failure-lines goldens).
	entries, err := os.ReadDir(filepath.Join("testdata", "checkoutput"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".txt") && !seen[e.Name()] {
			t.Errorf("fixture %s is not classified by any case", e.Name())
		}
	}
}

// TestEnvironmentFailureFarFromTheTail: a download refused at the start of
// a long output (hundreds of packages passing after it) is still found,
// through the scanner, not the tail.
func TestEnvironmentFailureFarFromTheTail(t *testing.T) {
	out := fixture(t, "go-dns.txt")
	for i := 0; i < 3000; i++ {
		out += "ok  \texample.com/uuidapp/pkg" + strings.Repeat("x", i%7) + "\t0.004s\n"
	}
	got := classify(out, Environment{})
	if got == nil || got.Cause != EnvDownload || got.Missing != "github.com/google/uuid@v1.6.0" {
		t.Fatalf("got %+v", got)
	}
}

func TestEnvFailureFixes(t *testing.T) {
	for _, cause := range []string{EnvDownload, EnvMissingDependency, EnvMissingTool, EnvToolchain, EnvNetwork} {
		for _, local := range []bool{false, true} {
			f := EnvFailure{Ecosystem: "go", Cause: cause, Missing: "x"}
			fixes := f.Fixes(Environment{Local: local})
			if len(fixes) == 0 {
				t.Errorf("%s local=%v: no fix", cause, local)
			}
			for _, s := range fixes {
				if !strings.HasSuffix(s, ".") || strings.ContainsAny(s, "`$|") {
					t.Errorf("%s: not a plain sentence: %q", cause, s)
				}
			}
			if d := f.Describe(); d == "" || strings.HasSuffix(d, ".") {
				t.Errorf("%s: Describe() = %q, want a clause", cause, d)
			}
		}
	}
}
