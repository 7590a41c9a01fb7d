package egress

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestParseAuthority(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		defaultPort int
		want        string // normalized authority; "" when an error is expected
		wantIP      string // the address an IP literal decodes to
		wantErr     string // substring of the error
	}{
		{name: "name and port", in: "api.anthropic.com:443", want: "api.anthropic.com:443"},
		{name: "default port", in: "api.anthropic.com", defaultPort: 443, want: "api.anthropic.com:443"},
		{name: "missing port when required", in: "api.anthropic.com", wantErr: "missing port"},
		{name: "upper case folded", in: "API.Anthropic.COM:443", want: "api.anthropic.com:443"},
		{name: "trailing dot removed", in: "api.anthropic.com.:443", want: "api.anthropic.com:443"},
		{name: "two trailing dots", in: "api.anthropic.com..:443", wantErr: "empty label"},
		{name: "single label", in: "intranet:8080", want: "intranet:8080"},
		{name: "underscore label", in: "_srv.example.com:443", want: "_srv.example.com:443"},
		{name: "punycode name", in: "xn--bcher-kva.example:443", want: "xn--bcher-kva.example:443"},
		{name: "non-ASCII name", in: "bücher.example:443", wantErr: "punycode"},
		{name: "fullwidth dot", in: "example\uff0ecom:443", wantErr: "punycode"},
		{name: "userinfo", in: "allowed.com:443@evil.com:443", wantErr: `invalid character '@'`},
		{name: "percent-encoded name", in: "%65vil.com:443", wantErr: `invalid character '%'`},
		{name: "path", in: "example.com:443/x", wantErr: `invalid character '/'`},
		{name: "space", in: "example.com :443", wantErr: `invalid character ' '`},
		{name: "NUL", in: "example.com\x00.evil.com:443", wantErr: `invalid character '\x00'`},
		{name: "CRLF", in: "example.com:443\r\nHost: evil", wantErr: `invalid character '\r'`},
		{name: "backslash", in: `example.com\@evil.com:443`, wantErr: `invalid character '\\'`},
		{name: "empty", in: "", wantErr: "empty authority"},
		{name: "empty host", in: ":443", wantErr: "empty host"},
		{name: "only a dot", in: ".:443", wantErr: "empty host"},
		{name: "empty port", in: "example.com:", wantErr: "empty port"},
		{name: "port zero", in: "example.com:0", wantErr: "out of range"},
		{name: "port too large", in: "example.com:65536", wantErr: "out of range"},
		{name: "port leading zero", in: "example.com:0443", wantErr: "invalid port"},
		{name: "port sign", in: "example.com:+443", wantErr: `invalid character '+'`},
		{name: "port letters", in: "example.com:https", wantErr: "invalid port"},
		{name: "label starts with hyphen", in: "-x.example.com:443", wantErr: "starts or ends"},
		{name: "label too long", in: strings.Repeat("a", 64) + ".com:443", wantErr: "label longer"},
		{name: "name too long", in: strings.Repeat("a.", 127) + "com:443", wantErr: "longer than"},
		{name: "empty label", in: "a..com:443", wantErr: "empty label"},
		{name: "too many colons", in: "a:b:c", wantErr: "too many ':'"},
		{name: "unterminated bracket", in: "[::1:443", wantErr: "unterminated"},
		{name: "bracketed name", in: "[example.com]:443", wantErr: "invalid IPv6"},
		{name: "bracketed IPv4", in: "[127.0.0.1]:443", wantErr: "invalid IPv6"},
		{name: "junk after bracket", in: "[::1]x:443", wantErr: "junk after"},
		{name: "misplaced bracket", in: "exa]mple.com:443", wantErr: "misplaced"},
		{name: "zone id", in: "[fe80::1%25eth0]:443", wantErr: `invalid character '%'`},

		// IP literals parse (so the denial can say what they are).
		{name: "IPv4", in: "127.0.0.1:443", want: "127.0.0.1:443", wantIP: "127.0.0.1"},
		{name: "IPv4 trailing dot", in: "127.0.0.1.:443", want: "127.0.0.1:443", wantIP: "127.0.0.1"},
		{name: "IPv6 bracketed", in: "[::1]:443", want: "[::1]:443", wantIP: "::1"},
		{name: "IPv6 bracketed default port", in: "[2606:4700::1]", defaultPort: 443, want: "[2606:4700::1]:443", wantIP: "2606:4700::1"},
		{name: "IPv6 bare", in: "::1", defaultPort: 443, want: "[::1]:443", wantIP: "::1"},
		{name: "IPv6 bare, port required", in: "fe80::1:443", wantErr: "missing port"},
		{name: "IPv4-mapped IPv6", in: "[::ffff:127.0.0.1]:443", want: "[::ffff:127.0.0.1]:443", wantIP: "::ffff:127.0.0.1"},
		{name: "decimal integer", in: "2130706433:443", want: "127.0.0.1:443", wantIP: "127.0.0.1"},
		{name: "hex integer", in: "0x7f000001:443", want: "127.0.0.1:443", wantIP: "127.0.0.1"},
		{name: "hex and short form", in: "0x7f.1:443", want: "127.0.0.1:443", wantIP: "127.0.0.1"},
		{name: "octal dotted", in: "0177.0.0.1:443", want: "127.0.0.1:443", wantIP: "127.0.0.1"},
		{name: "short form", in: "127.1:443", want: "127.0.0.1:443", wantIP: "127.0.0.1"},
		{name: "three parts", in: "169.254.43518:80", want: "169.254.169.254:80", wantIP: "169.254.169.254"},
		{name: "upper-case hex", in: "0XA9.0XFE.0XA9.0XFE:80", want: "169.254.169.254:80", wantIP: "169.254.169.254"},
		{name: "numeric but not inet_aton", in: "1.2.3.4.5:443", wantErr: "numeric host"},
		{name: "numeric overflow", in: "4294967296:443", wantErr: "numeric host"},
		{name: "name ending in number", in: "evil.123:443", wantErr: "numeric host"},
		{name: "name ending in hex", in: "evil.0xff:443", wantErr: "numeric host"},
		{name: "hex-looking name is a name", in: "0xg.example.com:443", want: "0xg.example.com:443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := parseAuthority(tt.in, tt.defaultPort)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("parseAuthority(%q) = %v, want error containing %q", tt.in, a, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseAuthority(%q) error = %q, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseAuthority(%q): %v", tt.in, err)
			}
			if got := a.String(); got != tt.want {
				t.Errorf("parseAuthority(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if tt.wantIP == "" && a.ip.IsValid() {
				t.Errorf("parseAuthority(%q) is an IP literal %v, want a name", tt.in, a.ip)
			}
			if tt.wantIP != "" && a.ip != netip.MustParseAddr(tt.wantIP) {
				t.Errorf("parseAuthority(%q).ip = %v, want %s", tt.in, a.ip, tt.wantIP)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		addr string
		want string
	}{
		{"public IPv4", "93.184.215.14", ""},
		{"public IPv6", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", ""},
		{"loopback", "127.0.0.1", classLoopback},
		{"loopback other", "127.255.0.9", classLoopback},
		{"IPv6 loopback", "::1", classLoopback},
		{"unspecified", "0.0.0.0", classUnspecified},
		{"this network", "0.1.2.3", classUnspecified},
		{"IPv6 unspecified", "::", classUnspecified},
		{"RFC 1918 10", "10.1.2.3", classPrivate},
		{"RFC 1918 172.16", "172.16.0.1", classPrivate},
		{"docker bridge gateway", "172.17.0.1", classPrivate},
		{"RFC 1918 172.31", "172.31.255.255", classPrivate},
		{"just past 172.16/12", "172.32.0.1", ""},
		{"RFC 1918 192.168", "192.168.1.1", classPrivate},
		{"ULA", "fd00::1", classPrivate},
		{"ULA fc", "fc00::1", classPrivate},
		{"site-local", "fec0::1", classPrivate},
		{"link-local", "169.254.1.1", classLinkLocal},
		{"cloud metadata", "169.254.169.254", classLinkLocal},
		{"IPv6 link-local", "fe80::1", classLinkLocal},
		{"IPv6 link-local zoned", "fe80::1%eth0", classLinkLocal},
		{"CGNAT", "100.64.0.1", classCGNAT},
		{"CGNAT end", "100.127.255.254", classCGNAT},
		{"multicast", "224.0.0.251", classMulticast},
		{"IPv6 multicast", "ff02::1", classMulticast},
		{"broadcast", "255.255.255.255", classReserved},
		{"class E", "240.0.0.1", classReserved},
		{"documentation", "203.0.113.7", classReserved},
		{"benchmarking", "198.18.0.1", classReserved},
		{"IPv6 documentation", "2001:db8::1", classReserved},
		{"IPv4-mapped loopback", "::ffff:127.0.0.1", classLoopback},
		{"IPv4-mapped metadata", "::ffff:169.254.169.254", classLinkLocal},
		{"IPv4-mapped public", "::ffff:93.184.215.14", ""},
		{"IPv4-compatible", "::127.0.0.1", classReserved},
		{"NAT64 of private", "64:ff9b::a00:1", classPrivate},
		{"NAT64 of metadata", "64:ff9b::a9fe:a9fe", classLinkLocal},
		{"NAT64 of public", "64:ff9b::5db8:d70e", ""},
		{"local NAT64", "64:ff9b:1::1", classReserved},
		{"6to4 of loopback", "2002:7f00:1::1", classLoopback},
		{"6to4 of public", "2002:5db8:d70e::1", ""},
		{"Teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2", classReserved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Errorf("classify(%s) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
}

func TestParseAllowlist(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{name: "default port", in: []string{"api.anthropic.com"}, want: []string{"api.anthropic.com:443"}},
		{name: "explicit port and case", in: []string{"Proxy.Golang.org:443", "example.com:8080"}, want: []string{"proxy.golang.org:443", "example.com:8080"}},
		{name: "duplicates removed", in: []string{"a.example.com", "A.example.com:443", "a.example.com."}, want: []string{"a.example.com:443"}},
		{name: "wildcard", in: []string{"*.githubusercontent.com"}, want: []string{"*.githubusercontent.com:443"}},
		{name: "surrounding spaces", in: []string{"  example.com:443 "}, want: []string{"example.com:443"}},
		{name: "empty list", in: nil, want: nil},
		{name: "scheme", in: []string{"https://api.anthropic.com"}, wantErr: "without a scheme"},
		{name: "path", in: []string{"api.anthropic.com/v1"}, wantErr: "without a path"},
		{name: "IPv4 literal", in: []string{"93.184.215.14:443"}, wantErr: "IP literals cannot be allowlisted"},
		{name: "IPv6 literal", in: []string{"[2606:4700::1]:443"}, wantErr: "IP literals cannot be allowlisted"},
		{name: "numeric form", in: []string{"2130706433"}, wantErr: "IP literals cannot be allowlisted"},
		{name: "localhost", in: []string{"localhost:8080"}, wantErr: "loopback"},
		{name: "below localhost", in: []string{"app.localhost"}, wantErr: "loopback"},
		{name: "wildcard too broad", in: []string{"*.com"}, wantErr: "too broad"},
		{name: "bare star", in: []string{"*"}, wantErr: `invalid character '*'`},
		{name: "star inside", in: []string{"api.*.com"}, wantErr: `invalid character '*'`},
		{name: "all errors reported", in: []string{"ok.example.com", "1.2.3.4", "bad host"}, wantErr: `entry 2 "1.2.3.4"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			al, err := parseAllowlist(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseAllowlist(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseAllowlist(%q): %v", tt.in, err)
			}
			if strings.Join(al.entries, ",") != strings.Join(tt.want, ",") {
				t.Errorf("entries = %q, want %q", al.entries, tt.want)
			}
		})
	}
	t.Run("all errors reported names each entry", func(t *testing.T) {
		_, err := parseAllowlist([]string{"ok.example.com", "1.2.3.4", "bad host"})
		if err == nil || !strings.Contains(err.Error(), `entry 3 "bad host"`) {
			t.Fatalf("error = %v, want entry 3 named too", err)
		}
	})
}

func TestAllowlistMatch(t *testing.T) {
	al, err := parseAllowlist([]string{"example.com", "api.example.net:8443", "*.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		dest       string
		want       bool
		wantReason string
	}{
		{"exact", "example.com:443", true, ""},
		{"exact wrong port", "example.com:80", false, "port 80 not allowed for this host (allowed: 443)"},
		{"sub-domain of exact is not allowed", "www.example.com:443", false, "not on the allowlist"},
		{"look-alike suffix", "evilexample.com:443", false, "not on the allowlist"},
		{"explicit port", "api.example.net:8443", true, ""},
		{"explicit port, default asked", "api.example.net:443", false, "allowed: 8443"},
		{"wildcard child", "a.example.org:443", true, ""},
		{"wildcard grandchild", "a.b.example.org:443", true, ""},
		{"wildcard apex", "example.org:443", false, "not on the allowlist"},
		{"wildcard look-alike", "aexample.org:443", false, "not on the allowlist"},
		{"wildcard wrong port", "a.example.org:80", false, "port 80 not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := parseAuthority(tt.dest, 0)
			if err != nil {
				t.Fatal(err)
			}
			ok, reason := al.match(a)
			if ok != tt.want || !strings.Contains(reason, tt.wantReason) {
				t.Errorf("match(%s) = %v, %q; want %v, %q", tt.dest, ok, reason, tt.want, tt.wantReason)
			}
		})
	}
}

// FuzzParseAuthority checks the parser's invariants on arbitrary input:
//   - it never panics;
//   - an accepted name contains only [a-z0-9._-], no trailing dot, and is not
//     something Go's own address parser or inet_aton would take for an IP;
//   - it agrees with net.SplitHostPort (what a dialer would split), so there
//     is no parser differential between what we judge and what is dialled;
//   - the normalized form re-parses to itself;
//   - userinfo, percent-encoding and paths are never accepted.
func FuzzParseAuthority(f *testing.F) {
	for _, s := range []string{
		"example.com:443", "EXAMPLE.com.:443", "127.0.0.1:80", "[::1]:443", "2130706433:443", "0x7f.1:443",
		"allowed.com:443@evil.com", "[fe80::1%25eth0]:443", "xn--bcher-kva.example:443", "bücher.example:443",
		"a..b:1", "::ffff:127.0.0.1", "0177.0.0.1:22", "evil.123:443", ":443", "[::1]", "a:b:c",
	} {
		f.Add(s, 0)
		f.Add(s, 443)
	}
	f.Fuzz(func(t *testing.T, s string, defaultPort int) {
		if defaultPort < 0 || defaultPort > 65535 {
			return
		}
		a, err := parseAuthority(s, defaultPort)
		if err != nil {
			if a.ip.IsValid() {
				t.Fatalf("parseAuthority(%q) returned an address with an error", s)
			}
			return
		}
		if a.port == 0 {
			t.Fatalf("parseAuthority(%q) accepted port 0", s)
		}
		if strings.ContainsAny(s, "@%/?#\\ ") {
			t.Fatalf("parseAuthority(%q) accepted a forbidden character", s)
		}
		if !a.ip.IsValid() {
			for i := 0; i < len(a.host); i++ {
				c := a.host[i]
				if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
					t.Fatalf("parseAuthority(%q) host %q has %q", s, a.host, c)
				}
			}
			if strings.HasSuffix(a.host, ".") || a.host == "" {
				t.Fatalf("parseAuthority(%q) host %q not normalized", s, a.host)
			}
			if _, err := netip.ParseAddr(a.host); err == nil {
				t.Fatalf("parseAuthority(%q) took IP %q for a name", s, a.host)
			}
			if ip := net.ParseIP(a.host); ip != nil {
				t.Fatalf("parseAuthority(%q) took IP %q for a name", s, a.host)
			}
			if _, ok := parseInetAton(a.host); ok {
				t.Fatalf("parseAuthority(%q) took inet_aton address %q for a name", s, a.host)
			}
			if h, _, err := net.SplitHostPort(s); err == nil {
				if got := strings.TrimSuffix(strings.ToLower(h), "."); got != a.host {
					t.Fatalf("parseAuthority(%q) host %q, but SplitHostPort gives %q", s, a.host, got)
				}
			}
		}
		b, err := parseAuthority(a.String(), 0)
		if err != nil || b.String() != a.String() || b.ip != a.ip {
			t.Fatalf("parseAuthority(%q) = %q does not re-parse to itself: %v, %v", s, a, b, err)
		}
	})
}

// anyNameResolver answers every name with a public address, except names
// with a label "lo", which resolve to loopback.
type anyNameResolver struct{}

func (anyNameResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if slices.Contains(strings.Split(strings.TrimSuffix(host, "."), "."), "lo") {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
}

// FuzzForwardDecision checks the whole forward decision on arbitrary CONNECT
// targets: whatever is allowed is on the allowlist (exact name or strictly
// below the wildcard's suffix, port 443), resolves only to addresses a
// sandbox may reach, and is what Go's own URL parser and net.SplitHostPort
// would call the same host and port (no parser differential with goproxy or
// a dialer).
func FuzzForwardDecision(f *testing.F) {
	for _, s := range []string{
		"example.com:443", "EXAMPLE.COM.:443", "a.example.org:443", "lo.example.org:443", "example.org:443",
		"example.com:443@evil.com:443", "example.com:80", "[::1]:443", "0x7f.1:443", "evil.com:443",
		"example.com.evil.com:443", "xexample.com:443", "a.example.org.:443",
	} {
		f.Add(s)
	}
	p, err := New(Config{Allow: []string{"example.com", "*.example.org"}, Resolver: anyNameResolver{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, deny := p.decideRaw(context.Background(), s, 0)
		if deny != nil {
			if deny.Reason == "" || deny.Dest == "" || len(deny.Dest) > maxDestBytes {
				t.Fatalf("decideRaw(%q) denial %+v lacks dest or reason", s, deny)
			}
			return
		}
		host := d.auth.host
		if d.auth.ip.IsValid() || d.auth.port != 443 || !(host == "example.com" || strings.HasSuffix(host, ".example.org")) {
			t.Fatalf("decideRaw(%q) allowed %s", s, d.auth)
		}
		for _, a := range d.addrs {
			if classify(a) != "" {
				t.Fatalf("decideRaw(%q) allowed address %s", s, a)
			}
		}
		h, port, err := net.SplitHostPort(s)
		if err != nil || port != "443" || strings.TrimSuffix(strings.ToLower(h), ".") != host {
			t.Fatalf("decideRaw(%q) allowed %s, but SplitHostPort says %q %q %v", s, d.auth, h, port, err)
		}
		u, err := url.ParseRequestURI("http://" + s)
		if err != nil || u.User != nil || strings.TrimSuffix(strings.ToLower(u.Hostname()), ".") != host || u.Port() != "443" {
			t.Fatalf("decideRaw(%q) allowed %s, but net/url says %v (%v)", s, d.auth, u, err)
		}
	})
}

func TestParseAllowEntry(t *testing.T) {
	tests := []struct{ in, want, wantErr string }{
		{"API.Anthropic.com", "api.anthropic.com:443", ""},
		{"*.example.com:8443", "*.example.com:8443", ""},
		{"127.0.0.1:8080", "", "IP literals cannot be allowlisted"},
		{"https://api.anthropic.com", "", "without a scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseAllowEntry(tt.in)
			if (err != nil) != (tt.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) || got != tt.want {
				t.Errorf("ParseAllowEntry(%q) = %q, %v; want %q, %q", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
