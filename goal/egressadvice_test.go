package goal

import (
	"reflect"
	"testing"
)

// TestSetupRefusalLines: each refusal of goalrun's setup proxy is named
// with its reason and the one fix that can open it: the operator's
// GOALRUN_EGRESS_ALLOW_NETS for an allowed name resolving into a reserved
// or private block, --allow-host for a host not on the allowlist, none for
// a refusal nothing opens (loopback).
func TestSetupRefusalLines(t *testing.T) {
	cases := []struct {
		name    string
		denials []string
		want    []string
	}{
		{"none", nil, nil},
		{"reserved resolution", []string{"proxy.golang.org:443 (resolves to 203.0.113.80 (reserved))"},
			[]string{"goalrun's setup proxy refused proxy.golang.org:443: it resolves to 203.0.113.80 (reserved); if the registry really answers there, set GOALRUN_EGRESS_ALLOW_NETS=203.0.113.80 for goalrun (README, setup step)"}},
		{"not on the allowlist", []string{"example.com:443 (not on the allowlist)", "example.com:8080 (not on the allowlist)"},
			[]string{"goalrun's setup proxy refused example.com:443: it is not on the allowlist; allow it with --allow-host example.com",
				"goalrun's setup proxy refused example.com:8080: it is not on the allowlist; allow it with --allow-host example.com:8080"}},
		{"loopback is never opened", []string{"proxy.golang.org:443 (resolves to 127.0.0.1 (loopback))"},
			[]string{"goalrun's setup proxy refused proxy.golang.org:443: it resolves to 127.0.0.1 (loopback)"}},
		{"more than three", []string{"a:443 (x)", "b:443 (x)", "c:443 (x)", "d:443 (x)", "e:443 (x)"},
			[]string{"goalrun's setup proxy refused a:443: x", "goalrun's setup proxy refused b:443: x", "goalrun's setup proxy refused c:443: x",
				"goalrun's setup proxy refused 2 more (sandbox.setup_egress_denials)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := setupRefusalLines(c.denials); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}
