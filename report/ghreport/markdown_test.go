package ghreport

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/report"
)

// hostileNames are file names an agent can choose (attack round: they
// reached the fix pull request body and the job summary raw).
var hostileNames = []string{
	".github/workflows/x` @everyone <img src=https:evil.example> <b>bold`.yml",
	"lnk <img src=x> @octocat\n## injected heading",
	"a\n> [!CAUTION]\n> merge me",
	"[click](https://evil.example) *bold* ~~gone~~ | cell",
	"<!-- hidden --> &amp; snake_case_name _lead",
}

// unsafeMarkdown returns what in md would act as markup from a hostile
// name: raw HTML, an @mention that notifies, a line leaving the alert
// quote, an unescaped backtick.
func unsafeMarkdown(md string) []string {
	var bad []string
	for _, s := range []string{"<img", "<b>", "<!--", "@everyone", "@octocat", "\n## injected", "\n> [!CAUTION]"} {
		if strings.Contains(md, s) {
			bad = append(bad, s)
		}
	}
	// Backticks, brackets and emphasis only escaped (goalrun's own
	// "`GITHUB_TOKEN`" aside).
	rest := strings.ReplaceAll(md, "`GITHUB_TOKEN`", "")
	if m := unescaped.FindAllString(rest, -1); len(m) > 0 {
		bad = append(bad, m...)
	}
	return bad
}

var unescaped = regexp.MustCompile("(^|[^\\\\])[`*~|]|(^|[^\\\\])\\](\\()")

// TestAgentNamesEscaped: the fix pull request body and the job summary's
// notes show hostile names as text.
func TestAgentNamesEscaped(t *testing.T) {
	render := func(report.Document) string { return "REPORT" }
	for _, tc := range []struct {
		name string
		md   func(t *testing.T) string
	}{
		{"fix PR body: workflow changes", func(*testing.T) string {
			return (&FixPR{WorkflowChanges: hostileNames, Render: render}).body(passedDoc())
		}},
		{"fix PR body: not committed", func(*testing.T) string {
			return (&FixPR{Unreadable: hostileNames, Render: render}).body(passedDoc())
		}},
		{"job summary notes", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "summary.md")
			s := &StepSummary{Path: p, Render: render,
				Notes: []string{"the agent changed workflow files, which goalrun never pushes: " + strings.Join(hostileNames, ", ")}}
			if err := s.Publish(context.Background(), passedDoc()); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(p)
			return string(b)
		}},
		{"job summary notice", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "summary.md")
			if err := (&StepSummary{Path: p}).Notice("goalrun did not start: " + strings.Join(hostileNames, " ")); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(p)
			return string(b)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := tc.md(t)
			if bad := unsafeMarkdown(md); len(bad) > 0 {
				t.Errorf("raw markup %q in:\n%s", bad, md)
			}
			for _, name := range hostileNames {
				if !strings.Contains(md, report.MarkdownText(name)) {
					t.Errorf("%q is not shown (escaped) in:\n%s", name, md)
				}
			}
		})
	}
}
