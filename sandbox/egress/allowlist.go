package egress

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DefaultAllowPort is the port of an allowlist entry written without one.
const DefaultAllowPort = 443

// allowlist holds the parsed egress allowlist.
type allowlist struct {
	// exact maps "host:port" of exact entries.
	exact map[string]bool
	// wild are the "*.suffix:port" entries.
	wild []wildEntry
	// entries are the normalized entries in the order given, duplicates
	// removed (for the posture's egress_allowlist).
	entries []string
}

type wildEntry struct {
	suffix string // ".example.com"
	port   uint16
}

// parseAllowlist parses entries ("host[:port]" or "*.suffix[:port]"; port 443
// when absent; a preset's name stands for its hosts, see Presets). It refuses IP literals, "localhost", wildcards over fewer
// than two labels and anything parseAuthority refuses, naming the entry.
func parseAllowlist(entries []string) (allowlist, error) {
	al := allowlist{exact: map[string]bool{}}
	var errs []error
	for i, raw := range entries {
		if hosts, ok := PresetHosts(raw); ok {
			for _, h := range hosts {
				if !slices.Contains(al.entries, h) {
					al.entries = append(al.entries, h)
					al.exact[h] = true
				}
			}
			continue
		}
		norm, wild, err := parseAllowEntry(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("egress allowlist entry %d %q: %w", i+1, raw, err))
			continue
		}
		if slices.Contains(al.entries, norm) {
			continue
		}
		al.entries = append(al.entries, norm)
		if wild != nil {
			al.wild = append(al.wild, *wild)
		} else {
			al.exact[norm] = true
		}
	}
	return al, errors.Join(errs...)
}

// ParseAllowEntry checks one allowlist entry ("host[:port]" or
// "*.suffix[:port]", port 443 when absent) exactly as New does and returns
// its normalized form ("api.anthropic.com:443"). The error says what is
// wrong and what to write (IP literals, localhost, schemes, paths, wildcards
// over a single label and malformed names are refused). Callers that take
// the allowlist from users (flags, YAML, action inputs) use it to report a
// bad entry as a startup error before any sandbox starts.
//
// A preset's name (Presets: "go", "npm", "pypi" …) is returned as the name,
// in lower case; it stands for the preset's hosts.
func ParseAllowEntry(s string) (string, error) {
	if _, ok := PresetHosts(s); ok {
		return strings.ToLower(strings.TrimSpace(s)), nil
	}
	norm, _, err := parseAllowEntry(s)
	return norm, err
}

// parseAllowEntry normalizes one entry; wild is non-nil for "*." entries.
func parseAllowEntry(raw string) (norm string, wild *wildEntry, err error) {
	s := strings.TrimSpace(raw)
	if strings.Contains(s, "://") {
		return "", nil, errors.New(`write host[:port] without a scheme, e.g. "api.anthropic.com:443"`)
	}
	if strings.Contains(s, "/") {
		return "", nil, errors.New(`write host[:port] without a path, e.g. "api.anthropic.com:443"`)
	}
	wildcard := strings.HasPrefix(s, "*.")
	if wildcard {
		s = s[2:]
	}
	a, err := parseAuthority(s, DefaultAllowPort)
	if err != nil {
		if errors.Is(err, errNumericHost) {
			return "", nil, errors.New("IP literals cannot be allowlisted; allow the host name")
		}
		return "", nil, err
	}
	if a.ip.IsValid() {
		return "", nil, errors.New("IP literals cannot be allowlisted; allow the host name")
	}
	if isLocalhostName(a.host) {
		return "", nil, errors.New(`"localhost" is loopback and can never be allowed`)
	}
	if wildcard {
		if strings.Count(a.host, ".") < 1 {
			return "", nil, fmt.Errorf("wildcard %q is too broad: name at least two labels, e.g. \"*.example.com\"", raw)
		}
		return "*." + a.String(), &wildEntry{suffix: "." + a.host, port: a.port}, nil
	}
	return a.String(), nil, nil
}

// isLocalhostName reports "localhost" and names below it (RFC 6761 6.3:
// they resolve to loopback).
func isLocalhostName(host string) bool {
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// match reports whether the named (non-IP) authority a is allowed. When it
// is not, reason says why: the host is listed for other ports, or not at all.
func (al allowlist) match(a authority) (ok bool, reason string) {
	if al.exact[a.String()] {
		return true, ""
	}
	for _, w := range al.wild {
		if w.port == a.port && strings.HasSuffix(a.host, w.suffix) {
			return true, ""
		}
	}
	var ports []string
	for _, e := range al.entries {
		host, port, _ := strings.Cut(e, ":")
		if host == a.host || strings.HasPrefix(host, "*.") && strings.HasSuffix(a.host, host[1:]) {
			ports = append(ports, port)
		}
	}
	if len(ports) > 0 {
		return false, "port " + strconv.Itoa(int(a.port)) + " not allowed for this host (allowed: " + strings.Join(ports, ", ") + ")"
	}
	return false, "not on the allowlist"
}
