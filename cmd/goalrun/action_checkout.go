package main

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/goalrun/goalrun/goal/workspace"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/ghreport"
)

// tested is the commit the workspace holds, read from its git metadata
// before the agent runs (ghreport.ReadCheckout: git never runs in the tree),
// and what follows from it for the check run.
type tested struct {
	// sha is the commit; "" when it cannot be told (why says so).
	sha string
	// branch is the branch HEAD is on ("" when detached or unknown).
	branch string
	// assumed is true when the workspace has no .git and sha is
	// GITHUB_SHA, what actions/checkout checks out by default.
	assumed bool
	// why says why sha is unknown; warned that it was already warned about.
	why    string
	warned bool
	// merge is true when sha is GitHub's merge commit of the pull request
	// into its base (pull_request's default checkout).
	merge bool
}

// short is the first 12 hex digits of a commit.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// readTested reads which commit the workspace holds; called before the
// agent runs (in the local sandbox it could rewrite .git).
func (a *action) readTested() {
	co, err := ghreport.ReadCheckout(a.workspaceRoot())
	switch {
	case errors.Is(err, ghreport.ErrNoGit) && a.ev.SHA == "":
		a.tested = tested{why: "the workspace has no .git and GITHUB_SHA is unset"}
	case errors.Is(err, ghreport.ErrNoGit):
		a.tested = tested{sha: a.ev.SHA, assumed: true}
		if a.ev.SHA != "" {
			a.gha.Noticef("the workspace %s has no .git, so goalrun cannot read which commit it holds; it takes GITHUB_SHA %s, what actions/checkout checks out by default", a.workspaceRoot(), short(a.ev.SHA))
		}
	case err != nil:
		a.tested = tested{why: fmt.Sprintf("goalrun could not read which commit the workspace holds: %v", err), warned: true}
		a.warn("%s; no check run is made, so none claims a commit was tested", a.tested.why)
	default:
		a.tested = tested{sha: co.SHA, branch: co.Branch}
	}
	if a.ev.SHA != "" && a.tested.sha == a.ev.SHA {
		switch a.ev.Name {
		case ghreport.EventPullRequest, ghreport.EventPullRequestReview, ghreport.EventPullRequestReviewComment:
			// GITHUB_SHA is GitHub's merge commit of the pull request into
			// its base on these events.
			a.tested.merge = a.ev.HeadSHA != "" && a.ev.HeadSHA != a.ev.SHA
		}
	}
}

// placeCheck decides the commit the check run goes on (a.checkSHA), so a
// check never says a commit was tested that was not:
//   - on a pull request (or a comment or review on one), its head commit,
//     when the workspace holds that commit or, on pull_request events,
//     GitHub's merge of it into the base (what GitHub's own workflow checks
//     report on the head too); any other checkout — pull_request_target's
//     base branch, a head that moved on after the checkout — gets no check
//     run and a warning saying what to check out;
//   - on a /goalrun comment on a plain issue, none: the commit is the
//     default branch's tip, which the issue is not about;
//   - otherwise the commit the workspace holds.
func (a *action) placeCheck() {
	ev, t := a.ev, a.tested
	a.checkSHA = ""
	switch {
	case a.client == nil:
		// No check run at all (no token, or a fork's read-only one).
	case ev.IsPullRequest && ev.HeadSHA == "":
		a.noCheck = cmp.Or(a.headProblem, fmt.Sprintf("the head commit of pull request #%d is not known", ev.Number))
		a.warn("no commit to attach the check run to (%s); the job summary carries the report", a.noCheck)
	case t.sha == "":
		a.noCheck = t.why
		if !t.warned {
			a.warn("no commit to attach the check run to (%s); the job summary carries the report", t.why)
		}
	case ev.Comment != nil && !ev.IsPullRequest:
		a.noCheck = fmt.Sprintf("a /goalrun comment on issue #%d has no commit of its own to check (the workspace is %s, the default branch's tip), so no check run is made; the reply carries the report", ev.Number, short(t.sha))
		a.gha.Noticef("%s", a.noCheck)
		a.notices = append(a.notices, a.noCheck)
	case ev.IsPullRequest && (t.sha == ev.HeadSHA || t.merge):
		a.checkSHA = ev.HeadSHA
	case ev.IsPullRequest:
		hint := "check out the pull request's head commit"
		switch {
		case ev.Name == ghreport.EventPullRequestTarget:
			hint = "pull_request_target checks out the base branch by default: give actions/checkout ref: ${{ github.event.pull_request.head.sha }}"
		case ev.Comment != nil:
			hint = fmt.Sprintf("check out refs/pull/%d/head; if it was, the head moved on after the checkout", ev.Number)
		}
		a.noCheck = fmt.Sprintf("the workspace holds commit %s, not pull request #%d's head %s (%s): goalrun makes no check run, so no check says %s was tested; the report is in the comment and the job summary",
			short(t.sha), ev.Number, short(ev.HeadSHA), hint, short(ev.HeadSHA))
		a.warn("%s", a.noCheck)
	default:
		a.checkSHA = t.sha
	}
}

// changeNotOnCommit says, for the check run, that the goal was met only
// with the agent's change, so the checked commit's own code failed the
// check ("" otherwise): an agent turn ran and left changes git would
// commit (a new path the repository's .gitignore ignores is not one).
// That change is in a workspace the runner discards, or in a fix pull
// request; either way it is not on the commit the check run is on.
func (a *action) changeNotOnCommit(doc report.Document) string {
	g := doc.Goal
	if g == nil || !g.Passed || g.Iterations == 0 {
		return ""
	}
	n := a.committableChanges(doc)
	if n == 0 {
		return ""
	}
	files := "1 file"
	if n != 1 {
		files = fmt.Sprintf("%d files", n)
	}
	return "goal met only with the agent's change to " + files + ", which this commit does not hold"
}

// committableChanges counts the agent's changed paths git would commit:
// every modified or deleted path, and each new one the workspace's ignore
// files do not ignore. Without the detailed changes it is the document's
// files_changed.
func (a *action) committableChanges(doc report.Document) int {
	if a.diff == nil {
		if doc.Changes == nil {
			return 0
		}
		return doc.Changes.FilesChanged
	}
	paths, err := a.changedPaths()
	if err != nil {
		return len(a.diff.Files)
	}
	var added []string
	for i, f := range a.diff.Files {
		if f.Status == workspace.StatusAdded {
			added = append(added, paths[i].Path)
		}
	}
	ignored, err := ghreport.IgnoredPaths(a.workspaceRoot(), added)
	if err != nil {
		return len(paths)
	}
	return len(paths) - len(ignored)
}
