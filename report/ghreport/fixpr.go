package ghreport

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"

	gh "github.com/google/go-github/v75/github"

	"github.com/goalrun/goalrun/internal/safefile"
	"github.com/goalrun/goalrun/report"
)

// Limits of the fix pull request's commit.
const (
	// FixMaxFileBytes is the largest file committed: 10 MiB (GitHub's Git
	// Data API accepts blobs up to 100 MB; a fix needs far less).
	FixMaxFileBytes = 10 << 20
	// FixMaxFiles is the most changed files committed in one fix.
	FixMaxFiles = 1000
	// PullBodyBytes bounds the pull request body: 65536 (GitHub: 65536
	// characters; capping by bytes is always within it).
	PullBodyBytes = 65536
)

// workflowsDir holds files a GITHUB_TOKEN cannot (and goalrun should not)
// push: changing a workflow needs the "workflows" permission.
const workflowsDir = ".github/workflows/"

// FixPR commits what the agent changed in the workspace to the branch
// Branch and opens a pull request into BaseBranch whose body is the report,
// or updates the open one from that branch. It acts only when the run
// concluded success (the goal passed, grounded, the check tested something),
// the agent did not modify the check's own files nor git's executable
// configuration, and the workspace changed; otherwise it records why in
// Skipped.
//
// It commits without running the host's git in the tree the agent wrote
// (repository config, hooks and filters there could run programs): it
// lists the base commit's tree through the Git Data API, walks the
// workspace through an os.Root (so nothing resolves outside it), reads
// regular files only (symlinks and devices are never followed or read),
// computes each file's Git blob SHA-1 in memory and compares it with the
// base tree. Changed and new files are uploaded as blobs, deleted ones are
// removed, and a tree, a commit whose parent is BaseSHA and a branch ref
// are created (or the ref force-moved: the branch belongs to goalrun).
// Changes under .github/workflows/ are never pushed; they are listed in
// WorkflowChanges and in the pull request body.
type FixPR struct {
	Client      *gh.Client
	Owner, Repo string
	// Workspace is the repository root on disk (GITHUB_WORKSPACE).
	Workspace string
	// BaseSHA is the fix commit's parent, whose tree the change is laid
	// on: the commit the run started from (a pull request's head commit, the
	// dispatched ref's commit).
	BaseSHA string
	// BaseBranch is the fix pull request's base branch: the branch the run
	// started from (a pull request's head branch, the dispatched branch).
	BaseBranch string
	// CheckoutSHA is the commit the workspace held when the run started
	// (its .git/HEAD), when that is not BaseSHA: a pull request's merge
	// checkout, or a head that moved on after the checkout. The agent's
	// version of each path is laid on BaseSHA only when CheckoutSHA's tree
	// and BaseSHA's agree on that path, so the commit carries the agent's
	// change and nothing the two commits differ by; otherwise nothing is
	// pushed and Skipped names the paths. "" or BaseSHA: the workspace held
	// BaseSHA.
	CheckoutSHA string
	// Fixes, when not 0, is the issue the fix is for: the body starts
	// "Fixes #N", so merging it into the default branch closes the issue.
	Fixes int
	// Paths, when not nil, are the agent's changes (the change tracker's
	// paths, relative to Workspace): only they are committed, each as the
	// workspace now holds it, on BaseSHA's tree, so the commit carries the
	// agent's change and nothing the checkout already differed by (a pull
	// request author's own commits). nil commits every difference between
	// the workspace and BaseSHA's tree (a workspace checked out at BaseSHA).
	Paths []ChangedPath
	// Branch is the fix branch, "<prefix>/<slug>".
	Branch string
	// Title is the pull request title and the commit message's first line.
	Title string
	// Retry bounds retries of 5xx answers and rate limits.
	Retry Retry
	// Render renders the document (nil means report.Markdown).
	Render Renderer

	// Results, set by Publish.

	// URL and Number identify the pull request opened or updated.
	URL    string
	Number int
	// Created is true when Publish opened the pull request, false when it
	// updated an existing one.
	Created bool
	// Skipped says why nothing was pushed ("" when something was).
	Skipped string
	// Pushed is true once Branch holds the fix commit (also when the pull
	// request could then not be opened).
	Pushed bool
	// WorkflowChanges lists changed paths under .github/workflows/ that
	// were left out.
	WorkflowChanges []string
	// Unreadable lists changed paths that were not committed (not regular
	// files, or over FixMaxFileBytes), with the reason.
	Unreadable []string
	// Ignored lists the agent's new paths left out because the
	// workspace's .gitignore files (or .git/info/exclude) ignore them, as
	// git would: caches, build outputs, installed packages.
	Ignored []string
}

var _ Publisher = (*FixPR)(nil)

// Slug turns s into a branch-name component: lower case ASCII letters,
// digits and single hyphens, at most 60 bytes, then — when that lost
// anything of s (case, other characters, length) — a hyphen and the first 8
// hex digits of s's SHA-256, so two names never share a slug ("Tests" and
// "tests", two matrix names equal in their first 60 bytes, names in other
// scripts); "fix" stands for an empty result. At most 69 bytes.
func Slug(s string) string {
	out := slugText(s)
	if out == s {
		return out
	}
	sum := sha256.Sum256([]byte(s))
	return out + "-" + hex.EncodeToString(sum[:4])
}

// slugText is Slug without the hash.
func slugText(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 60 {
			break
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		return "fix"
	}
	return out
}

// ChangedPath is one path the agent changed, relative to the workspace
// root, with slashes; Deleted says it no longer exists.
type ChangedPath struct {
	Path    string
	Deleted bool
}

// change is one path to commit: a new blob, or a deletion (content nil).
type change struct {
	path    string
	mode    string
	content []byte
	deleted bool
}

// Publish commits and opens or updates the pull request; see FixPR.
func (p *FixPR) Publish(ctx context.Context, doc report.Document) error {
	switch {
	case doc.Changes != nil && len(doc.Changes.GitExecutable) > 0:
		p.Skipped = "the agent changed git's executable configuration (" + strings.Join(doc.Changes.GitExecutable, ", ") + "); the run failed closed"
		return nil
	case doc.Goal == nil || !doc.Goal.Passed:
		p.Skipped = "the goal was not met"
		return nil
	case !doc.Goal.Grounded:
		p.Skipped = "the verdict is not grounded in the check"
		return nil
	case doc.Changes != nil && doc.Changes.CheckModified:
		p.Skipped = "the agent changed the check's own files; a pass is suspect"
		return nil
	case doc.Conclusion != report.ConclusionSuccess:
		p.Skipped = "the run did not conclude success (" + doc.Conclusion + "): only a verified pass is pushed"
		return nil
	case doc.Changes != nil && doc.Changes.FilesChanged == 0:
		p.Skipped = "the workspace did not change"
		return nil
	}
	baseTree, err := p.baseTree(ctx)
	if err != nil {
		return err
	}
	var changes []change
	if p.Paths != nil {
		changes, err = p.diffPaths(baseTree)
	} else {
		changes, err = p.diff(baseTree)
	}
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		p.Skipped = "the workspace did not change"
		switch {
		case len(p.WorkflowChanges) > 0:
			p.Skipped = "only files under .github/workflows/ changed, and those are never pushed"
		case len(p.Ignored) > 0:
			p.Skipped = fmt.Sprintf("the agent changed only files .gitignore ignores (%d, such as %s), which git would not commit either", len(p.Ignored), p.Ignored[0])
		}
		return nil
	}
	if p.CheckoutSHA != "" && p.CheckoutSHA != p.BaseSHA {
		tested, err := p.treeOf(ctx, p.CheckoutSHA, "the commit the run tested, "+short(p.CheckoutSHA))
		if err != nil {
			return err
		}
		var differ []string
		for _, c := range changes {
			if !sameEntry(tested.entries[c.path], baseTree.entries[c.path]) {
				differ = append(differ, c.path)
			}
		}
		if len(differ) > 0 {
			p.Skipped = fmt.Sprintf("the agent changed %s, which differs between the commit the run tested (%s) and %s's head (%s) where the fix would go: laying the agent's version there would also carry that difference, so nothing was pushed (check out that head itself, e.g. actions/checkout with ref: ${{ github.event.pull_request.head.sha }})",
				listCap(differ, 5), short(p.CheckoutSHA), p.BaseBranch, short(p.BaseSHA))
			return nil
		}
	}
	if len(changes) > FixMaxFiles {
		return fmt.Errorf("could not open the fix pull request: %d files changed, more than %d", len(changes), FixMaxFiles)
	}
	commit, err := p.commit(ctx, baseTree.sha, changes)
	if err != nil {
		return err
	}
	if err := p.moveBranch(ctx, commit); err != nil {
		return err
	}
	p.Pushed = true
	return p.pull(ctx, doc)
}

type tree struct {
	sha     string
	entries map[string]*gh.TreeEntry // path -> entry (blobs, symlinks, submodules)
}

func (p *FixPR) baseTree(ctx context.Context) (*tree, error) {
	return p.treeOf(ctx, p.BaseSHA, "the base commit "+p.BaseSHA)
}

// treeOf lists commit sha's tree (what names it in errors).
func (p *FixPR) treeOf(ctx context.Context, sha, what string) (*tree, error) {
	var c *gh.Commit
	if err := p.Retry.Do(ctx, func(ctx context.Context) error {
		var err error
		c, _, err = p.Client.Git.GetCommit(ctx, p.Owner, p.Repo, sha)
		return err
	}); err != nil {
		return nil, classify(err, "read "+what, "contents: read")
	}
	var t *gh.Tree
	if err := p.Retry.Do(ctx, func(ctx context.Context) error {
		var err error
		t, _, err = p.Client.Git.GetTree(ctx, p.Owner, p.Repo, c.GetTree().GetSHA(), true)
		return err
	}); err != nil {
		return nil, classify(err, "read the base tree", "contents: read")
	}
	if t.GetTruncated() {
		return nil, errors.New("could not open the fix pull request: the repository's tree is too large for one Git Data API listing")
	}
	out := &tree{sha: c.GetTree().GetSHA(), entries: map[string]*gh.TreeEntry{}}
	for _, e := range t.Entries {
		if e.GetType() != "tree" {
			out.entries[e.GetPath()] = e
		}
	}
	return out, nil
}

// sameEntry says two trees hold the same thing at a path (both nothing, or
// the same object with the same mode).
func sameEntry(a, b *gh.TreeEntry) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.GetSHA() == b.GetSHA() && a.GetMode() == b.GetMode()
}

// short is the first 12 hex digits of a commit.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// listCap joins the first n items with commas and counts the rest.
func listCap(items []string, n int) string {
	s := strings.Join(firstN(items, n), ", ")
	if len(items) > n {
		s += fmt.Sprintf(" and %d more", len(items)-n)
	}
	return s
}

// BlobSHA returns Git's object name for a blob with content b.
func BlobSHA(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// diff walks the workspace through an os.Root and compares it with base.
func (p *FixPR) diff(base *tree) ([]change, error) {
	root, err := os.OpenRoot(p.Workspace)
	if err != nil {
		return nil, fmt.Errorf("could not open the workspace %s: %w", p.Workspace, err)
	}
	defer root.Close()
	ignore := newIgnorer(root)
	seen := map[string]bool{}
	var changes []change
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		if d.IsDir() {
			if name == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		seen[name] = true
		old, tracked := base.entries[name]
		if !tracked && ignore.ignored(name) {
			return nil
		}
		if !d.Type().IsRegular() {
			// Never followed or read. A tracked symlink stays as it was.
			if tracked && old.GetMode() == "120000" && d.Type()&fs.ModeSymlink != 0 {
				return nil
			}
			p.Unreadable = append(p.Unreadable, name+" (not a regular file)")
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > FixMaxFileBytes {
			p.Unreadable = append(p.Unreadable, fmt.Sprintf("%s (%d bytes, over %d)", name, info.Size(), FixMaxFileBytes))
			return nil
		}
		content, err := safefile.Read(root, name, FixMaxFileBytes)
		if err != nil {
			p.Unreadable = append(p.Unreadable, name+" ("+err.Error()+")")
			return nil
		}
		mode := "100644"
		if info.Mode().Perm()&0o111 != 0 {
			mode = "100755"
		}
		if tracked && old.GetSHA() == BlobSHA(content) && old.GetMode() == mode {
			return nil
		}
		changes = append(changes, change{path: name, mode: mode, content: content})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("could not walk the workspace %s: %w", p.Workspace, err)
	}
	for name, e := range base.entries {
		if !seen[name] && e.GetType() == "blob" {
			changes = append(changes, change{path: name, mode: e.GetMode(), deleted: true})
		}
	}
	return p.setAsideWorkflows(changes), nil
}

// setAsideWorkflows returns changes without those under workflowsDir, which
// it records in p.WorkflowChanges (sorted), sorted by path.
func (p *FixPR) setAsideWorkflows(changes []change) []change {
	kept := changes[:0]
	for _, c := range changes {
		if strings.HasPrefix(c.path, workflowsDir) {
			p.WorkflowChanges = append(p.WorkflowChanges, c.path)
			continue
		}
		kept = append(kept, c)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].path < kept[j].path })
	sort.Strings(p.WorkflowChanges)
	return kept
}

// diffPaths compares only the agent's changed paths (Paths) with base,
// reading them through an os.Root as diff does.
func (p *FixPR) diffPaths(base *tree) ([]change, error) {
	root, err := os.OpenRoot(p.Workspace)
	if err != nil {
		return nil, fmt.Errorf("could not open the workspace %s: %w", p.Workspace, err)
	}
	defer root.Close()
	ignore := newIgnorer(root)
	var changes []change
	for _, cp := range p.Paths {
		name := path.Clean(cp.Path)
		if name == "." || strings.HasPrefix(name, "../") || name == ".." || path.IsAbs(name) || name == ".git" || strings.HasPrefix(name, ".git/") {
			continue // never git's own files, never outside the workspace
		}
		old, tracked := base.entries[name]
		if !tracked && !cp.Deleted && ignore.ignored(name) {
			// A build output, a cache, installed packages: what git
			// would not commit either.
			p.Ignored = append(p.Ignored, name)
			continue
		}
		fi, err := root.Lstat(name)
		if cp.Deleted || errors.Is(err, fs.ErrNotExist) {
			if tracked && old.GetType() == "blob" {
				changes = append(changes, change{path: name, mode: old.GetMode(), deleted: true})
			}
			continue
		}
		if err != nil {
			p.Unreadable = append(p.Unreadable, name+" ("+err.Error()+")")
			continue
		}
		if !fi.Mode().IsRegular() {
			p.Unreadable = append(p.Unreadable, name+" (not a regular file)")
			continue
		}
		content, err := safefile.Read(root, name, FixMaxFileBytes)
		if err != nil {
			p.Unreadable = append(p.Unreadable, name+" ("+err.Error()+")")
			continue
		}
		mode := "100644"
		if fi.Mode().Perm()&0o111 != 0 {
			mode = "100755"
		}
		if tracked && old.GetSHA() == BlobSHA(content) && old.GetMode() == mode {
			continue
		}
		changes = append(changes, change{path: name, mode: mode, content: content})
	}
	sort.Strings(p.Ignored)
	return p.setAsideWorkflows(changes), nil
}

func (p *FixPR) commit(ctx context.Context, baseTree string, changes []change) (string, error) {
	var entries []*gh.TreeEntry
	for _, c := range changes {
		if c.deleted {
			// SHA and Content nil: go-github sends {"sha": null}, which deletes.
			entries = append(entries, &gh.TreeEntry{Path: gh.Ptr(c.path), Mode: gh.Ptr(c.mode), Type: gh.Ptr("blob")})
			continue
		}
		var blob *gh.Blob
		err := p.Retry.Do(ctx, func(ctx context.Context) error {
			var err error
			blob, _, err = p.Client.Git.CreateBlob(ctx, p.Owner, p.Repo, gh.Blob{
				Content:  gh.Ptr(base64.StdEncoding.EncodeToString(c.content)),
				Encoding: gh.Ptr("base64"),
			})
			return err
		})
		if err != nil {
			return "", classify(err, "upload "+c.path, "contents: write")
		}
		entries = append(entries, &gh.TreeEntry{Path: gh.Ptr(c.path), Mode: gh.Ptr(c.mode), Type: gh.Ptr("blob"), SHA: blob.SHA})
	}
	var t *gh.Tree
	if err := p.Retry.Do(ctx, func(ctx context.Context) error {
		var err error
		t, _, err = p.Client.Git.CreateTree(ctx, p.Owner, p.Repo, baseTree, entries)
		return err
	}); err != nil {
		return "", classify(err, "create the fix tree", "contents: write")
	}
	msg := p.Title + "\n\nCommitted by goalrun: the check passed in the sandbox (grounded).\n"
	var c *gh.Commit
	if err := p.Retry.Do(ctx, func(ctx context.Context) error {
		var err error
		c, _, err = p.Client.Git.CreateCommit(ctx, p.Owner, p.Repo, gh.Commit{
			Message: gh.Ptr(msg),
			Tree:    &gh.Tree{SHA: t.SHA},
			Parents: []*gh.Commit{{SHA: gh.Ptr(p.BaseSHA)}},
		}, nil)
		return err
	}); err != nil {
		return "", classify(err, "create the fix commit", "contents: write")
	}
	return c.GetSHA(), nil
}

func (p *FixPR) moveBranch(ctx context.Context, sha string) error {
	ref := "refs/heads/" + p.Branch
	var exists bool
	err := p.Retry.Do(ctx, func(ctx context.Context) error {
		_, _, err := p.Client.Git.GetRef(ctx, p.Owner, p.Repo, ref)
		var er *gh.ErrorResponse
		if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotFound {
			return nil
		}
		exists = err == nil
		return err
	})
	if err != nil {
		return classify(err, "read the branch "+p.Branch, "contents: write")
	}
	if exists {
		err = p.Retry.Do(ctx, func(ctx context.Context) error {
			_, _, err := p.Client.Git.UpdateRef(ctx, p.Owner, p.Repo, ref, gh.UpdateRef{SHA: sha, Force: gh.Ptr(true)})
			return err
		})
		return classify(err, "update the branch "+p.Branch, "contents: write")
	}
	err = p.Retry.Do(ctx, func(ctx context.Context) error {
		_, _, err := p.Client.Git.CreateRef(ctx, p.Owner, p.Repo, gh.CreateRef{Ref: ref, SHA: sha})
		return err
	})
	return classify(err, "create the branch "+p.Branch, "contents: write")
}

func (p *FixPR) body(doc report.Document) string {
	md := report.Markdown
	if p.Render != nil {
		md = p.Render
	}
	var b strings.Builder
	if p.Fixes != 0 {
		fmt.Fprintf(&b, "Fixes #%d.\n\n", p.Fixes)
	}
	b.WriteString("goalrun ran the agent until the check passed in its sandbox; this pull request carries the agent's changes. Review them like any other contribution.\n\n")
	// The paths are the agent's choice: escaped like every other agent
	// text (report.MarkdownText), never put raw into code spans or the quote.
	if len(p.WorkflowChanges) > 0 {
		b.WriteString("> [!WARNING]\n> The agent also changed workflow files, which goalrun never pushes (a `GITHUB_TOKEN` cannot, and should not): ")
		b.WriteString(mdList(p.WorkflowChanges))
		b.WriteString(".\n\n")
	}
	if len(p.Unreadable) > 0 {
		b.WriteString("> [!NOTE]\n> Not committed: " + mdList(p.Unreadable) + ".\n\n")
	}
	if len(p.Ignored) > 0 {
		b.WriteString(fmt.Sprintf("> [!NOTE]\n> Not committed, as git would not: %d new path(s) the repository's .gitignore ignores: ", len(p.Ignored)))
		b.WriteString(mdList(firstN(p.Ignored, ignoredListed)))
		if len(p.Ignored) > ignoredListed {
			b.WriteString(fmt.Sprintf(" and %d more", len(p.Ignored)-ignoredListed))
		}
		b.WriteString(".\n\n")
	}
	b.WriteString(md(doc))
	return fit(b.String(), PullBodyBytes)
}

// ignoredListed bounds the ignored paths named in the pull request body.
const ignoredListed = 20

func firstN(items []string, n int) []string {
	if len(items) > n {
		return items[:n]
	}
	return items
}

// mdList joins escaped items with commas.
func mdList(items []string) string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = report.MarkdownText(it)
	}
	return strings.Join(out, ", ")
}

func (p *FixPR) pull(ctx context.Context, doc report.Document) error {
	body := p.body(doc)
	var open []*gh.PullRequest
	if err := p.Retry.Do(ctx, func(ctx context.Context) error {
		var err error
		open, _, err = p.Client.PullRequests.List(ctx, p.Owner, p.Repo, &gh.PullRequestListOptions{
			State: "open", Head: p.Owner + ":" + p.Branch, ListOptions: gh.ListOptions{PerPage: 10},
		})
		return err
	}); err != nil {
		return classify(err, "list pull requests", "pull-requests: write")
	}
	var pr *gh.PullRequest
	if len(open) > 0 {
		n := open[0].GetNumber()
		edit := &gh.PullRequest{Title: gh.Ptr(p.Title), Body: gh.Ptr(body)}
		if open[0].GetBase().GetRef() != p.BaseBranch {
			edit.Base = &gh.PullRequestBranch{Ref: gh.Ptr(p.BaseBranch)}
		}
		err := p.Retry.Do(ctx, func(ctx context.Context) error {
			var err error
			pr, _, err = p.Client.PullRequests.Edit(ctx, p.Owner, p.Repo, n, edit)
			return err
		})
		if err != nil {
			return classify(err, "update the fix pull request", "pull-requests: write")
		}
	} else {
		err := p.Retry.Do(ctx, func(ctx context.Context) error {
			var err error
			pr, _, err = p.Client.PullRequests.Create(ctx, p.Owner, p.Repo, &gh.NewPullRequest{
				Title: gh.Ptr(p.Title), Head: gh.Ptr(p.Branch), Base: gh.Ptr(p.BaseBranch), Body: gh.Ptr(body),
			})
			return err
		})
		if err != nil {
			if forbiddenSaying(err, actionsMayNotCreatePulls) {
				return &PullsNotAllowedError{Branch: p.Branch, Base: p.BaseBranch, Err: err}
			}
			return classify(err, "open the fix pull request", "pull-requests: write")
		}
		p.Created = true
	}
	p.URL, p.Number = pr.GetHTMLURL(), pr.GetNumber()
	return nil
}

// actionsMayNotCreatePulls is in GitHub's 403 message when the setting
// "Allow GitHub Actions to create and approve pull requests" is off for the
// repository or its organisation (new repositories have it off): a
// GITHUB_TOKEN then cannot open a pull request, whatever its
// pull-requests permission
// (https://docs.github.com/en/repositories/managing-your-repositorys-settings-and-features/enabling-features-for-your-repository/managing-github-actions-settings-for-a-repository#preventing-github-actions-from-creating-or-approving-pull-requests).
const actionsMayNotCreatePulls = "not permitted to create or approve pull requests"

// PullsNotAllowedError is the fix pull request refused because the
// repository does not let GitHub Actions' token create pull requests; the
// fix is on Branch all the same.
type PullsNotAllowedError struct {
	Branch, Base string
	Err          error
}

func (e *PullsNotAllowedError) Error() string {
	return fmt.Sprintf("could not open the fix pull request from %s into %s: this repository does not let GitHub Actions create pull requests (%s). "+
		"Turn on \"Allow GitHub Actions to create and approve pull requests\" (Settings → Actions → General → Workflow permissions; an organisation's own setting can forbid it), "+
		"or give github-token a GitHub App's installation token or a personal token with pull-requests: write. The fix is on the branch %s: open the pull request from it by hand",
		e.Branch, e.Base, APIErrorText(e.Err), e.Branch)
}

func (e *PullsNotAllowedError) Unwrap() error { return e.Err }

// forbiddenSaying says err is GitHub's 403 (not a rate limit) whose
// message holds text.
func forbiddenSaying(err error, text string) bool {
	var er *gh.ErrorResponse
	return errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusForbidden &&
		!rateLimited(er.Response) && strings.Contains(er.Message, text)
}
