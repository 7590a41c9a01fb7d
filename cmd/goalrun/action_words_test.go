package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/report/ghreport/githubtest"
)

// TestInputWords: run's flags become the action's inputs in advice; flags
// only a config file can set say so; quoted commands keep their flags.
func TestInputWords(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"a flag with an input", "--max-cost-usd: bound it by tokens with --max-tokens (input + output) instead",
			"input max-cost-usd: bound it by tokens with input max-tokens (input + output) instead"},
		{"a minutes input", "--timeout 0s: must be positive", "input timeout-minutes 0s: must be positive"},
		{"a setting only a config file has", "use --max-turns or --no-progress-turns", "use max-turns (a config file setting) or no-progress-turns (a config file setting)"},
		{"not a goalrun flag", "run go test --count=1 --foo", "run go test --count=1 --foo"},
		{"quoted commands keep their flags", "the check \"go test --timeout 30s\" and `x --model m` failed; set --model",
			"the check \"go test --timeout 30s\" and `x --model m` failed; set input model"},
		{"part of a word", "re--model and a---model", "re--model and a---model"},
		{"no flag", "nothing to do", "nothing to do"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := inputWords(tc.in); got != tc.want {
				t.Errorf("inputWords(%q)\n= %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestActionBudgetInputs: an action user can bound a Codex or Gemini run
// (which report no cost) by tokens and each step by minutes, and the
// refusal of a cost budget for them names the action's inputs, never run's
// flags — in the annotation, the check run and the document file.
func TestActionBudgetInputs(t *testing.T) {
	flag := regexp.MustCompile(`(^|[^\w-])--[a-z]`)
	for _, tc := range []struct {
		name   string
		inputs map[string]string
		code   int
		want   []string
	}{
		{name: "a cost budget for codex", inputs: map[string]string{"agent": "codex", "max-cost-usd": "2"}, code: exitBadInput,
			want: []string{"input max-cost-usd", "input max-tokens"}},
		{name: "a negative token budget", inputs: map[string]string{"max-tokens": "-5"}, code: exitBadInput,
			want: []string{"input max-tokens -5: must not be negative"}},
		{name: "a step timeout that is no number", inputs: map[string]string{"step-timeout-minutes": "soon"}, code: exitBadInput,
			want: []string{"input step-timeout-minutes"}},
		{name: "tokens and step minutes accepted", inputs: map[string]string{"agent": "codex", "max-tokens": "200000", "step-timeout-minutes": "3",
			"until": "true"}, code: exitMet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := githubtest.NewServer(t, "octo-org/demo")
			head := seedDemo(t, srv)
			srv.AddIssue(17)
			in := map[string]string{"until": "go test ./...", "sandbox": "local"}
			for k, v := range tc.inputs {
				in[k] = v
			}
			r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head), in)
			res := r.run()
			if res.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", res.code, tc.code, res.stdout)
			}
			if tc.code == exitMet {
				return
			}
			var annotation string
			for _, l := range strings.Split(string(res.stdout), "\n") {
				if strings.HasPrefix(l, "::error::") {
					annotation = l
				}
			}
			doc := d0(t, r)
			runs := srv.CheckRuns()
			if len(runs) != 1 {
				t.Fatalf("%d check runs", len(runs))
			}
			for where, text := range map[string]string{"annotation": annotation, "document": doc.Message + " " + strings.Join(doc.Suggestions, " "),
				"check run": runs[0].Summary} {
				for _, w := range tc.want {
					if !strings.Contains(text, w) {
						t.Errorf("the %s lacks %q:\n%s", where, w, text)
					}
				}
				if where != "check run" && flag.MatchString(text) {
					t.Errorf("the %s names a flag:\n%s", where, text)
				}
			}
		})
	}
}

// TestActionCheckNameIsJobID: a check-name equal to the job's id — the name
// of the job's own check — is warned about, naming the default that cannot
// collide.
func TestActionCheckNameIsJobID(t *testing.T) {
	srv := githubtest.NewServer(t, "octo-org/demo")
	head := seedDemo(t, srv)
	srv.AddIssue(17)
	r := newRunner(t, srv, "pull_request", "pull_request.opened.json", setHead(head),
		map[string]string{"until": "true", "sandbox": "local", "check-name": "goalrun"})
	r.env["GITHUB_JOB"] = "goalrun"
	res := r.run()
	if res.code != exitMet {
		t.Fatalf("exit %d\n%s", res.code, res.stdout)
	}
	if !regexp.MustCompile(`(?m)^::warning::check-name "goalrun" is this job's id.*by default it is "goalrun verdict"`).Match(res.stdout) {
		t.Errorf("no warning about the collision:\n%s", res.stdout)
	}
}
