package grounding

import (
	"fmt"
	"strings"
	"testing"

	"github.com/goalrun/goalrun/internal/redact"
	"github.com/goalrun/goalrun/internal/textcap"
)

func TestClaimsOrderCapAndExcerpts(t *testing.T) {
	ev := NewEvidence()
	ev.SetCheck("go test ./...", true, false, 1)
	var msg strings.Builder
	for i := 0; i < 12; i++ {
		fmt.Fprintf(&msg, "I edited `file%02d.go`. ", i)
	}
	msg.WriteString("All tests pass.")
	claims := ev.Claims(msg.String())
	if len(claims) != ClaimsMax {
		t.Fatalf("%d claims, want the cap %d", len(claims), ClaimsMax)
	}
	if claims[0].Kind != ClaimTestsPass || !strings.Contains(claims[0].Reason, `"go test ./..." failed after the last turn (exit 1)`) {
		t.Errorf("the contradiction (last in the text) must come first and survive the cap: %+v", claims[0])
	}
	if claims[1].Claim != "I edited `file00.go`." || !strings.Contains(claims[1].Reason, "file00.go") {
		t.Errorf("second claim = %+v", claims[1])
	}
	long := "I committed " + strings.Repeat("the very long explanation ", 40) + "."
	c := NewEvidence().Claims(long)
	if len(c) != 1 || len(c[0].Claim) > ClaimTextCap+textcap.MarkerMaxBytes || !strings.Contains(c[0].Claim, "truncated") {
		t.Errorf("excerpt not capped with a marker: %+v", c)
	}
}

func TestClaimsRedactsExcerpts(t *testing.T) {
	ev := NewEvidence().SetRedactor(redact.New("sk-secret-123"))
	c := ev.Claims("I pushed with token sk-secret-123 to origin.")
	if len(c) != 1 || strings.Contains(c[0].Claim, "sk-secret-123") || !strings.Contains(c[0].Claim, "***") {
		t.Errorf("claims = %+v", c)
	}
}

func TestClaimsDeduplicatePerKindAndFile(t *testing.T) {
	c := NewEvidence().Claims("I committed it. Committed! I also committed the docs. I edited a.go. I edited `a.go` again.")
	if len(c) != 2 {
		t.Errorf("claims = %+v, want one commit and one a.go edit", c)
	}
}

func TestEvidenceBounds(t *testing.T) {
	ev := NewEvidence()
	for i := 0; i < EvidencePathsMax+10; i++ {
		ev.AddReceipt(Receipt{Tool: "Write", OK: true, Brief: fmt.Sprintf("/w/f%d.txt", i), Paths: []string{fmt.Sprintf("/w/f%d.txt", i)}})
	}
	if n := len(ev.written.m); n != EvidencePathsMax || !ev.written.overflow {
		t.Fatalf("written set has %d paths (overflow %v), want the bound", n, ev.written.overflow)
	}
	// a file claim no longer provable either way is not listed
	if c := ev.Claims("I edited `never-written.go`."); len(c) != 0 {
		t.Errorf("claims after overflow = %+v", c)
	}
	changed := map[string]string{}
	for i := 0; i < EvidencePathsMax+1; i++ {
		changed[fmt.Sprintf("c%d.go", i)] = ChangeModified
	}
	ev2 := NewEvidence()
	ev2.SetChanged(changed)
	if !ev2.changedOverflow || len(ev2.changed) != EvidencePathsMax {
		t.Errorf("changed set not bounded: %d, %v", len(ev2.changed), ev2.changedOverflow)
	}
}

func TestReceiptRecognition(t *testing.T) {
	cases := []struct {
		tool, brief string
		ok          bool
		paths       []string
		claim       string // a claim this receipt backs
	}{
		{"Bash", "go test -race ./...", false, nil, "I ran the tests."},
		{"Bash", "cd web && npm run test:unit -- --ci", true, nil, "All tests pass."},
		{"command_execution", "bash -lc 'python -m pytest -q tests/'", true, nil, "All tests pass."},
		{"Bash", "make check", true, nil, "All tests pass."},
		{"Bash", "./gradlew clean test", true, nil, "I ran the tests."},
		{"Bash", "git -c user.name=bot commit -am fix", true, nil, "I committed it."},
		{"Bash", "git push --set-upstream origin fix", true, nil, "I pushed the branch."},
		{"Bash", "gh pr create --fill", true, nil, "I opened a PR."},
		{"mcp__github__create_pull_request", "Fix", true, nil, "I opened a pull request."},
		{"mcp__github__push_files", "acme/x", true, nil, "Pushed the files."},
		{"Bash", "pip3 install -r requirements.txt", true, nil, "I installed the dependencies."},
		{"Bash", "apt-get -y install libpq-dev", true, nil, "Installed libpq-dev."},
		{"Bash", "helm upgrade --install app ./chart", true, nil, "Deployed the chart to staging."},
		{"Edit", "/workspace/pkg/a.go", true, []string{"/workspace/pkg/a.go"}, "I edited pkg/a.go."},
		{"Write", "/workspace/docs/new.md", true, nil, "Created `docs/new.md`."},
		{"Bash", "sed -i 's/a/b/' src/x.py", true, nil, "Updated src/x.py."},
		{"Bash", "cat > notes.txt <<EOF", true, nil, "I wrote `notes.txt`."},
		{"Bash", "git rm -q old.go", true, nil, "Deleted old.go."},
		{"Bash", "rm -f build/out.bin", true, nil, "Removed `build/out.bin`."},
		{"file_change", "src/lib.rs", true, []string{"src/lib.rs"}, "Updated `lib.rs`."},
	}
	for _, c := range cases {
		t.Run(c.tool+" "+c.brief, func(t *testing.T) {
			ev := NewEvidence()
			ev.AddReceipt(Receipt{Tool: c.tool, OK: c.ok, Brief: c.brief, Paths: c.paths})
			if got := ev.Claims(c.claim); len(got) != 0 {
				t.Errorf("%q not backed by %s %q: %+v", c.claim, c.tool, c.brief, got)
			}
			if got := NewEvidence().Claims(c.claim); len(got) != 1 {
				t.Errorf("%q without receipts: %+v (want exactly one claim)", c.claim, got)
			}
		})
	}
}

func TestFileLikeAndPathMatches(t *testing.T) {
	files := []string{"calc.go", "pkg/api/handler.go", "./x.py", "Makefile", ".gitignore", "README.md", "a.test.ts",
		"db/migrations/0042_add_index.sql", "Gemfile.lock", "CMakeLists.txt"}
	notFiles := []string{"Sum", "time.Now()", "utf8.Valid", "origin/main", "fix/sum", "github.com/stretchr/testify",
		"1.4.2", "k8s/", "e.g.", "...", "https://example.com/a.go", "lodash.debounce", "v1.2"}
	for _, f := range files {
		if !fileLike(f) {
			t.Errorf("fileLike(%q) = false", f)
		}
	}
	for _, f := range notFiles {
		if fileLike(f) {
			t.Errorf("fileLike(%q) = true", f)
		}
	}
	matches := [][2]string{{"/workspace/calc.go", "calc.go"}, {"calc/sum.go", "sum.go"}, {"pkg/a.go", "/workspace/pkg/a.go"}, {"README.md", "readme.md"}}
	for _, m := range matches {
		if !pathMatches(m[0], m[1]) {
			t.Errorf("pathMatches(%q, %q) = false", m[0], m[1])
		}
	}
	for _, m := range [][2]string{{"/workspace/mycalc.go", "calc.go"}, {"a/b.go", "c/b.go"}, {"", "x"}} {
		if pathMatches(m[0], m[1]) {
			t.Errorf("pathMatches(%q, %q) = true", m[0], m[1])
		}
	}
}

// TestClaimsExtractionRules pins single rules the corpus exercises only
// incidentally.
func TestClaimsExtractionRules(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string // kinds (with ":file" for named files)
	}{
		{"negated", "I did not commit anything and I haven't pushed.", nil},
		{"future", "I'll commit and push once CI is green.", nil},
		{"question", "Have I pushed the branch?", nil},
		{"imperative advice", "Run `go test ./...` and confirm all tests pass.", nil},
		{"conditional", "If the tests pass, merge it.", nil},
		{"code fence", "```\ngit commit -am done && git push\n```", nil},
		{"blockquote", "> I committed and pushed everything.", nil},
		// Where a rule that toggles on any ``` or ~~~ line and CommonMark
		// disagree, CommonMark (what the reader sees rendered) decides.
		{"four-backtick fence closed only by four", "````\n```\ngit commit -am done && git push\n````\nI pushed the branch.", []string{"pushed"}},
		{"tilde line inside a backtick fence", "```\n~~~\ngit push origin main\n```\nI pushed the branch.", []string{"pushed"}},
		{"fence indented four spaces is not a fence", "Notes:\n\n    ```\n\nI committed the fix.", []string{"committed"}},
		{"unclosed fence runs to the end", "I ran `go test ./...`.\n```\nAll tests pass.\nCommitted and pushed.", []string{"ran_tests"}},
		{"lazy continuation of a quote", "> The reviewer said:\nI pushed it already.\n\nI committed the fix.", []string{"committed"}},
		{"passive", "The fix was pushed to origin.", []string{"pushed"}},
		{"subjectless list", "- Pushed `main`\n- Opened PR #3", []string{"pushed", "opened_pr"}},
		{"unchecked box", "- [ ] Committed", nil},
		{"checked box", "- [x] Committed", []string{"committed"}},
		{"fail mark", "❌ Pushed", nil},
		{"deleted from", "Removed the unused import from `main.go`.", []string{"edited_file:main.go"}},
		{"deleted file", "Removed `main_old.go`.", []string{"deleted_file:main_old.go"}},
		{"added to", "Added a `--verbose` flag to `cli.go`.", []string{"edited_file:cli.go"}},
		{"added file", "Added `cli_test.go`.", []string{"created_file:cli_test.go"}},
		{"other actor", "The CI pipeline deployed it to staging.", nil},
		{"zero failures", "0 failures.", []string{"tests_pass"}},
		{"partial", "Most tests pass now.", nil},
		{"bold items", "1. **Fixed the bug in `calc.go`**: Sum adds.\n2. **Ran the test suite** - all tests pass ✅",
			[]string{"edited_file:calc.go", "ran_tests", "tests_pass"}},
		{"italic", "*Committed* the change.", []string{"committed"}},
		{"runs successfully", "The test suite runs successfully.", []string{"tests_pass"}},
		{"bold heading and a checked test command", "**Testing**\n- ✅ `pytest -q`\n- ⚠️ `mypy` not run", []string{"ran_tests", "tests_pass"}},
		{"bold advice heading", "**Next steps:**\n- Commit the change", nil},
		{"telegraphic PR", "Branch pushed, PR opened.", []string{"pushed", "opened_pr"}},
		{"verified with tests", "Verified with the existing unit tests.", []string{"ran_tests"}},
		{"checked a test file", "I checked the test file for typos.", nil},
		{"PR link in a list", "Done:\n- PR: https://github.com/acme/app/pull/88", []string{"opened_pr"}},
		{"passive test run", "The tests have been run.", []string{"ran_tests"}},
		{"made a new file", "I made new file `utils/date.ts`.", []string{"created_file:utils/date.ts"}},
		{"make with targets", "I've run `make lint test` and both targets succeed.", []string{"ran_tests", "tests_pass"}},
		{"file line in a change report", "Summary of edits:\n* `docs/api.md` — documented the endpoint\n* `api/x.ts` — new handler",
			[]string{"edited_file:docs/api.md", "created_file:api/x.ts"}},
		{"file line outside a change report", "* `docs/api.md` — documents the endpoint", nil},
		{"advice heading", "## Next steps\n- Commit the change\n- Pushed? not yet", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, r := range extractClaims(c.text) {
				k := r.kind
				if r.file != "" {
					k += ":" + r.file
				}
				got = append(got, k)
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("extractClaims(%q) = %v, want %v", c.text, got, c.want)
			}
		})
	}
}

// TestClaimsHugeMessage: a runaway final message is analysed in bounded
// time (its last claimsTextMax bytes) and still yields its closing claim.
func TestClaimsHugeMessage(t *testing.T) {
	huge := strings.Repeat("and then I edited the thing and fixed more and changed it ", 200000) + ". All tests pass."
	ev := NewEvidence()
	ev.SetCheck("go test ./...", true, false, 1)
	claims := ev.Claims(huge)
	if len(claims) == 0 || claims[0].Kind != ClaimTestsPass {
		t.Fatalf("claims = %+v", claims)
	}
}

// TestClaimsTestsPassOverAnEmptyCheck: "all tests pass" is backed by a
// passing check only when that check ran a test; over a check that exited 0
// and tested nothing it is listed, and a later check that ran tests backs
// it again.
func TestClaimsTestsPassOverAnEmptyCheck(t *testing.T) {
	ev := NewEvidence()
	ev.SetCheck("go test ./...", true, true, 0)
	ev.SetTestedNothing()
	c := ev.Claims("All tests pass.")
	if len(c) != 1 || c[0].Kind != ClaimTestsPass || !strings.Contains(c[0].Reason, "exited 0 but ran no test") {
		t.Fatalf("claims over an empty check = %+v", c)
	}
	ev.SetCheck("go test ./...", true, true, 0)
	if c := ev.Claims("All tests pass."); len(c) != 0 {
		t.Errorf("claims over a check that ran tests = %+v", c)
	}
}

// TestClaimReasonsFit: every reason a claim can get fits ClaimTextCap,
// the cap on a claim's reason (the document's too), whole: a reason with no inserted
// text is never cut, and one that quotes a command or a file keeps all of
// its own words, the quoted text shortened to its end ("…" first) instead.
// Every branch of the judge is driven, each with a short and a 400-byte
// command or path.
func TestClaimReasonsFit(t *testing.T) {
	type setup func(ev *Evidence, arg string)
	none := func(*Evidence, string) {}
	receipt := func(r Receipt) setup {
		return func(ev *Evidence, arg string) {
			r := r
			r.Brief = strings.ReplaceAll(r.Brief, "ARG", arg)
			ev.AddReceipt(r)
		}
	}
	cases := []struct {
		name, text, kind string
		setup            setup
		fixed            bool   // the reason quotes nothing
		wantEnd          string // the reason's own last words
	}{
		{"ran tests, no test command", "I ran the tests.", ClaimRanTests, none, true, "cargo test, …)"},
		{"tests pass, check ran no test", "All tests pass.", ClaimTestsPass, func(ev *Evidence, arg string) { ev.SetCheck(arg, true, true, 0); ev.SetTestedNothing() }, false, `" exited 0 but ran no test`},
		{"tests pass, check failed", "All tests pass.", ClaimTestsPass, func(ev *Evidence, arg string) { ev.SetCheck(arg, true, false, 1) }, false, `" failed after the last turn (exit 1)`},
		{"tests pass, nothing ran", "All tests pass.", ClaimTestsPass, none, true, "no receipt shows a test command"},
		{"tests pass, last test unknown", "All tests pass.", ClaimTestsPass, receipt(Receipt{Tool: "run_shell_command", Unknown: true, Brief: "go test ./ARG"}), false, ""},
		{"tests pass, last test failed", "All tests pass.", ClaimTestsPass, receipt(Receipt{Tool: "Bash", Brief: "go test ./ARG"}), false, ""},
		{"edit, no file named, unknown writer", "I fixed the bug.", ClaimEditedFile, receipt(Receipt{Tool: "run_shell_command", Unknown: true, Brief: "sed -i s/a/b/ x.go"}), true, "the workspace diff shows no change"},
		{"edit, no file named, no writer", "I fixed the bug.", ClaimEditedFile, none, true, "the workspace diff shows no change"},
		{"deleted", "I deleted `ARG`.", ClaimDeletedFile, none, false, " and the workspace diff does not show it deleted"},
		{"deleted, unknown remover", "I deleted `ARG`.", ClaimDeletedFile, receipt(Receipt{Tool: "run_shell_command", Unknown: true, Brief: "rm ARG"}), false, "; the call that wrote it has an outcome that could not be checked"},
		{"created", "I created `ARG`.", ClaimCreatedFile, none, false, " and the workspace diff does not show it"},
		{"created, unknown writer", "I created `ARG`.", ClaimCreatedFile, receipt(Receipt{Tool: "run_shell_command", Unknown: true, Brief: "echo ok > ARG"}), false, "; the call that wrote it has an outcome that could not be checked"},
		{"edited", "I edited `ARG`.", ClaimEditedFile, none, false, " and the workspace diff shows no change to it"},
		{"edited, unknown writer", "I edited `ARG`.", ClaimEditedFile, receipt(Receipt{Tool: "run_shell_command", Unknown: true, Brief: "echo ok > ARG"}), false, "; the call that wrote it has an outcome that could not be checked"},
	}
	ops := []struct{ kind, text, brief string }{
		{ClaimCommitted, "I committed the fix.", "git commit -am fix"},
		{ClaimPushed, "I pushed the branch.", "git push origin main"},
		{ClaimOpenedPR, "I opened a pull request.", "gh pr create --fill"},
		{ClaimInstalled, "I installed the dependencies.", "npm install left-pad"},
		{ClaimDeployed, "I deployed the service.", "kubectl apply -f deploy.yaml"},
	}
	for _, op := range ops {
		cases = append(cases,
			struct {
				name, text, kind string
				setup            setup
				fixed            bool
				wantEnd          string
			}{op.kind + ", unknown outcome", op.text, op.kind, receipt(Receipt{Tool: "run_shell_command", Unknown: true, Brief: op.brief}), true, " receipt is known to have succeeded (its outcome could not be checked)"},
			struct {
				name, text, kind string
				setup            setup
				fixed            bool
				wantEnd          string
			}{op.kind + ", failed", op.text, op.kind, receipt(Receipt{Tool: "Bash", Brief: op.brief}), true, " receipt failed and none succeeded"},
			struct {
				name, text, kind string
				setup            setup
				fixed            bool
				wantEnd          string
			}{op.kind + ", none", op.text, op.kind, none, true, " receipt"},
		)
	}
	long := strings.Repeat("deeply/nested/", 19) + "name_of_the_file.go" // 285 bytes: a path claims still take for a file
	for _, c := range cases {
		for _, arg := range []string{"calc.go", long} {
			if c.fixed && arg == long {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d", c.name, len(arg)), func(t *testing.T) {
				ev := NewEvidence()
				c.setup(ev, arg)
				claims := ev.Claims(strings.ReplaceAll(c.text, "ARG", arg))
				if len(claims) != 1 || claims[0].Kind != c.kind {
					t.Fatalf("claims %+v, want one %s", claims, c.kind)
				}
				r := claims[0].Reason
				if len(r) > ClaimTextCap || strings.Contains(r, "[truncated") {
					t.Errorf("reason of %d bytes (cap %d): %q", len(r), ClaimTextCap, r)
				}
				if !strings.HasSuffix(r, c.wantEnd) {
					t.Errorf("reason %q does not end with its own words %q", r, c.wantEnd)
				}
				if arg == long && (!strings.Contains(r, "…") || !strings.Contains(r, long[len(long)-10:]) && !strings.Contains(r, long[:10])) {
					t.Errorf("reason %q keeps neither end of the long text, marked", r)
				}
				if arg != long && !strings.Contains(r, arg) && !c.fixed {
					t.Errorf("reason %q does not quote %q", r, arg)
				}
			})
		}
	}
}
