package report

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/internal/textcap"
)

// TestFinishGolden builds every shape from a realistic Run, validates it and
// compares it with testdata/golden/<name>.json; it also checks the one
// terminal event agrees with the document.
func TestFinishGolden(t *testing.T) {
	for _, tc := range []struct {
		name           string
		run            Run
		wantStatus     string
		wantConclusion string
		wantEvent      string
	}{
		{"result-success", passedRun(), StatusSuccess, ConclusionSuccess, EventCompleted},
		{"result-not-met", notMetRun(), StatusSuccess, ConclusionFailure, EventCompleted},
		{"failure-agent-failed", agentFailedRun(), StatusError, ConclusionFailure, EventFailed},
		{"failure-auth-required", authRun(), StatusAuthRequired, ConclusionActionRequired, EventFailed},
		{"failure-cancelled", cancelledRun(), StatusCancelled, ConclusionCancelled, EventFailed},
		{"failure-environment", environmentRun(), StatusError, ConclusionFailure, EventFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			e := NewEmitter(rec, NewRedactor(), fakeClock(time.Second))
			d := Finish(tc.run, e)
			if d.Status != tc.wantStatus || d.Conclusion != tc.wantConclusion {
				t.Fatalf("status/conclusion = %s/%s, want %s/%s", d.Status, d.Conclusion, tc.wantStatus, tc.wantConclusion)
			}
			doc := Encode(d)
			validate(t, doc)
			golden(t, "golden/"+tc.name+".json", indent(t, doc))

			terms := rec.terminals()
			if len(terms) != 1 {
				t.Fatalf("terminal events = %d, want exactly 1", len(terms))
			}
			ev := terms[0]
			if ev.Type != tc.wantEvent || ev.Phase != PhaseRun {
				t.Errorf("terminal event = %s/%s, want %s/run", ev.Type, ev.Phase, tc.wantEvent)
			}
			m := decode(t, doc)
			if ev.Data["status"] != m["status"] || ev.Data["conclusion"] != m["conclusion"] {
				t.Errorf("event says %v/%v, document says %v/%v", ev.Data["status"], ev.Data["conclusion"], m["status"], m["conclusion"])
			}
			if ev.Data["turns"] != int(m["turns"].(float64)) || ev.Data["elapsed_seconds"] != m["elapsed_seconds"] {
				t.Errorf("event turns/elapsed %v/%v, document %v/%v", ev.Data["turns"], ev.Data["elapsed_seconds"], m["turns"], m["elapsed_seconds"])
			}
			if tc.wantEvent == EventFailed {
				if ev.Data["error"] != m["error"] {
					t.Errorf("event error %v, document %v", ev.Data["error"], m["error"])
				}
				f, _ := ev.Data["failure"].(map[string]any)
				if f["cause"] != m["failure"].(map[string]any)["cause"] {
					t.Errorf("event failure %v, document %v", f, m["failure"])
				}
				if _, ok := m["summary"]; ok {
					t.Error("a failure shape carries summary")
				}
			} else if _, ok := m["error"]; ok {
				t.Error("the result shape carries error")
			}
			// A second Finish on the same emitter emits nothing more.
			Finish(tc.run, e)
			if n := len(rec.terminals()); n != 1 {
				t.Errorf("after a second Finish: %d terminal events, want 1", n)
			}
		})
	}
}

// TestStartupErrorGolden checks the startup-error shape.
func TestStartupErrorGolden(t *testing.T) {
	for _, tc := range []struct {
		name        string
		code, msg   string
		suggestions []string
	}{
		{"startup-bad-flag", ErrBadInput, `--max-iterations: "five" is not a whole number`, []string{"Give --max-iterations a whole number such as 5."}},
		{"startup-no-docker", ErrSandboxUnavailable, "no Docker Engine answered at unix:///var/run/docker.sock (dial: no such file or directory)", nil},
		{"startup-check-not-runnable", ErrCheckNotRunnable, "the check exited 127 at iteration 0: sh: 1: no-such-cmd: not found", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := StartupError(tc.code, tc.msg, tc.suggestions...)
			doc := Encode(d)
			validate(t, doc)
			golden(t, "golden/"+tc.name+".json", indent(t, doc))
			m := decode(t, doc)
			for _, k := range []string{"sandbox", "summary", "goal", "failure", "receipts"} {
				if _, ok := m[k]; ok {
					t.Errorf("startup error carries %q", k)
				}
			}
			if len(m["suggestions"].([]any)) == 0 {
				t.Error("no suggestions")
			}
		})
	}
}

// TestFailStartupEmitsOneTerminal checks FailStartup's event and redaction.
func TestFailStartupEmitsOneTerminal(t *testing.T) {
	rec := &recorder{}
	e := NewEmitter(rec, NewRedactor("hunter2-secret"), fakeClock(time.Second))
	d := FailStartup(e, ErrBadInput, "config: token hunter2-secret is not a flag")
	validate(t, Encode(d))
	if strings.Contains(d.Message, "hunter2") {
		t.Errorf("message not redacted: %q", d.Message)
	}
	terms := rec.terminals()
	if len(terms) != 1 || terms[0].Type != EventFailed || terms[0].Data["error"] != ErrBadInput {
		t.Fatalf("terminal events = %+v", terms)
	}
	Finish(passedRun(), e)
	if len(rec.terminals()) != 1 {
		t.Error("Finish after FailStartup emitted a second terminal event")
	}
}

// TestConclusion checks the conclusion rules of docs/goalrun-1.md.
func TestConclusion(t *testing.T) {
	halt := func(h string) *string { return &h }
	for _, tc := range []struct {
		name           string
		status         string
		goal           *Goal
		changes        *Changes
		allowTestEdits bool
		want           string
	}{
		{"passed and grounded", StatusSuccess, &Goal{Passed: true, Grounded: true}, nil, false, ConclusionSuccess},
		{"passed not grounded (judge)", StatusSuccess, &Goal{Passed: true}, nil, false, ConclusionNeutral},
		{"passed grounded but check modified", StatusSuccess, &Goal{Passed: true, Grounded: true}, &Changes{CheckModified: true}, false, ConclusionNeutral},
		{"check modified with test edits allowed", StatusSuccess, &Goal{Passed: true, Grounded: true}, &Changes{CheckModified: true}, true, ConclusionSuccess},
		{"ungrounded stays neutral with test edits allowed", StatusSuccess, &Goal{Passed: true}, &Changes{CheckModified: true}, true, ConclusionNeutral},
		{"not passed max_iterations", StatusSuccess, &Goal{Halt: halt(HaltMaxIterations)}, nil, false, ConclusionFailure},
		{"not passed no_progress", StatusSuccess, &Goal{Halt: halt(HaltNoProgress)}, nil, false, ConclusionFailure},
		{"not passed budget", StatusSuccess, &Goal{Halt: halt(HaltBudget)}, nil, false, ConclusionFailure},
		{"timeout", StatusSuccess, &Goal{Halt: halt(HaltTimeout)}, nil, false, ConclusionTimedOut},
		{"error", StatusError, &Goal{Passed: true, Grounded: true}, nil, false, ConclusionFailure},
		{"cancelled", StatusCancelled, &Goal{}, nil, false, ConclusionCancelled},
		{"auth_required", StatusAuthRequired, &Goal{}, nil, false, ConclusionActionRequired},
		{"no goal", StatusSuccess, nil, nil, false, ConclusionFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Conclusion(tc.status, tc.goal, tc.changes, tc.allowTestEdits); got != tc.want {
				t.Errorf("Conclusion = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestFinishStatus checks how a Run's facts pick the shape, and that every
// document validates.
func TestFinishStatus(t *testing.T) {
	for _, tc := range []struct {
		name           string
		mutate         func(*Run)
		wantStatus     string
		wantConclusion string
		wantHalt       string // "" = null
		wantError      string
	}{
		{"passed", func(r *Run) {}, StatusSuccess, ConclusionSuccess, "", ""},
		{"passed clears a stray halt", func(r *Run) { r.Halt = HaltMaxIterations }, StatusSuccess, ConclusionSuccess, "", ""},
		{"already passing, agent never ran", func(r *Run) { r.IterationsTaken = 0; r.Iterations = r.Iterations[2:] }, StatusSuccess, ConclusionSuccess, "", ""},
		{"judge pass is neutral", func(r *Run) {
			r.Grounded = false
			r.Judge = &Judge{Met: true, Reason: "the README now documents --foo", By: "agent"}
		}, StatusSuccess, ConclusionNeutral, "", ""},
		{"tampered check is neutral", func(r *Run) { r.Changes.CheckModified = true; r.Changes.RiskyPaths = []string{"calc/sum_test.go"} }, StatusSuccess, ConclusionNeutral, "", ""},
		{"tampered check allowed", func(r *Run) { r.Changes.CheckModified = true; r.AllowTestEdits = true }, StatusSuccess, ConclusionSuccess, "", ""},
		{"timeout", func(r *Run) { r.Passed = false; r.Halt = HaltTimeout }, StatusSuccess, ConclusionTimedOut, HaltTimeout, ""},
		{"halt interrupted means cancelled", func(r *Run) { r.Passed = false; r.Halt = HaltInterrupted }, StatusCancelled, ConclusionCancelled, HaltInterrupted, ErrCancelled},
		{"cancelled wins over an error", func(r *Run) { r.Passed = false; r.Cancelled = true; r.Error = ErrAgentFailed }, StatusCancelled, ConclusionCancelled, HaltInterrupted, ErrCancelled},
		{"auth reason means auth_required", func(r *Run) { r.Passed = false; r.AuthReason = AuthMissingKey }, StatusAuthRequired, ConclusionActionRequired, HaltAuthRequired, ErrAuthRequired},
		{"sandbox failed", func(r *Run) { r.Passed = false; r.Error = ErrSandboxFailed; r.Sandbox = nil }, StatusError, ConclusionFailure, "", ErrSandboxFailed},
		{"local fallback", func(r *Run) { r.Sandbox = localPosture() }, StatusSuccess, ConclusionSuccess, "", ""},
		{"unknown error code still has suggestions", func(r *Run) { r.Passed = false; r.Error = "SomethingNew" }, StatusError, ConclusionFailure, "", "SomethingNew"},
		{"unknown auth reason", func(r *Run) { r.Passed = false; r.Error = ErrAuthRequired; r.AuthReason = "teapot" }, StatusAuthRequired, ConclusionActionRequired, HaltAuthRequired, ErrAuthRequired},
		{"nothing known but cancelled", func(r *Run) { *r = Run{Cancelled: true} }, StatusCancelled, ConclusionCancelled, HaltInterrupted, ErrCancelled},
		{"nothing known but an error", func(r *Run) { *r = Run{Error: ErrSandboxUnavailable} }, StatusError, ConclusionFailure, "", ErrSandboxUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := passedRun()
			tc.mutate(&run)
			d := Finish(run, nil)
			validate(t, Encode(d))
			if d.Status != tc.wantStatus || d.Conclusion != tc.wantConclusion || d.Error != tc.wantError {
				t.Fatalf("status/conclusion/error = %s/%s/%s, want %s/%s/%s", d.Status, d.Conclusion, d.Error, tc.wantStatus, tc.wantConclusion, tc.wantError)
			}
			got := ""
			if d.Goal.Halt != nil {
				got = *d.Goal.Halt
			}
			if got != tc.wantHalt {
				t.Errorf("halt = %q, want %q", got, tc.wantHalt)
			}
		})
	}
}

// TestFinishTailSummary: the command agent's summary arrives as the end of
// its stdout (CapTail of a 64 KiB window of a 10 MB stream); Finish keeps
// its end, with the stream's total in the one marker.
func TestFinishTailSummary(t *testing.T) {
	const total = 10 << 20
	window := strings.Repeat("x", 64<<10-len("the fix is in")) + "the fix is in"
	run := passedRun()
	run.Summary = CapTail(window, total, 64<<10)
	d := Finish(run, nil)
	validate(t, Encode(d))
	want := "…[truncated: 4096 of 10485760 bytes shown; 10481664 elided]…"
	if !strings.HasPrefix(*d.Summary, want) || !strings.HasSuffix(*d.Summary, "the fix is in") {
		t.Errorf("summary = %.120q…%q", *d.Summary, (*d.Summary)[len(*d.Summary)-20:])
	}
	if strings.Count(*d.Summary, "[truncated:") != 1 {
		t.Error("more than one marker")
	}
}

// TestFinishCheckTail: a check tail with the stream's total is capped to
// its last TailCap bytes after redaction, with the total in the marker.
func TestFinishCheckTail(t *testing.T) {
	e := NewEmitter(nil, NewRedactor(secret), nil)
	run := passedRun()
	tail := strings.Repeat("y", 600) + " token=" + secret + " FAIL"
	run.Iterations[0].Check.Tail = tail
	run.Iterations[0].Check.OutputBytes = 1 << 20
	d := Finish(run, e)
	validate(t, Encode(d))
	got := d.Iterations[0].Check.Tail
	redacted := len(tail) - len(secret) + len(Redacted)
	wantTotal := 1<<20 - len(tail) + redacted
	content, total, ok := textcap.SplitMarker(got, true)
	if !ok || total != wantTotal || len(content) > TailCap || !strings.HasSuffix(got, "token=*** FAIL") {
		t.Errorf("tail = %q (total %d, want %d)", got, total, wantTotal)
	}
}

// TestDefaultSuggestionsArePlainSentences: suggestions are read by programs
// and other hosts, so they are sentences, never shell commands.
func TestDefaultSuggestionsArePlainSentences(t *testing.T) {
	codes := []string{ErrBadInput, ErrAgentFailed, ErrAgentNotFound, ErrSandboxUnavailable, ErrSandboxFailed, ErrCheckNotRunnable, ErrEnvironmentFailed, ErrAuthRequired, ErrCancelled, ErrGitHubUnavailable}
	for _, code := range codes {
		for _, reason := range []string{"", AuthInvalidKey, AuthExpired, AuthMissingKey} {
			s := DefaultSuggestions(code, reason)
			if len(s) == 0 {
				t.Errorf("%s: no suggestion", code)
			}
			for _, line := range s {
				if !strings.HasSuffix(line, ".") || line[0] < 'A' || line[0] > 'Z' {
					t.Errorf("%s: not a sentence: %q", code, line)
				}
				for _, cmd := range []string{"`", "$ ", "$(", " | ", "sudo ", "docker run", "apt-get", "npm ", "export ", "&&"} {
					if strings.Contains(line, cmd) {
						t.Errorf("%s: looks like a shell command (%q): %q", code, cmd, line)
					}
				}
			}
		}
	}
	if DefaultSuggestions("NoSuchCode", "") != nil {
		t.Error("suggestions for an unknown code")
	}
}

// TestRiskyPathsCutIsCounted: a cut of changes.risky_paths is never silent —
// risky_paths_omitted counts what the cap (or the tracker's own bound, given
// as RiskyPathsOmitted) left out, "elided" names the cap with the true total,
// and both survive a second normalization (Encode).
func TestRiskyPathsCutIsCounted(t *testing.T) {
	paths := func(n int) []string {
		l := make([]string, n)
		for i := range l {
			l[i] = fmt.Sprintf(".github/workflows/w%03d.yml", i)
		}
		return l
	}
	for _, tc := range []struct {
		name        string
		listed      int // risky paths handed to Finish
		omitted     int // already cut by the tracker
		wantListed  int
		wantOmitted int
		wantNote    string // "" = no note about risky paths
	}{
		{"none", 0, 0, 0, 0, ""},
		{"exactly the cap", RiskyPathsMax, 0, RiskyPathsMax, 0, ""},
		{"one over the cap", RiskyPathsMax + 1, 0, RiskyPathsMax, 1, "changes.risky_paths: 16 of 17 kept (cap)"},
		{"tracker bound and cap", 256, 44, RiskyPathsMax, 284, "changes.risky_paths: 16 of 300 kept (cap)"},
		{"tracker bound only", 3, 5, 3, 5, ""},
		{"negative count repaired", 2, -7, 2, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := passedRun()
			run.Changes = &Changes{FilesChanged: tc.listed, RiskyPaths: paths(tc.listed), RiskyPathsOmitted: tc.omitted}
			d := Finish(run, nil)
			for pass, c := range []*Changes{d.Changes, decodeDoc(t, Encode(d)).Changes} {
				if len(c.RiskyPaths) != tc.wantListed || c.RiskyPathsOmitted != tc.wantOmitted {
					t.Errorf("pass %d: %d listed, %d omitted; want %d, %d", pass, len(c.RiskyPaths), c.RiskyPathsOmitted, tc.wantListed, tc.wantOmitted)
				}
			}
			var notes []string
			for _, e := range d.Elided {
				if strings.HasPrefix(e, "changes.risky_paths") {
					notes = append(notes, e)
				}
			}
			switch {
			case tc.wantNote == "" && len(notes) > 0:
				t.Errorf("elided = %q, want no risky-path note", notes)
			case tc.wantNote != "" && (len(notes) != 1 || notes[0] != tc.wantNote):
				t.Errorf("elided = %q, want [%q]", notes, tc.wantNote)
			}
			validate(t, Encode(d))
			if tc.wantOmitted > 0 && !strings.Contains(Markdown(d), fmt.Sprintf("and %d more risky", tc.wantOmitted)) {
				t.Errorf("markdown does not count the %d omitted risky paths", tc.wantOmitted)
			}
		})
	}
}

// decodeDoc decodes an encoded document into its Go shape.
func decodeDoc(t *testing.T, b []byte) Document {
	t.Helper()
	var d Document
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}
