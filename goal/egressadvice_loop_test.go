package goal_test

import (
	"context"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/goal"
	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// TestEgressDenialAdvice: when goalrun's egress proxy refused an allowed
// registry because its name resolves to a reserved or private address, the
// failure's message quotes the proxy's own reason and the advice names
// GOALRUN_EGRESS_ALLOW_NETS instead of --allow-host, for a setup step the
// user asked for, for a detected one whose failure the first check shows,
// and for the agent's model API; any other refusal keeps --allow-host.
func TestEgressDenialAdvice(t *testing.T) {
	const (
		reserved   = "proxy.golang.org:443 (resolves to 203.0.113.80 (reserved))"
		notAllowed = "proxy.golang.org:443 (not on the allowlist)"
		// What go mod download prints when the proxy answers CONNECT 403.
		forbidden = `echo 'go: github.com/google/uuid@v1.6.0: Get "https://proxy.golang.org/github.com/google/uuid/@v/v1.6.0.mod": Forbidden' >&2; exit 1`
	)
	claudeRefused := `{"type":"system","subtype":"init","cwd":"/workspace","session_id":"s-1","model":"claude-x"}` + "\n" +
		`{"type":"result","subtype":"success","is_error":true,"api_error_status":403,"session_id":"s-1","result":"API Error: 403 goalrun egress: refused api.anthropic.com:443: resolves to 10.1.2.3 (private)","usage":{}}`
	cases := []struct {
		name        string
		posture     sandbox.Posture
		setup       []goal.SetupStep
		adapter     agent.Adapter
		check       string
		cause       string
		wantMsg     []string
		wantAdvice  []string
		notInAdvice []string
	}{
		{"a setup step the user asked for, reserved resolution",
			sandbox.Posture{Mode: "docker", SetupEgressDenied: 2, SetupEgressDenials: []string{reserved}},
			[]goal.SetupStep{{Command: forbidden}}, agent.Command{}, "true", goal.CauseSetupFailed,
			[]string{"Forbidden", "refused the setup step 2 times: " + reserved},
			[]string{"GOALRUN_EGRESS_ALLOW_NETS", "proxy.golang.org:443 is already allowed", "203.0.113.80"},
			[]string{"add it with --allow-host", "hosts allowed with --allow-host"}},
		{"a detected setup step, then the first check cannot find the module",
			sandbox.Posture{Mode: "docker", SetupEgressDenied: 1, SetupEgressDenials: []string{reserved}},
			[]goal.SetupStep{{Command: forbidden, Detected: true}}, agent.Command{}, "", goal.EnvMissingDependency,
			[]string{"Forbidden", "refused the setup step 1 time: " + reserved},
			[]string{"GOALRUN_EGRESS_ALLOW_NETS", "README's setup step section"},
			[]string{"add it with --allow-host"}},
		{"two detected setup steps refused the same way: the refusal is named once",
			sandbox.Posture{Mode: "docker", SetupEgressDenied: 2, SetupEgressDenials: []string{reserved}},
			[]goal.SetupStep{{Command: forbidden, Detected: true}, {Command: forbidden, Detected: true}}, agent.Command{}, "", goal.EnvMissingDependency,
			[]string{"Forbidden", "refused the setup step 2 times: " + reserved},
			[]string{"GOALRUN_EGRESS_ALLOW_NETS"},
			[]string{"add it with --allow-host"}},
		{"a detected setup step refused, then the read-only module cache (real output)",
			sandbox.Posture{Mode: "docker", SetupEgressDenied: 1, SetupEgressDenials: []string{reserved}},
			[]goal.SetupStep{{Command: forbidden, Detected: true}}, agent.Command{}, "go-deps-readonly.txt", goal.EnvMissingDependency,
			[]string{"github.com/mattn/go-colorable is not among the dependencies prepared", "Forbidden", "refused the setup step 1 time: " + reserved},
			[]string{"GOALRUN_EGRESS_ALLOW_NETS"},
			[]string{"add it with --allow-host"}},
		{"a host not on the allowlist keeps --allow-host",
			sandbox.Posture{Mode: "docker", SetupEgressDenied: 1, SetupEgressDenials: []string{notAllowed}},
			[]goal.SetupStep{{Command: forbidden}}, agent.Command{}, "true", goal.CauseSetupFailed,
			[]string{notAllowed}, []string{"--allow-host"}, []string{"GOALRUN_EGRESS_ALLOW_NETS"}},
		{"the agent's model API resolves to a private address",
			sandbox.Posture{Mode: "docker", Network: "egress", EgressDenied: 1, EgressDenials: []string{"api.anthropic.com:443 (resolves to 10.1.2.3 (private))"}},
			nil, claudeLines{lines: claudeRefused}, "exit 1", agent.CauseEgressRefused,
			[]string{"api.anthropic.com:443 (resolves to 10.1.2.3 (private))"},
			[]string{"GOALRUN_EGRESS_ALLOW_NETS", "10.1.2.3", "sandbox.egress_denials"}, []string{"--allow-host (the allow-host setting)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := workspace(t, nil)
			check := tc.check
			switch {
			case check == "":
				check = realOutput(t, dir, "go-proxyoff.txt", "1")
			case strings.HasSuffix(check, ".txt"):
				check = realOutput(t, dir, check, "1")
			}
			rec := &recorder{}
			out := run(t, context.Background(), goal.Config{
				Sandbox: withPosture{local(t, dir), tc.posture}, Adapter: tc.adapter, AgentBin: "true",
				Check: check, Setup: tc.setup, MaxIterations: 1, Events: rec, Now: (&fakeClock{}).Now,
			})
			if len(tc.setup) > 0 { // the setup step's progress says whose refusal it was
				var notes []string
				for _, ev := range rec.events {
					if ev.Type == report.EventPrepareFinished {
						n, _ := ev.Data["notes"].([]string)
						notes = append(notes, n...)
					}
				}
				if want := "goalrun's setup proxy refused proxy.golang.org:443: it "; len(notes) != 1 || !strings.HasPrefix(notes[0], want) {
					t.Errorf("setup step notes %q, want one starting %q", notes, want)
				}
			}
			f := out.Failure
			if f == nil || f.Cause != tc.cause {
				t.Fatalf("failure %+v, want cause %s", f, tc.cause)
			}
			if tc.cause != agent.CauseEgressRefused && f.Code != report.ErrEnvironmentFailed {
				t.Errorf("code %s, want %s", f.Code, report.ErrEnvironmentFailed)
			}
			for _, w := range tc.wantMsg {
				if !strings.Contains(f.Message, w) {
					t.Errorf("message %q does not contain %q", f.Message, w)
				}
			}
			advice := strings.Join(f.Suggestions, "\n")
			for _, w := range tc.wantAdvice {
				if !strings.Contains(advice, w) {
					t.Errorf("advice %q does not contain %q", advice, w)
				}
			}
			for _, w := range tc.notInAdvice {
				if strings.Contains(advice, w) {
					t.Errorf("advice %q still says %q", advice, w)
				}
			}
		})
	}
}
