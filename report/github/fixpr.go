package github

import (
	"bufio"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"

	gh "github.com/google/go-github/v75/github"

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
// or updates the open one from that branch. It acts only when the goal
// passed, the verdict is grounded, the agent did not modify the check's own
// files, and the workspace changed; otherwise it records why in Skipped.
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
	// BaseSHA is the commit the workspace was checked out at (GITHUB_SHA);
	// the fix commit's parent.
	BaseSHA string
	// BaseBranch is the pull request's base branch.
	BaseBranch string
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
	// WorkflowChanges lists changed paths under .github/workflows/ that
	// were left out.
	WorkflowChanges []string
	// Unreadable lists changed paths that were not committed (not regular
	// files, or over FixMaxFileBytes), with the reason.
	Unreadable []string
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
	case doc.Goal == nil || !doc.Goal.Passed:
		p.Skipped = "the goal was not met"
		return nil
	case !doc.Goal.Grounded:
		p.Skipped = "the verdict is not grounded in the check"
		return nil
	case doc.Changes != nil && doc.Changes.CheckModified:
		p.Skipped = "the agent changed the check's own files; a pass is suspect"
		return nil
	case doc.Changes != nil && doc.Changes.FilesChanged == 0:
		p.Skipped = "the workspace did not change"
		return nil
	}
	baseTree, err := p.baseTree(ctx)
	if err != nil {
		return err
	}
	changes, err := p.diff(baseTree)
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		p.Skipped = "the workspace did not change"
		if len(p.WorkflowChanges) > 0 {
			p.Skipped = "only files under .github/workflows/ changed, and those are never pushed"
		}
		return nil
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
	return p.pull(ctx, doc)
}

type tree struct {
	sha     string
	entries map[string]*gh.TreeEntry // path -> entry (blobs, symlinks, submodules)
}

func (p *FixPR) baseTree(ctx context.Context) (*tree, error) {
	var c *gh.Commit
	if err := p.Retry.Do(ctx, func(ctx context.Context) error {
		var err error
		c, _, err = p.Client.Git.GetCommit(ctx, p.Owner, p.Repo, p.BaseSHA)
		return err
	}); err != nil {
		return nil, classify(err, "read the base commit "+p.BaseSHA, "contents: read")
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
	ignore := loadIgnore(root)
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
		if !tracked && ignore.match(name) {
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
		content, err := readRegular(root, name, FixMaxFileBytes)
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
	return kept, nil
}

// readRegular reads name through root, refusing anything but a regular file
// (checked on the opened file, so a swap after the walk is caught) and
// anything over limit bytes.
func readRegular(root *os.Root, name string, limit int64) ([]byte, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("over %d bytes", limit)
	}
	return b, nil
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
	b.WriteString(md(doc))
	return fit(b.String(), PullBodyBytes)
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
		err := p.Retry.Do(ctx, func(ctx context.Context) error {
			var err error
			pr, _, err = p.Client.PullRequests.Edit(ctx, p.Owner, p.Repo, n, &gh.PullRequest{Title: gh.Ptr(p.Title), Body: gh.Ptr(body)})
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
			return classify(err, "open the fix pull request", "pull-requests: write")
		}
		p.Created = true
	}
	p.URL, p.Number = pr.GetHTMLURL(), pr.GetNumber()
	return nil
}

// ignoreRules is a small subset of .gitignore, read from the workspace
// root's .gitignore only: blank lines and comments skipped, "!" negations
// ignored (so more files stay ignored, never fewer), a trailing "/" matches
// directories, a pattern with another "/" is anchored at the root, any other
// pattern matches a path component; "**/" prefixes are dropped. It decides
// only whether a file that the base commit does not track is left out.
type ignoreRules []string

func loadIgnore(root *os.Root) ignoreRules {
	b, err := readRegular(root, ".gitignore", 1<<20)
	if err != nil {
		return nil
	}
	var rules ignoreRules
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") {
			continue
		}
		rules = append(rules, strings.TrimPrefix(line, "**/"))
	}
	return rules
}

func (r ignoreRules) match(name string) bool {
	parts := strings.Split(name, "/")
	for _, pat := range r {
		dirOnly := strings.HasSuffix(pat, "/")
		pat = strings.TrimSuffix(pat, "/")
		if strings.Contains(pat, "/") {
			pat = strings.TrimPrefix(pat, "/")
			// Anchored: match the path or one of its directory prefixes.
			for i := 1; i <= len(parts); i++ {
				if dirOnly && i == len(parts) {
					break
				}
				if ok, _ := path.Match(pat, strings.Join(parts[:i], "/")); ok {
					return true
				}
			}
			continue
		}
		for i, part := range parts {
			if dirOnly && i == len(parts)-1 {
				break
			}
			if ok, _ := path.Match(pat, part); ok {
				return true
			}
		}
	}
	return false
}
