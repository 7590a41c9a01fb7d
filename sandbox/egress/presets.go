package egress

import (
	"slices"
	"strings"
)

// Preset is a named group of allowlist entries: the hosts a package
// ecosystem's tools download from. A preset's name is accepted wherever an
// allowlist entry is (New, ParseAllowEntry, --allow-host) and stands for its
// hosts; write "name:443" to mean a host that happens to have a preset's
// name.
type Preset struct {
	// Name is the ecosystem's name: "go", "npm", "pypi" ….
	Name string
	// Hosts are the allowlist entries it stands for ("host:port").
	Hosts []string
	// What says in a few words what reaches them, for the README.
	What string
}

// Presets are the ecosystem presets. The hosts are the tools' defaults as
// their documentation gives them:
//   - go: https://go.dev/ref/mod#module-proxy (GOPROXY, GOSUMDB defaults;
//     toolchains download through the proxy as golang.org/toolchain).
//   - npm: https://docs.npmjs.com/cli/v10/using-npm/registry (tarballs are
//     served by the registry host); Yarn classic's registry.yarnpkg.com.
//   - pypi: https://docs.pypi.org/api/ (the index at pypi.org, files at
//     files.pythonhosted.org).
//   - crates: https://doc.rust-lang.org/cargo/reference/registry-index.html
//     (the sparse index index.crates.io, downloads from static.crates.io
//     via crates.io).
//   - maven: https://maven.apache.org/guides/introduction/introduction-to-repositories.html
//     (Maven Central).
//   - gradle: https://docs.gradle.org/current/userguide/gradle_wrapper.html
//     (the wrapper's distributions) and the plugin portal
//     https://plugins.gradle.org, plus Maven Central.
//   - rubygems: https://guides.rubygems.org/rubygems-org-api/.
//   - github: github.com's git and release downloads (Go's direct mode,
//     npm and pip git dependencies).
var Presets = []Preset{
	{Name: "go", Hosts: []string{"proxy.golang.org:443", "sum.golang.org:443"},
		What: "Go modules and toolchains through the Go module proxy, and the checksum database"},
	{Name: "npm", Hosts: []string{"registry.npmjs.org:443", "registry.yarnpkg.com:443"},
		What: "npm packages (npm, pnpm, Yarn)"},
	{Name: "pypi", Hosts: []string{"pypi.org:443", "files.pythonhosted.org:443"},
		What: "Python packages (pip, uv, Poetry)"},
	{Name: "crates", Hosts: []string{"index.crates.io:443", "static.crates.io:443", "crates.io:443"},
		What: "Rust crates (cargo's sparse index and downloads)"},
	{Name: "maven", Hosts: []string{"repo.maven.apache.org:443", "repo1.maven.org:443"},
		What: "Maven Central (Maven, Gradle, sbt)"},
	{Name: "gradle", Hosts: []string{"services.gradle.org:443", "downloads.gradle.org:443", "plugins.gradle.org:443", "plugins-artifacts.gradle.org:443", "repo.maven.apache.org:443", "repo1.maven.org:443"},
		What: "the Gradle wrapper's distributions, the plugin portal and Maven Central"},
	{Name: "rubygems", Hosts: []string{"rubygems.org:443", "index.rubygems.org:443"},
		What: "Ruby gems (gem, Bundler)"},
	{Name: "github", Hosts: []string{"github.com:443", "codeload.github.com:443", "objects.githubusercontent.com:443"},
		What: "git and archive downloads from GitHub (Go's direct mode, git dependencies)"},
}

// PresetHosts returns the entries preset name stands for, or nil and false
// when name is not a preset. Names are compared in lower case.
func PresetHosts(name string) ([]string, bool) {
	name = strings.ToLower(strings.TrimSpace(name))
	for _, p := range Presets {
		if p.Name == name {
			return slices.Clone(p.Hosts), true
		}
	}
	return nil, false
}

// ExpandPresets replaces every preset name in entries by its hosts, in
// place of the name, and returns the result (other entries unchanged).
func ExpandPresets(entries []string) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if hosts, ok := PresetHosts(e); ok {
			out = append(out, hosts...)
			continue
		}
		out = append(out, e)
	}
	return out
}
