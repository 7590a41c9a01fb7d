package goal

import (
	"fmt"
	"strings"

	"github.com/goalrun/goalrun/sandbox/egress"
)

// egressRefusalNote says what goalrun's egress proxy refused for who ("the
// setup step", "the agent"), from the posture's sample of denials in their
// "dest (reason)" form, for a failure's message: "goalrun's egress proxy
// refused the setup step 3 times: proxy.golang.org:443 (resolves to
// 203.0.113.80 (reserved))". It is "" when nothing was refused.
func egressRefusalNote(who string, denied int, denials []string) string {
	if len(denials) == 0 {
		return ""
	}
	denied = max(denied, len(denials))
	times := "times"
	if denied == 1 {
		times = "time"
	}
	return fmt.Sprintf("goalrun's egress proxy refused %s %d %s: %s", who, denied, times, strings.Join(denials, "; "))
}

// allowNetsFix is the advice for denials of allowed names that resolved
// into a private or reserved address: --allow-host cannot open them, only
// the operator's GOALRUN_EGRESS_ALLOW_NETS can (README, "A registry mirror
// at a private or special address"). It is "" when no denial is of that
// kind.
func allowNetsFix(denials []string) string {
	var hosts, addrs []string
	for _, d := range denials {
		addr, ok := egress.OpenableByAllowNets(d)
		if !ok {
			continue
		}
		dest, _, _ := strings.Cut(d, " (")
		hosts = append(hosts, dest)
		addrs = append(addrs, addr)
	}
	if len(hosts) == 0 {
		return ""
	}
	return fmt.Sprintf("%s is already allowed, but its name resolves to a private or reserved address (%s), which goalrun's egress proxy refuses whatever --allow-host says. "+
		"If the registry or its mirror really answers there, set the environment variable GOALRUN_EGRESS_ALLOW_NETS to that block for goalrun (comma-separated, e.g. %s; an operator setting, not a flag or config key; see the README's setup step section); otherwise fix this machine's DNS.",
		strings.Join(hosts, ", "), strings.Join(addrs, ", "), addrs[0])
}

// withAllowNetsFix puts the allowNetsFix of denials first and drops the
// advice to add a host with --allow-host (the sentence allowHostFix), which
// cannot help; fixes are returned as they are when no denial is of that kind.
func withAllowNetsFix(fixes, denials []string) []string {
	fix := allowNetsFix(denials)
	if fix == "" {
		return fixes
	}
	out := []string{fix}
	for _, f := range fixes {
		if f != allowHostFix && f != dockerSetupFix {
			out = append(out, f)
		}
	}
	return out
}

// setupRefusalLines says, one line per refused destination (at most
// setupRefusalLinesMax), that goalrun's setup proxy refused it, why, and
// the one fix when there is one, for the progress line of a setup step that
// failed: "goalrun's setup proxy refused proxy.golang.org:443: it resolves
// to 203.0.113.80 (reserved); if the registry really answers there, set
// GOALRUN_EGRESS_ALLOW_NETS=203.0.113.80 for goalrun". Without this the
// tool's own "Forbidden" reads like the registry's answer. denials are in
// the posture's "dest (reason)" form; nil when there are none.
func setupRefusalLines(denials []string) []string {
	var out []string
	for _, d := range denials {
		if len(out) == setupRefusalLinesMax {
			out = append(out, fmt.Sprintf("goalrun's setup proxy refused %d more (sandbox.setup_egress_denials)", len(denials)-len(out)))
			break
		}
		dest, reason, _ := strings.Cut(d, " (")
		reason = strings.TrimSuffix(reason, ")")
		s := "goalrun's setup proxy refused " + dest
		switch {
		case strings.HasPrefix(reason, "resolves to "):
			s += ": it " + reason
		case strings.HasPrefix(reason, "not "):
			s += ": it is " + reason
		case reason != "":
			s += ": " + reason
		}
		if addr, ok := egress.OpenableByAllowNets(d); ok {
			s += fmt.Sprintf("; if the registry really answers there, set GOALRUN_EGRESS_ALLOW_NETS=%s for goalrun (README, setup step)", addr)
		} else if reason == "not on the allowlist" {
			host := dest
			if h, port, ok := strings.Cut(dest, ":"); ok && port == "443" {
				host = h
			}
			s += "; allow it with --allow-host " + host
		}
		out = append(out, s)
	}
	return out
}

// setupRefusalLinesMax is how many refused destinations the progress line
// of a failed setup step names one by one.
const setupRefusalLinesMax = 3
