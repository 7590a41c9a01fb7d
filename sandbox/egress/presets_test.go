package egress

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestPresets(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Presets {
		if seen[p.Name] || p.Name != strings.ToLower(p.Name) || len(p.Hosts) == 0 || p.What == "" {
			t.Errorf("preset %q: duplicate, not lower case, or empty", p.Name)
		}
		seen[p.Name] = true
		for _, h := range p.Hosts {
			if norm, err := ParseAllowEntry(h); err != nil || norm != h {
				t.Errorf("preset %s: host %q is not a normalized allowlist entry (%q, %v)", p.Name, h, norm, err)
			}
		}
	}
	for _, name := range []string{"go", "npm", "pypi", "crates", "maven", "gradle"} {
		if !seen[name] {
			t.Errorf("no %s preset", name)
		}
	}
}

func TestAllowlistPresets(t *testing.T) {
	cases := []struct {
		name    string
		entries []string
		allowed []string
		denied  []string
		want    []string // the posture's entries
	}{
		{"go", []string{"go"}, []string{"proxy.golang.org:443", "sum.golang.org:443"}, []string{"github.com:443", "proxy.golang.org:80", "go:443"},
			[]string{"proxy.golang.org:443", "sum.golang.org:443"}},
		{"names in any case, with other hosts, duplicates once", []string{"api.anthropic.com", "NPM", "pypi", "npm", "registry.npmjs.org"},
			[]string{"api.anthropic.com:443", "registry.npmjs.org:443", "files.pythonhosted.org:443"}, []string{"npmjs.org:443"},
			[]string{"api.anthropic.com:443", "registry.npmjs.org:443", "registry.yarnpkg.com:443", "pypi.org:443", "files.pythonhosted.org:443"}},
		{"a port makes it a host", []string{"go:8080"}, []string{"go:8080"}, []string{"proxy.golang.org:443"}, []string{"go:8080"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			al, err := parseAllowlist(c.entries)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(al.entries, c.want) {
				t.Errorf("entries %q, want %q", al.entries, c.want)
			}
			for _, a := range c.allowed {
				auth, err := parseAuthority(a, 0)
				if err != nil {
					t.Fatal(err)
				}
				if ok, why := al.match(auth); !ok {
					t.Errorf("%s refused: %s", a, why)
				}
			}
			for _, d := range c.denied {
				auth, err := parseAuthority(d, 0)
				if err != nil {
					t.Fatal(err)
				}
				if ok, _ := al.match(auth); ok {
					t.Errorf("%s allowed", d)
				}
			}
		})
	}
	if got, err := ParseAllowEntry(" Go "); err != nil || got != "go" {
		t.Errorf("ParseAllowEntry(Go) = %q, %v", got, err)
	}
	if got := ExpandPresets([]string{"x.example.com", "crates"}); !slices.Equal(got, []string{"x.example.com", "index.crates.io:443", "static.crates.io:443", "crates.io:443"}) {
		t.Errorf("ExpandPresets = %q", got)
	}
}

// TestPresetsInREADME: the README lists every preset with every host, in
// its egress presets table.
func TestPresetsInREADME(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "| `") {
			name, _, _ := strings.Cut(strings.TrimPrefix(l, "| `"), "`")
			rows[name] = l
		}
	}
	for _, p := range Presets {
		row, ok := rows[p.Name]
		if !ok {
			t.Errorf("README has no row for the %s preset", p.Name)
			continue
		}
		for _, h := range p.Hosts {
			if !strings.Contains(row, "`"+strings.TrimSuffix(h, ":443")+"`") {
				t.Errorf("README's %s row lacks %s: %s", p.Name, h, row)
			}
		}
	}
}

// TestProxyAllowlistExpandsPresets: the proxy's allowlist (the posture's
// egress_allowlist) names the hosts a preset stands for, not the name.
func TestProxyAllowlistExpandsPresets(t *testing.T) {
	p, err := New(Config{Allow: []string{"api.anthropic.com", "go"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := []string{"api.anthropic.com:443", "proxy.golang.org:443", "sum.golang.org:443"}
	if got := p.Allowlist(); !slices.Equal(got, want) {
		t.Errorf("Allowlist() = %q, want %q", got, want)
	}
}
