package egress

import (
	"context"
	"net/netip"
	"strings"
	"testing"
)

// TestAllowNets: a registry mirror that answers at a private or reserved
// address is reachable by its allowlisted name once its block is named in
// Config.AllowNets; nothing else changes: other names, other blocks, IP
// literals and the never-reachable classes stay refused.
func TestAllowNets(t *testing.T) {
	a := netip.MustParseAddr
	res := newResolver(map[string][]netip.Addr{
		"proxy.golang.org.": {a("203.0.113.80")},
		"mirror.corp.":      {a("10.1.2.3")},
		"other.corp.":       {a("10.9.9.9")},
		"meta.corp.":        {a("169.254.169.254")},
		"lo.corp.":          {a("127.0.0.1")},
		"mixed.corp.":       {a("10.1.2.4"), a("192.168.1.1")},
	})
	p, err := New(Config{
		Allow:     []string{"go", "mirror.corp", "other.corp", "meta.corp", "lo.corp", "mixed.corp", "unlisted.corp"},
		AllowNets: []netip.Prefix{netip.MustParsePrefix("203.0.113.80/32"), netip.MustParsePrefix("10.1.2.0/24")},
		Resolver:  res,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, tc := range []struct {
		dest, reason string // reason "" = allowed
	}{
		{"proxy.golang.org:443", ""},
		{"mirror.corp:443", ""},
		{"other.corp:443", "resolves to 10.9.9.9 (private)"},
		{"meta.corp:443", "resolves to 169.254.169.254 (link-local)"},
		{"lo.corp:443", "resolves to 127.0.0.1 (loopback)"},
		{"mixed.corp:443", "resolves to 192.168.1.1 (private)"},
		{"10.1.2.3:443", "IP literal, private"},
		{"203.0.113.80:443", "IP literal, reserved"},
		{"sum.golang.org:443", "DNS lookup failed"},
		{"evil.example:443", "not on the allowlist"},
	} {
		t.Run(tc.dest, func(t *testing.T) {
			auth, err := parseAuthority(tc.dest, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, d := p.check(context.Background(), auth, forwardPolicy)
			switch {
			case tc.reason == "" && d != nil:
				t.Errorf("refused: %s", d.Reason)
			case tc.reason != "" && (d == nil || !strings.Contains(d.Reason, tc.reason)):
				t.Errorf("got %+v, want refused for %q", d, tc.reason)
			}
		})
	}
}

func TestAllowNetsRefusesTheNeverReachable(t *testing.T) {
	for _, bad := range []string{"0.0.0.0/0", "127.0.0.0/8", "169.254.169.254/32", "::/0", "::1/128", "fe80::/10", "ff00::/8",
		"::ffff:10.0.0.0/104", "64:ff9b::/96", "2002::/16", "224.0.0.0/4"} {
		if _, err := New(Config{AllowNets: []netip.Prefix{netip.MustParsePrefix(bad)}}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	for _, ok := range []string{"10.0.0.0/8", "203.0.113.0/24", "100.64.0.0/10", "fd00::/8", "192.168.1.0/24"} {
		p, err := New(Config{AllowNets: []netip.Prefix{netip.MustParsePrefix(ok)}})
		if err != nil {
			t.Errorf("%s refused: %v", ok, err)
			continue
		}
		p.Close()
	}
}

// TestOpenableByAllowNets: the posture's denial strings, as the proxy makes
// them, say whether GOALRUN_EGRESS_ALLOW_NETS could open the destination.
func TestOpenableByAllowNets(t *testing.T) {
	a := netip.MustParseAddr
	p, err := New(Config{
		Allow: []string{"go", "mirror.corp", "meta.corp", "lo.corp", "cgnat.corp", "ula.corp"},
		Resolver: newResolver(map[string][]netip.Addr{
			"proxy.golang.org.": {a("203.0.113.80")},
			"mirror.corp.":      {a("10.1.2.3")},
			"cgnat.corp.":       {a("100.64.0.9")},
			"ula.corp.":         {a("fd00::7")},
			"meta.corp.":        {a("169.254.169.254")},
			"lo.corp.":          {a("127.0.0.1")},
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, tc := range []struct {
		name, dest, addr string // addr "" = not openable
	}{
		{"reserved resolution", "proxy.golang.org:443", "203.0.113.80"},
		{"private resolution", "mirror.corp:443", "10.1.2.3"},
		{"CGNAT resolution", "cgnat.corp:443", "100.64.0.9"},
		{"ULA resolution", "ula.corp:443", "fd00::7"},
		{"link-local never", "meta.corp:443", ""},
		{"loopback never", "lo.corp:443", ""},
		{"IP literal never", "10.1.2.3:443", ""},
		{"not allowed", "evil.example:443", ""},
		{"DNS failure", "sum.golang.org:443", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auth, err := parseAuthority(tc.dest, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, d := p.check(context.Background(), auth, forwardPolicy)
			if d == nil {
				t.Fatalf("%s allowed", tc.dest)
			}
			addr, ok := OpenableByAllowNets(d.String())
			if addr != tc.addr || ok != (tc.addr != "") {
				t.Errorf("OpenableByAllowNets(%q) = %q, %v; want %q", d.String(), addr, ok, tc.addr)
			}
		})
	}
	// A forged reason whose class does not match its address is not trusted.
	if _, ok := OpenableByAllowNets("x:443 (resolves to 127.0.0.1 (reserved))"); ok {
		t.Error("mismatched class accepted")
	}
}
