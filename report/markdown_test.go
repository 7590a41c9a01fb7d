package report

import (
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/goalrun/goalrun/report/reporttest"
)

// hostile is agent prose that tries to break the rendering.
const hostile = "Done | all good `rm -rf /` </details><script>alert(1)</script>\n" +
	"| fake | table |\n|---|---|\n```\nunclosed fence\n@octocat please merge, cc @github/security\n" +
	"<!-- hidden --> [link](javascript:alert(1)) ![img](http://x/y.png) a\\|b"

// outsideFences drops the text inside mdFence's code blocks (GitHub does
// not link @mentions in them); a fence closes only at a line of the same
// backticks, which mdFence makes longer than any run inside.
func outsideFences(md string) string {
	var b strings.Builder
	fence := ""
	for _, l := range strings.Split(md, "\n") {
		switch {
		case fence == "" && strings.HasPrefix(l, "```"):
			fence = l[:len(l)-len(strings.TrimLeft(l, "`"))]
		case fence != "" && l == fence:
			fence = ""
		case fence == "":
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestMarkdownGolden(t *testing.T) {
	tampered := func() Run {
		r := passedRun()
		r.Changes.CheckModified = true
		r.Changes.RiskyPaths = []string{"calc/sum_test.go", ".github/workflows/ci.yml"}
		r.Sandbox = localPosture()
		return r
	}
	judged := func() Run {
		r := passedRun()
		r.Grounded = false
		r.Check = "the README documents the --foo flag"
		r.Judge = &Judge{Met: true, Reason: "README.md now has a --foo section", By: "agent"}
		return r
	}
	hostileRun := func() Run {
		r := notMetRun()
		r.Summary = hostile
		r.UngroundedClaims = []Claim{{Claim: "all | tests `pass`", Kind: "tests_pass", Reason: "the check exited 1 <b>"}}
		r.Iterations[1].Agent.Cause = "a|b"
		r.Receipts = &Receipts{Total: 2, Failed: 1, ByTool: map[string]int{"Bash|x": 2}, Sample: []Receipt{{Tool: "Bash|x", Brief: "echo `</details>` | tee @me"}}}
		return r
	}
	many := func() Run {
		r := notMetRun()
		for n := 6; n < 20; n++ {
			r.Iterations = append(r.Iterations, Iteration{N: n, Agent: &AgentStep{Status: "success", Turns: 1, Seconds: float64(n)}, Check: &CheckResult{ExitCode: 1, Seconds: 1}})
		}
		r.IterationsTaken = 19
		return r
	}
	for _, tc := range []struct {
		name      string
		doc       Document
		mermaid   bool
		wantTitle []string
	}{
		{"result-success", Finish(passedRun(), nil), true, []string{"✅", "goal met", "grounded", "conclusion success"}},
		{"result-not-met", Finish(notMetRun(), nil), false, []string{"❌", "goal not met", "grounded", "halted: max_iterations"}},
		{"result-ungrounded-judge", Finish(judged(), nil), false, []string{"⚠️", "goal met", "ungrounded", "conclusion neutral"}},
		{"result-check-modified-local", Finish(tampered(), nil), false, []string{"⚠️", "goal met", "check modified", "conclusion neutral"}},
		{"result-hostile-prose", Finish(hostileRun(), nil), false, []string{"goal not met"}},
		{"result-many-iterations", Finish(many(), nil), true, []string{"19 iterations"}},
		{"failure-agent-failed", Finish(agentFailedRun(), nil), false, []string{"❌", "error AgentFailed", "goal not met"}},
		{"failure-auth-required", Finish(authRun(), nil), false, []string{"🔑", "authentication required (invalid_key)"}},
		{"failure-cancelled", Finish(cancelledRun(), nil), false, []string{"⏹️", "cancelled"}},
		{"failure-environment", Finish(environmentRun(), nil), false, []string{"❌", "error EnvironmentFailed", "the check's environment failed"}},
		{"startup-error", StartupError(ErrCheckNotRunnable, "the check exited 127: sh: no-such-cmd: not found"), false, []string{"❌", "error CheckNotRunnable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := MarkdownWith(tc.doc, MarkdownOptions{Mermaid: tc.mermaid})
			checkMarkdown(t, md)
			title, _, _ := strings.Cut(md, "\n")
			for _, w := range tc.wantTitle {
				if !strings.Contains(title, w) {
					t.Errorf("title %q lacks %q", title, w)
				}
			}
			if tc.mermaid != strings.Contains(md, "```mermaid") {
				t.Errorf("mermaid chart present = %v, want %v", !tc.mermaid, tc.mermaid)
			}
			golden(t, "markdown/"+tc.name+".md", []byte(md))
		})
	}
}

var detailsJSON = regexp.MustCompile("(?s)\n````json\n(.*)\n````\n\n</details>\n$")

// checkMarkdown checks the invariants of every rendering: size, UTF-8, one
// details block at the end holding a valid document, tables whose rows
// have the header's number of cells, no raw HTML from the agent.
func checkMarkdown(t *testing.T, md string) {
	t.Helper()
	if len(md) > MarkdownBytes || !utf8.ValidString(md) {
		t.Fatalf("markdown is %d bytes, valid UTF-8 %v", len(md), utf8.ValidString(md))
	}
	m := detailsJSON.FindStringSubmatch(md)
	if m == nil {
		t.Fatalf("no JSON document in a details block at the end:\n%s", md[max(0, len(md)-400):])
	}
	validate(t, []byte(m[1]))
	if strings.Contains(m[1], "\n") || !strings.HasPrefix(m[1], "{") {
		t.Error("the JSON in the fence is not one line starting with {: it could close the fence")
	}
	body := md[:len(md)-len(m[0])]
	if strings.Contains(body, "</details>") {
		t.Error("agent text closed the details block")
	}
	for _, bad := range []string{"<script", "<!--", "<b>"} {
		if strings.Contains(body, bad) {
			t.Errorf("raw %q reached the markdown", bad)
		}
	}
	if regexp.MustCompile(`(^|[^\\])\]\(javascript`).MatchString(body) {
		t.Error("a live link from agent text reached the markdown")
	}
	if regexp.MustCompile(`(^|[^\w])@[\w]`).MatchString(outsideFences(body)) {
		t.Error("an @mention is live")
	}
	cells := 0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "|") {
			cells = 0
			continue
		}
		n := len(regexp.MustCompile(`(^|[^\\])\|`).FindAllString(line, -1))
		if cells == 0 {
			cells = n
		} else if n != cells {
			t.Errorf("table row with %d cells, header has %d: %q", n-1, cells-1, line)
		}
	}
}

// TestMarkdownBounded: the largest documents still render within
// MarkdownBytes, cutting sections but keeping the title and the document.
func TestMarkdownBounded(t *testing.T) {
	for _, s := range []string{ctl(20_000), huge("@|`<&", 20_000), huge("é", 100_000)} {
		d := Finish(worstRun(s, 40), nil)
		md := MarkdownWith(d, MarkdownOptions{Mermaid: true})
		checkMarkdown(t, md)
		if !strings.HasPrefix(md, "### ") {
			t.Error("title lost")
		}
	}
	// A summary of mentions and pipes expands when escaped; it still fits.
	r := passedRun()
	r.Summary = huge("@a|", SummaryCap)
	checkMarkdown(t, Markdown(Finish(r, nil)))
}

func TestMdEscape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain words", "plain words"},
		{"a|b", `a\|b`},
		{"`code`", "\\`code\\`"},
		{"<b>&", "&lt;b&gt;&amp;"},
		{"@octocat", "@\u200boctocat"},
		{"mail me@example.com", "mail me@example.com"},
		{"(@octocat)", "(@\u200boctocat)"},
		{"[x](y)", `\[x\](y)`},
		{"max_iterations", "max_iterations"},
		{"_em_ *strong*", `\_em\_ \*strong\*`},
		{"~~gone~~", `\~\~gone\~\~`},
	} {
		if got := mdEscape(tc.in); got != tc.want {
			t.Errorf("mdEscape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// judgedRun is passedRun decided by a judge (--infer-until alone): no
// check, so never grounded.
func judgedRun(met bool) Run {
	r := passedRun()
	r.Check, r.Passed, r.Grounded = "", met, false
	return r
}

// TestTerminalEventCutOnce: a long failure message is cut once in the
// terminal event (the headline leaves room under BriefCap), never a marker
// cut through by a second marker.
func TestTerminalEventCutOnce(t *testing.T) {
	for _, n := range []int{100, 200, 1000, 100000} {
		rec := &recorder{}
		FailStartup(NewEmitter(rec, nil, fakeClock(time.Second)), ErrBadInput, "--output /tmp/x: "+strings.Repeat("é", n))
		evs := rec.all()
		if len(evs) != 1 {
			t.Fatalf("%d events", len(evs))
		}
		msg := evs[0].Message
		if c := strings.Count(msg, "[truncated:"); c > 1 || len(msg) > BriefCap+MarkerMaxBytes {
			t.Errorf("message of %d runes: %d markers, %d bytes: %q", n, c, len(msg), msg)
		}
	}
}

func TestHeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  Document
		want string
	}{
		{"success", Finish(passedRun(), nil), "goal met · grounded · 2 iterations · conclusion success"},
		{"not met", Finish(notMetRun(), nil), "goal not met · ungrounded: check failing · halted: max_iterations · 5 iterations · conclusion failure"},
		{"judge said met", Finish(judgedRun(true), nil), "goal met · ungrounded (a judge's word) · 2 iterations · conclusion neutral"},
		{"judge said not met", Finish(judgedRun(false), nil), "goal not met · ungrounded (a judge's word) · 2 iterations · conclusion failure"},
		{"error", Finish(agentFailedRun(), nil), "error AgentFailed · goal not met · ungrounded: check failing · 1 iteration · conclusion failure · claude exited 1 without a result event: \"Error: connect ECONNREFUSED 127.0.0.1:443\""},
		{"startup", StartupError(ErrBadInput, "bad flag"), "error BadInput · conclusion failure · bad flag"},
		{"stopped before any check", Finish(Run{Check: "go test ./...", Error: ErrAuthRequired, AuthReason: AuthMissingKey, Message: "no key"}, nil),
			"authentication required (missing_key) · goal not met · ungrounded: check not run · 0 iterations · conclusion action_required · no key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			validate(t, Encode(tc.doc))
			if got := Headline(tc.doc); got != tc.want {
				t.Errorf("Headline = %q\nwant       %q", got, tc.want)
			}
		})
	}
}

// TestMarkdownVerdictRules: the report says, in its title and first
// warnings, why a passing check is not a verified pass: the run failed
// closed for git's executable configuration, the check tested nothing, or
// the agent changed the check (with the rule that fired).
func TestMarkdownVerdictRules(t *testing.T) {
	unsafe := Finish(Run{Check: "go test ./...", Passed: true, Grounded: true, IterationsTaken: 1,
		Changes: &Changes{FilesChanged: 1, RiskyPaths: []string{".git/config"}, GitExecutable: []string{".git/config"}}}, nil)
	empty := Finish(Run{Check: "go test ./...", Passed: true, Grounded: true, IterationsTaken: 1,
		TestedNothing: "The check exited 0 but tested nothing: go test ran no test in any of its 2 packages."}, nil)
	bent := Finish(Run{Check: "go test ./...", Passed: true, Grounded: true, IterationsTaken: 1,
		Changes: &Changes{FilesChanged: 1, RiskyPaths: []string{"boot.go"}, CheckModified: true,
			CheckModifiedReason: "boot.go: adds or changes init() (it runs before the tests)"}}, nil)
	for _, c := range []struct {
		name       string
		doc        Document
		conclusion string
		want       []string
	}{
		{"unsafe change", unsafe, ConclusionFailure, []string{"failed closed: git's executable configuration changed",
			"The agent changed git's executable configuration", "(`git_executable`: .git/config)"}},
		{"tested nothing", empty, ConclusionNeutral, []string{"but the check tested nothing", "Tested nothing", "2 packages"}},
		{"check modified", bent, ConclusionNeutral, []string{"check modified by the agent", "First: boot.go: adds or changes init()"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.doc.Conclusion != c.conclusion {
				t.Errorf("conclusion %q, want %q", c.doc.Conclusion, c.conclusion)
			}
			md := Markdown(c.doc)
			for _, w := range c.want {
				if !strings.Contains(md, w) {
					t.Errorf("markdown lacks %q:\n%s", w, md)
				}
			}
			if err := reporttest.ValidateJSON(Encode(c.doc)); err != nil {
				t.Error(err)
			}
		})
	}
}
