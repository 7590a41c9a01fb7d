package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Limits of a host name (RFC 1035 section 2.3.4): 63 bytes a label, 253 bytes
// a name written without its trailing dot.
const (
	maxLabelBytes = 63
	maxNameBytes  = 253
)

// maxAuthorityBytes bounds what parseAuthority looks at: a bracketed IPv6
// address with a port is at most 47 bytes and a name with a port at most
// 253+1+1+5; anything longer is refused before any other work.
const maxAuthorityBytes = maxNameBytes + 8

// authority is a parsed destination: a normalized host name (lower case, no
// trailing dot, ASCII) or an IP literal, and a port.
type authority struct {
	// host is the normalized name; for an IP literal, its canonical text.
	host string
	// ip is valid when the authority names an address rather than a host name
	// (any spelling, see parseAuthority).
	ip   netip.Addr
	port uint16
}

// String returns "host:port" ("[v6]:port" for IPv6 literals).
func (a authority) String() string {
	if a.ip.IsValid() {
		return netip.AddrPortFrom(a.ip, a.port).String()
	}
	return a.host + ":" + strconv.Itoa(int(a.port))
}

// errNumericHost marks a host whose last label is numeric but which is not a
// valid inet_aton spelling; it is refused as an IP literal all the same.
var errNumericHost = errors.New("numeric host")

// parseAuthority parses s, a "host:port" authority as it appears in a CONNECT
// request target or an absolute URI, strictly:
//
//   - only ASCII letters, digits, '-', '_', '.', ':' and (for IPv6) '[' ']';
//     so no userinfo ('@'), percent-encoding or zone ids ('%'), paths, spaces
//     or control characters; non-ASCII names must be given in punycode;
//   - the port is decimal, 1..65535, without sign or leading zeros; when it is
//     absent defaultPort is used, and when defaultPort is 0 it is required;
//   - the host is lower-cased and one trailing dot removed; labels are 1..63
//     bytes of [a-z0-9_-], not starting or ending with '-', 253 bytes in all;
//   - IP literals in any spelling set authority.ip: dotted IPv4, IPv6 (bracketed
//     or bare), and hosts whose last label is numeric, decoded as inet_aton
//     would ("2130706433", "0x7f.1", "0177.1"). A numeric host that is not a
//     valid inet_aton spelling is still an address for our purposes: ip is
//     left invalid and the error wraps errNumericHost.
//
// The error says what is wrong in words fit for a denial reason.
func parseAuthority(s string, defaultPort int) (authority, error) {
	if s == "" {
		return authority{}, errors.New("empty authority")
	}
	if len(s) > maxAuthorityBytes {
		return authority{}, fmt.Errorf("authority longer than %d bytes", maxAuthorityBytes)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80:
			return authority{}, errors.New("non-ASCII host name (write it in its punycode xn-- form)")
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == ':', c == '[', c == ']':
		default:
			return authority{}, fmt.Errorf("invalid character %q in authority", c)
		}
	}

	var hostPart, portPart string
	hasPort := false
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return authority{}, errors.New("unterminated '[' in authority")
		}
		inner, rest := s[1:end], s[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return authority{}, errors.New("junk after ']' in authority")
			}
			portPart, hasPort = rest[1:], true
		}
		ip, err := netip.ParseAddr(inner)
		if err != nil || !ip.Is6() {
			return authority{}, fmt.Errorf("invalid IPv6 literal %q", inner)
		}
		port, err := parsePort(portPart, hasPort, defaultPort)
		if err != nil {
			return authority{}, err
		}
		return authority{host: ip.String(), ip: ip, port: port}, nil
	}
	if strings.ContainsAny(s, "[]") {
		return authority{}, errors.New("misplaced '[' or ']' in authority")
	}

	switch strings.Count(s, ":") {
	case 0:
		hostPart = s
	case 1:
		i := strings.IndexByte(s, ':')
		hostPart, portPart, hasPort = s[:i], s[i+1:], true
	default:
		// A bare IPv6 address, with or without a port glued on. Either way
		// it is an address; anything else with several colons is junk.
		if ip, err := netip.ParseAddr(s); err == nil {
			port, err := parsePort("", false, defaultPort)
			if err != nil {
				return authority{}, err
			}
			return authority{host: ip.String(), ip: ip, port: port}, nil
		}
		i := strings.LastIndexByte(s, ':')
		if ip, err := netip.ParseAddr(s[:i]); err == nil {
			port, err := parsePort(s[i+1:], true, defaultPort)
			if err != nil {
				return authority{}, err
			}
			return authority{host: ip.String(), ip: ip, port: port}, nil
		}
		return authority{}, errors.New("too many ':' in authority (IPv6 literals go in brackets)")
	}

	port, err := parsePort(portPart, hasPort, defaultPort)
	if err != nil {
		return authority{}, err
	}
	host := strings.ToLower(hostPart)
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return authority{}, errors.New("empty host")
	}
	labels := strings.Split(host, ".")
	if last := labels[len(labels)-1]; isNumericLabel(last) {
		ip, ok := parseInetAton(host)
		if !ok {
			return authority{host: host, port: port}, fmt.Errorf("%w %q", errNumericHost, host)
		}
		return authority{host: ip.String(), ip: ip, port: port}, nil
	}
	if len(host) > maxNameBytes {
		return authority{}, fmt.Errorf("host name longer than %d bytes", maxNameBytes)
	}
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return authority{}, err
		}
	}
	return authority{host: host, port: port}, nil
}

// parsePort parses a decimal port (1..65535, no leading zeros). When the
// authority has no port, defaultPort is used; 0 means a port is required.
func parsePort(s string, present bool, defaultPort int) (uint16, error) {
	if !present {
		if defaultPort == 0 {
			return 0, errors.New("missing port (want host:port)")
		}
		return uint16(defaultPort), nil
	}
	if s == "" {
		return 0, errors.New("empty port")
	}
	if len(s) > 5 || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("invalid port %q", s)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("invalid port %q", s)
		}
		n = n*10 + int(s[i]-'0')
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %s out of range 1..65535", s)
	}
	return uint16(n), nil
}

// checkLabel checks one label of a lower-cased host name.
func checkLabel(l string) error {
	if l == "" {
		return errors.New("empty label in host name")
	}
	if len(l) > maxLabelBytes {
		return fmt.Errorf("host name label longer than %d bytes", maxLabelBytes)
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return fmt.Errorf("host name label %q starts or ends with '-'", l)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("invalid character %q in host name", c)
		}
	}
	return nil
}

// isNumericLabel reports whether l is all decimal digits or a 0x hex number:
// the shapes inet_aton gives meaning to. No top-level domain looks like this
// (RFC 3696 section 2), so a name ending in such a label is an address.
func isNumericLabel(l string) bool {
	if l == "" {
		return false
	}
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		for i := 2; i < len(l); i++ {
			if !isHex(l[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// parseInetAton decodes the IPv4 spellings the C library's inet_aton accepts:
// one to four parts, each decimal, octal (leading 0) or hex (0x); the last
// part fills the remaining bytes ("127.1" is 127.0.0.1, "2130706433" is
// 127.0.0.1, "0x7f.1" is 127.0.0.1). Clients built on it would dial these.
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		v, ok := parseAtonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*uint(i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(32-8*uint(len(vals)-1)) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

func parseAtonPart(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true // "0x" alone is 0 to inet_aton
		}
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	if len(p) > 11 {
		return 0, false // larger than 32 bits in any base
	}
	v, err := strconv.ParseUint(p, base, 64)
	if err != nil || v > 0xffffffff {
		return 0, false
	}
	return v, true
}
