package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// Address classes a destination may not be in. They name the reason in a
// denial ("169.254.169.254:80 (IP literal, link-local)").
const (
	classLoopback    = "loopback"
	classPrivate     = "private"
	classLinkLocal   = "link-local"
	classCGNAT       = "CGNAT"
	classMulticast   = "multicast"
	classUnspecified = "unspecified"
	classReserved    = "reserved"
)

// refusedPrefix is one refused address block.
type refusedPrefix struct {
	prefix netip.Prefix
	class  string
}

// refusedV4 are the IPv4 blocks no sandbox may reach (IANA IPv4
// Special-Purpose Address Registry, RFC 6890 and its updates).
var refusedV4 = []refusedPrefix{
	{netip.MustParsePrefix("0.0.0.0/8"), classUnspecified},    // "this network" (RFC 791); 0.0.0.0 reaches the local host on Linux
	{netip.MustParsePrefix("10.0.0.0/8"), classPrivate},       // RFC 1918
	{netip.MustParsePrefix("100.64.0.0/10"), classCGNAT},      // RFC 6598 shared address space
	{netip.MustParsePrefix("127.0.0.0/8"), classLoopback},     // RFC 1122
	{netip.MustParsePrefix("169.254.0.0/16"), classLinkLocal}, // RFC 3927; cloud metadata 169.254.169.254
	{netip.MustParsePrefix("172.16.0.0/12"), classPrivate},    // RFC 1918; Docker's bridges live here
	{netip.MustParsePrefix("192.0.0.0/24"), classReserved},    // RFC 6890 IETF protocol assignments
	{netip.MustParsePrefix("192.0.2.0/24"), classReserved},    // RFC 5737 documentation
	{netip.MustParsePrefix("192.88.99.0/24"), classReserved},  // RFC 7526 deprecated 6to4 relay anycast
	{netip.MustParsePrefix("192.168.0.0/16"), classPrivate},   // RFC 1918
	{netip.MustParsePrefix("198.18.0.0/15"), classReserved},   // RFC 2544 benchmarking
	{netip.MustParsePrefix("198.51.100.0/24"), classReserved}, // RFC 5737 documentation
	{netip.MustParsePrefix("203.0.113.0/24"), classReserved},  // RFC 5737 documentation
	{netip.MustParsePrefix("224.0.0.0/4"), classMulticast},    // RFC 5771
	{netip.MustParsePrefix("240.0.0.0/4"), classReserved},     // RFC 1112 future use, and 255.255.255.255 broadcast
}

// refusedV6 are the IPv6 blocks no sandbox may reach (IANA IPv6
// Special-Purpose Address Registry). IPv4-mapped addresses are unmapped and
// checked as IPv4; NAT64 and 6to4 addresses are checked by the IPv4 address
// they embed (see classify).
var refusedV6 = []refusedPrefix{
	{netip.MustParsePrefix("::/128"), classUnspecified},      // RFC 4291
	{netip.MustParsePrefix("::1/128"), classLoopback},        // RFC 4291
	{netip.MustParsePrefix("::/96"), classReserved},          // deprecated IPv4-compatible (RFC 4291 2.5.5.1)
	{netip.MustParsePrefix("64:ff9b:1::/48"), classReserved}, // RFC 8215 local-use NAT64
	{netip.MustParsePrefix("100::/64"), classReserved},       // RFC 6666 discard-only
	{netip.MustParsePrefix("2001::/32"), classReserved},      // RFC 4380 Teredo (embeds an obfuscated IPv4 address)
	{netip.MustParsePrefix("2001:db8::/32"), classReserved},  // RFC 3849 documentation
	{netip.MustParsePrefix("3fff::/20"), classReserved},      // RFC 9637 documentation
	{netip.MustParsePrefix("5f00::/16"), classReserved},      // RFC 9602 SRv6 SIDs
	{netip.MustParsePrefix("fc00::/7"), classPrivate},        // RFC 4193 unique local (ULA)
	{netip.MustParsePrefix("fe80::/10"), classLinkLocal},     // RFC 4291
	{netip.MustParsePrefix("fec0::/10"), classPrivate},       // RFC 3879 deprecated site-local
	{netip.MustParsePrefix("ff00::/8"), classMulticast},      // RFC 4291
}

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052 well-known NAT64
	sixToFour   = netip.MustParsePrefix("2002::/16")    // RFC 3056 6to4
)

// classify returns the refused class of addr, or "" when a sandbox may reach
// it. IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry,
// and so are NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses, which a
// gateway would translate into that IPv4 address. Zones are ignored (a zoned
// address is link-local anyway).
func classify(addr netip.Addr) string {
	addr = addr.WithZone("").Unmap()
	if addr.Is4() {
		for _, r := range refusedV4 {
			if r.prefix.Contains(addr) {
				return r.class
			}
		}
		return ""
	}
	if nat64Prefix.Contains(addr) {
		b := addr.As16()
		return classify(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	if sixToFour.Contains(addr) {
		b := addr.As16()
		return classify(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	}
	for _, r := range refusedV6 {
		if r.prefix.Contains(addr) {
			return r.class
		}
	}
	return ""
}

// neverAllowed are the classes Config.AllowNets cannot open.
var neverAllowed = map[string]bool{classLoopback: true, classLinkLocal: true, classMulticast: true, classUnspecified: true}

// checkAllowNets refuses a Config.AllowNets block that is not a valid
// prefix, is written as IPv4-mapped IPv6, or overlaps a class that is never
// reachable (or an IPv6 block that embeds IPv4 addresses).
func checkAllowNets(nets []netip.Prefix) error {
	for _, n := range nets {
		if !n.IsValid() {
			return fmt.Errorf("egress: allowed network %v is not a valid address block", n)
		}
		if n.Addr().Is4In6() {
			return fmt.Errorf("egress: allowed network %s is IPv4-mapped; write the IPv4 block", n)
		}
		n = n.Masked()
		for _, list := range [][]refusedPrefix{refusedV4, refusedV6} {
			for _, r := range list {
				if neverAllowed[r.class] && r.prefix.Overlaps(n) {
					return fmt.Errorf("egress: allowed network %s overlaps %s (%s addresses are never reachable from a sandbox); name the registry's block alone", n, r.prefix, r.class)
				}
			}
		}
		for _, p := range []netip.Prefix{nat64Prefix, sixToFour} {
			if p.Overlaps(n) {
				return fmt.Errorf("egress: allowed network %s overlaps %s, which embeds IPv4 addresses; name the IPv4 block instead", n, p)
			}
		}
	}
	return nil
}

// inAllowedNet reports whether ip, of refused class, lies in a
// Config.AllowNets block and its class may be opened.
func (p *Proxy) inAllowedNet(ip netip.Addr, class string) bool {
	if neverAllowed[class] {
		return false
	}
	for _, n := range p.cfg.AllowNets {
		if n.Masked().Contains(ip) {
			return true
		}
	}
	return false
}

// resolvedPrefix starts the reason of a denial whose allowed name resolved
// into a refused class (see Proxy's resolution): "resolves to IP (class)".
const resolvedPrefix = "resolves to "

// OpenableByAllowNets reports whether a denial, in its posture form "dest
// (reason)" (Denial.String), refused an allowed name only because it
// resolved into a private, CGNAT or reserved address, which an operator may
// open with Config.AllowNets (GOALRUN_EGRESS_ALLOW_NETS, README "A registry
// mirror at a private or special address"); addr is that address. A
// loopback, link-local, multicast or unspecified resolution is never
// openable, and neither is any other reason.
func OpenableByAllowNets(denial string) (addr string, ok bool) {
	i := strings.Index(denial, " ("+resolvedPrefix)
	if i < 0 || !strings.HasSuffix(denial, "))") {
		return "", false
	}
	rest := strings.TrimSuffix(denial[i+len(" ("+resolvedPrefix):], ")")
	ip, class, found := strings.Cut(rest, " (")
	class = strings.TrimSuffix(class, ")")
	a, err := netip.ParseAddr(ip)
	if !found || err != nil || class != classify(a) || class == "" || neverAllowed[class] {
		return "", false
	}
	return ip, true
}
