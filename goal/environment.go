package goal

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/goalrun/goalrun/internal/lazyre"
	"github.com/goalrun/goalrun/sandbox"
)

// Causes of an environment failure (EnvFailure.Cause; failure.cause of
// report.ErrEnvironmentFailed).
const (
	// EnvDownload: the check tried to download a dependency (a module, a
	// package, an artifact, a toolchain) and could not: the check has no
	// network.
	EnvDownload = "dependency_download"
	// EnvMissingDependency: a dependency is not among those prepared for
	// the check, and the tool was told not to download it (GOPROXY=off,
	// offline mode) or looked for it only locally (node_modules, the
	// interpreter's packages).
	EnvMissingDependency = "missing_dependency"
	// EnvMissingTool: the check's own tool is missing: an interpreter
	// module run with -m, a test runner a script names.
	EnvMissingTool = "missing_tool"
	// EnvToolchain: the project needs another toolchain version than the
	// sandbox has.
	EnvToolchain = "toolchain"
	// EnvNetwork: the check needed a host on the network.
	EnvNetwork = "network"
)

// EnvFailure says that a check failed because of its environment — what
// the sandbox offers it — rather than the code: it could not download a
// dependency, a dependency or tool is missing, the toolchain is too old, or
// it needed the network. The agent cannot mend any of it from inside the
// sandbox; the user can, with a setup step, the egress allowlist, an image
// or a mount.
type EnvFailure struct {
	// Ecosystem is the toolchain that said so: go, npm, pypi, crates,
	// maven, gradle; "" for a network failure of no known tool.
	Ecosystem string
	// Cause is one of the Env* causes.
	Cause string
	// Missing names what was missing or unreachable, as the tool wrote it
	// (a module path, a package, an artifact, a host); "" when the output
	// names none.
	Missing string
	// Line is the output line that shows it, trimmed.
	Line string
}

// Environment is what goalrun knows of the project beyond the check's
// output, for telling an environment failure from the agent's. The zero
// value knows nothing.
type Environment struct {
	// Declared are the dependencies the untouched workspace declares, by
	// ecosystem: for pypi the distribution names of requirements files,
	// pyproject.toml, setup.cfg, setup.py and Pipfile. A Python module
	// that cannot be imported is the environment's only when it is
	// declared (or is the tool the check runs), since a test importing a
	// module the agent is to write fails the same way.
	Declared map[string][]string
	// Setup lists the setup commands that ran before the first check
	// (--setup and the detected defaults), for the failure's message.
	Setup []string
	// Local says the steps run on the host (the local sandbox): the check
	// then has the host's network and caches, and the advice differs.
	Local bool
}

var ecosystemNames = map[string]string{
	"go": "Go", "npm": "npm", "pypi": "Python", "crates": "Rust", "maven": "Maven", "gradle": "Gradle",
}

// Describe says in one clause what went wrong, e.g. "the check could not
// download the Go module github.com/google/uuid@v1.6.0: it has no network".
func (f EnvFailure) Describe() string {
	what := f.Missing
	eco := ecosystemNames[f.Ecosystem]
	switch f.Cause {
	case EnvDownload:
		if what == "" {
			what = "its dependencies"
		} else if eco != "" {
			what = eco + " dependency " + what
		}
		return fmt.Sprintf("the check tried to download %s and could not (the check has no network)", what)
	case EnvMissingDependency:
		if what == "" {
			what = "a dependency"
		} else if eco != "" {
			what = "the " + eco + " dependency " + what
		}
		return fmt.Sprintf("%s is not among the dependencies prepared for the check", what)
	case EnvMissingTool:
		if eco != "" && what != "" {
			what = eco + "'s " + what
		}
		return fmt.Sprintf("the check's tool %s is not installed where the check runs", firstNonBlank(what, "it needs"))
	case EnvToolchain:
		return fmt.Sprintf("the project needs %s, which the sandbox does not have", firstNonBlank(what, "another toolchain version"))
	}
	if what == "" {
		return "the check needed the network, and it has none"
	}
	return fmt.Sprintf("the check needed the network (it tried to reach %s), and it has none", what)
}

// Fixes returns the suggestions for f: plain sentences naming the flags
// (and config keys) that mend it.
func (f EnvFailure) Fixes(env Environment) []string {
	if env.Local {
		switch f.Cause {
		case EnvMissingTool, EnvToolchain:
			return []string{"Install what the check needs on this machine (the local sandbox runs the check on the host), or run goalrun in Docker with --image naming an image that has it."}
		}
		return []string{
			"The local sandbox runs the check on this machine with its network: make sure this machine can reach the registry, or prepare the dependencies with a --setup command (the setup setting), which runs in the workspace before the first check.",
		}
	}
	switch f.Cause {
	case EnvMissingTool, EnvToolchain:
		return []string{
			"Pass --image with an image that has it, or mount the folder it is installed in with --mount (read-only).",
			"A --setup command (the setup setting) can install it into the workspace before the first check; allow its registry with --allow-host (ecosystem names such as pypi or npm are presets).",
		}
	case EnvNetwork:
		return []string{
			"The check always runs without network: make it not need one, or fetch what it needs before the first check with a --setup command (the setup setting), whose container may reach the hosts allowed with --allow-host.",
		}
	}
	return []string{
		"Prepare the dependencies before the first check with a --setup command (the setup setting): it runs on the untouched workspace in its own container, which may reach only package registries, and the check then sees what it prepared.",
		allowHostFix,
		"Or pass --image with an image that holds the dependencies, or --mount a folder that does.",
	}
}

// allowHostFix is the advice to allow the setup step's registry, which
// withAllowNetsFix drops when the registry is allowed but resolves into a
// refused address.
const allowHostFix = "If the setup step must reach a registry or host that is not allowed, add it with --allow-host; ecosystem names (go, npm, pypi, crates, maven, gradle) stand for their registries."

// envRule recognises one environment failure in one line of output.
type envRule struct {
	eco, cause string
	re         *lazyre.Regexp
	// missing is the submatch naming what is missing (0: none).
	missing int
	// generic rules (a network failure of no particular tool) count only
	// when the output names no failing test: a test that logs a lookup
	// error among real failures is the agent's.
	generic bool
	// accept, when set, may refuse a match (out is the whole text read).
	accept func(m []string, out string, env Environment) bool
}

// The rules are tried in order; the first that matches a line wins.
var envRules = []envRule{
	// Go. Toolchain first: nothing else can work without it.
	{eco: "go", cause: EnvToolchain, re: lazyre.New(`^go: go\.mod requires (go >= \S+) \(running go \S+; GOTOOLCHAIN=local\)`), missing: 1},
	{eco: "go", cause: EnvToolchain, re: lazyre.New(`^go: download (go\S+)( for \S+)?: `), missing: 1},
	{eco: "go", cause: EnvMissingDependency, re: lazyre.New(`cannot find module providing package (\S+): module lookup disabled`), missing: 1},
	{eco: "go", cause: EnvMissingDependency, re: lazyre.New(`(\S+@\S+): module lookup disabled by GOPROXY=off`), missing: 1},
	{eco: "go", cause: EnvMissingDependency, re: lazyre.New(`module lookup disabled by GOPROXY=off`)},
	{eco: "go", cause: EnvMissingDependency, re: lazyre.New(`missing go\.sum entry for module providing package (\S+)`), missing: 1},
	{eco: "go", cause: EnvMissingDependency, re: lazyre.New(`missing go\.sum entry for (go\.mod file|module)`)},
	{eco: "go", cause: EnvMissingDependency, re: lazyre.New(`no required module provides package (\S+?);`), missing: 1, accept: notLocalGoPackage},
	// The deps volume is read-only to the check: a module the setup step
	// did not download cannot be locked there, let alone fetched.
	{eco: "go", cause: EnvMissingDependency, re: lazyre.New(`open ` + regexp.QuoteMeta(sandbox.DepsDir) + `/\S*/cache/download/(\S+)/@v/\S+: read-only file system`), missing: 1},
	{eco: "go", cause: EnvDownload, re: lazyre.New(`(\S+@v\S+): (Get|reading|verifying|git ls-remote|unrecognized import path) .*(dial tcp|lookup |no such host|network is unreachable|connection refused|i/o timeout|TLS handshake timeout|proxyconnect|server misbehaving)`), missing: 1},
	{eco: "go", cause: EnvDownload, re: lazyre.New(`^go: (\S+@\S+): .*(dial tcp|lookup |no such host|network is unreachable)`), missing: 1},
	{eco: "go", cause: EnvDownload, re: lazyre.New(`verifying (\S+): .*(sum\.golang\.org|dial tcp|lookup )`), missing: 1},

	// npm and node.
	{eco: "npm", cause: EnvDownload, re: lazyre.New(`request to (https?://\S+) failed, reason: .*(ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET|EAI_FAIL)`), missing: 1},
	{eco: "npm", cause: EnvDownload, re: lazyre.New(`^npm (ERR!|error) code (ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET|EAI_FAIL)$`)},
	{eco: "npm", cause: EnvMissingDependency, re: lazyre.New(`Cannot find (?:module|package) '((?:@[^'/\s]+/)?[^'./\s][^'/\s]*)[^']*'`), missing: 1, accept: notNodeBuiltin},
	{eco: "npm", cause: EnvMissingDependency, re: lazyre.New(`^sh: \d+: (jest|vitest|mocha|ava|tap|tsc|ts-node|tsx|eslint|karma|playwright|cypress|nyc|c8|uvu|jasmine|ng|next|vite|webpack|rollup|esbuild|nx|turbo|lerna|react-scripts|prettier|xo|standard): not found$`), missing: 1},

	// Python: the interpreter's own module, pip, an import.
	{eco: "pypi", cause: EnvMissingTool, re: lazyre.New(`^\S*python[\d.]*: No module named (\S+)$`), missing: 1},
	{eco: "pypi", cause: EnvDownload, re: lazyre.New(`Could not find a version that satisfies the requirement (\S+)`), missing: 1},
	{eco: "pypi", cause: EnvDownload, re: lazyre.New(`No matching distribution found for (\S+)`), missing: 1},
	{eco: "pypi", cause: EnvMissingDependency, re: lazyre.New(`(?:ModuleNotFoundError|ImportError): No module named '?([A-Za-z0-9_.]+)'?`), missing: 1, accept: declaredPython},

	// Rust.
	{eco: "crates", cause: EnvDownload, re: lazyre.New("failed to get `([^`]+)` as a dependency of package"), missing: 1},
	{eco: "crates", cause: EnvDownload, re: lazyre.New("failed to download (?:from )?`([^`]+)`"), missing: 1},
	{eco: "crates", cause: EnvDownload, re: lazyre.New("failed to load source for dependency `([^`]+)`"), missing: 1},
	{eco: "crates", cause: EnvMissingDependency, re: lazyre.New("no matching package named `([^`]+)` found"), missing: 1, accept: func(_ []string, out string, _ Environment) bool {
		return strings.Contains(out, "offline")
	}},

	// Maven and Gradle.
	{eco: "maven", cause: EnvMissingDependency, re: lazyre.New(`in offline mode and the artifact (\S+) has not been downloaded`), missing: 1},
	{eco: "maven", cause: EnvDownload, re: lazyre.New(`Could not transfer artifact (\S+) from/to`), missing: 1},
	{eco: "maven", cause: EnvMissingDependency, re: lazyre.New(`Could not resolve dependencies for project (\S+?):? `), missing: 1},
	{eco: "maven", cause: EnvMissingDependency, re: lazyre.New(`The following artifacts could not be resolved: ([^,\s]+)`), missing: 1},
	{eco: "maven", cause: EnvMissingDependency, re: lazyre.New(`Plugin (\S+) or one of its dependencies could not be resolved`), missing: 1},
	{eco: "maven", cause: EnvMissingDependency, re: lazyre.New(`Non-resolvable (?:parent POM|import POM).* for (\S+?):? `), missing: 1},
	{eco: "gradle", cause: EnvMissingDependency, re: lazyre.New(`No cached version of (\S+) available for offline mode`), missing: 1},
	{eco: "gradle", cause: EnvDownload, re: lazyre.New(`Could not GET '([^']+)'`), missing: 1},
	{eco: "gradle", cause: EnvMissingDependency, re: lazyre.New(`^> Could not resolve ([\w.\-]+:[\w.\-]+:[\w.\-]+)\.$`), missing: 1},
	{eco: "gradle", cause: EnvMissingDependency, re: lazyre.New(`Could not resolve all (?:files|dependencies|artifacts) for configuration '([^']+)'`), missing: 1},
	{eco: "gradle", cause: EnvMissingDependency, re: lazyre.New(`Plugin \[id: '([^']+)'.*\] was not found`), missing: 1},
	{eco: "gradle", cause: EnvDownload, re: lazyre.New(`java\.net\.UnknownHostException: (services\.gradle\.org|downloads\.gradle\.org)`), missing: 1},

	// Any tool: the deps volume, read-only to the check, lacks what the
	// tool wanted to write there (the setup step did not prepare it).
	{cause: EnvMissingDependency, re: lazyre.New(regexp.QuoteMeta(sandbox.DepsDir) + `/\S*.*(?:[Rr]ead-only file system|EROFS)`)},

	// Any tool: the network was needed.
	{cause: EnvNetwork, re: lazyre.New(`lookup (\S+?)(?: on \S+)?: (?:no such host|server misbehaving|dial udp .*(?:network is unreachable|cannot assign requested address|connection refused))`), missing: 1, generic: true},
	{cause: EnvNetwork, re: lazyre.New(`getaddrinfo (?:ENOTFOUND|EAI_AGAIN) (\S+)`), missing: 1, generic: true},
	{cause: EnvNetwork, re: lazyre.New(`Could not resolve host:? (\S+?)\)?$`), missing: 1, generic: true},
	{cause: EnvNetwork, re: lazyre.New(`(?:java\.net\.)?UnknownHostException: (\S+)`), missing: 1, generic: true},
	{cause: EnvNetwork, re: lazyre.New(`Unknown host (\S+?):? `), missing: 1, generic: true},
	{cause: EnvNetwork, re: lazyre.New(`Temporary failure in name resolution|Name or service not known|nodename nor servname provided`), generic: true},
}

// reGoDownloading is the go command's note before it downloads a module;
// a module lookup refused without naming the module is that one.
var reGoDownloading = lazyre.New(`(?m)^go: downloading (\S+) (v\S+)$`)

// envEvidence reports whether line l may show an environment failure (the
// scanner keeps such lines from anywhere in the output).
func envEvidence(l string) bool {
	for _, r := range envRules {
		if r.re.MatchString(l) {
			return true
		}
	}
	return reGoPkgStatus.MatchString(l) && strings.Contains(l, "[setup failed]") || reGoDownloading.MatchString(l)
}

// EnvironmentFailure decides whether a failed check's output shows an
// environment failure (see EnvFailure) and returns it, or nil when the
// failure is the code's: the agent's to fix. out is what is known of the
// output: the environment lines an OutputScanner kept and the tail.
//
// A failing test is never taken for the environment by the network rules
// alone (a test may log a lookup error on purpose); a Go package that is
// missing from the module being tested, a relative Node import and a
// Python module the project does not declare are the code's.
func EnvironmentFailure(out string, env Environment) *EnvFailure {
	lines := strings.Split(out, "\n")
	named := -1 // whether the output names failing tests; computed once
	for _, r := range envRules {
		for _, raw := range lines {
			l := strings.TrimSpace(reANSI.ReplaceAllString(raw, ""))
			m := r.re.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			if r.accept != nil && !r.accept(m, out, env) {
				continue
			}
			if r.generic {
				if named < 0 {
					named = 0
					if namesFailingTests(out) {
						named = 1
					}
				}
				if named == 1 {
					break
				}
			}
			f := &EnvFailure{Ecosystem: r.eco, Cause: r.cause, Line: cutLine(l, 240)}
			if r.missing > 0 && r.missing < len(m) {
				f.Missing = strings.Trim(m[r.missing], "'\"`.:,;()")
			}
			if f.Missing == "" && r.eco == "go" {
				if d := reGoDownloading.FindStringSubmatch(out); d != nil {
					f.Missing = d[1] + "@" + d[2]
				}
			}
			return f
		}
	}
	return nil
}

// namesFailingTests reports whether out names a failing test (not just a
// failing package or a compile error).
func namesFailingTests(out string) bool {
	for _, n := range FailingTests(out) {
		kind, _, _ := strings.Cut(n, ":")
		switch kind {
		case "go", "pytest", "unittest", "jest", "cargo", "rspec", "mocha":
			return true
		}
	}
	return false
}

var reGoFailingPkg = lazyre.New(`(?m)^(?:# |FAIL\s+)(\S+)`)

// notLocalGoPackage refuses "no required module provides package P" when P
// lies in the module being built (the failing package's path shares P's
// first three elements, or all of its own when shorter): a package the
// agent is to write, or a typo, not a dependency.
func notLocalGoPackage(m []string, out string, _ Environment) bool {
	pkg := m[1]
	for _, f := range reGoFailingPkg.FindAllStringSubmatch(out, -1) {
		failing := strings.Trim(f[1], "[]")
		if sameModuleRoot(pkg, failing) {
			return false
		}
	}
	return true
}

func sameModuleRoot(a, b string) bool {
	ea, eb := strings.Split(a, "/"), strings.Split(b, "/")
	n := min(3, len(eb))
	if len(ea) < n {
		return false
	}
	for i := 0; i < n; i++ {
		if ea[i] != eb[i] {
			return false
		}
	}
	return true
}

// nodeBuiltins are Node's own modules, which "Cannot find module" never
// means as a dependency.
var nodeBuiltins = map[string]bool{"node": true}

func notNodeBuiltin(m []string, _ string, _ Environment) bool {
	return !nodeBuiltins[m[1]] && !strings.HasPrefix(m[1], "node:")
}

// pythonAliases maps import names to the distribution names that provide
// them where the two differ (the common cases).
var pythonAliases = map[string][]string{
	"yaml": {"pyyaml"}, "bs4": {"beautifulsoup4"}, "pil": {"pillow"}, "sklearn": {"scikit_learn"},
	"skimage": {"scikit_image"}, "cv2": {"opencv_python", "opencv_python_headless", "opencv_contrib_python"},
	"dateutil": {"python_dateutil"}, "jwt": {"pyjwt"}, "attr": {"attrs"}, "dotenv": {"python_dotenv"},
	"serial": {"pyserial"}, "usb": {"pyusb"}, "crypto": {"pycryptodome", "pycrypto"}, "openssl": {"pyopenssl"},
	"git": {"gitpython"}, "zmq": {"pyzmq"}, "docx": {"python_docx"}, "magic": {"python_magic"},
	"google": {"protobuf", "google_cloud_storage", "google_api_python_client"}, "mysqldb": {"mysqlclient"},
	"psycopg2": {"psycopg2_binary", "psycopg2"}, "jose": {"python_jose"}, "multipart": {"python_multipart"},
	"_pytest": {"pytest"}, "pkg_resources": {"setuptools"}, "fitz": {"pymupdf"}, "win32api": {"pywin32"},
}

// pythonTools are modules a check runs as its tool; missing, they are the
// environment's whether declared or not.
var pythonTools = map[string]bool{"pytest": true, "_pytest": true, "nose": true, "hypothesis": true, "tox": true, "coverage": true, "pytest_cov": true, "xdist": true}

// declaredPython accepts a missing Python module when the project declares
// the distribution that provides it, or it is a test tool.
func declaredPython(m []string, _ string, env Environment) bool {
	top, _, _ := strings.Cut(m[1], ".")
	top = normPython(top)
	if pythonTools[top] {
		return true
	}
	want := append([]string{top}, pythonAliases[top]...)
	for _, d := range env.Declared["pypi"] {
		if i := strings.IndexAny(d, "[<>=!~;@ "); i >= 0 { // a requirement: its name only
			d = d[:i]
		}
		d = normPython(d)
		for _, w := range want {
			if d == w {
				return true
			}
		}
	}
	return false
}

// normPython normalizes a Python distribution or module name for
// comparison (PEP 503, with '_' for the separators).
func normPython(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.NewReplacer("-", "_", ".", "_").Replace(s)
}
