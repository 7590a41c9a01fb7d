package goal

import (
	"context"

	"github.com/goalrun/goalrun/goal/workspace"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/sandbox"
)

// WorkspaceTracker is the loop's Tracker over the workspace: a
// workspace.Tracker whose changes the loop reports as the document's
// "changes" block (ChangesReport).
type WorkspaceTracker struct {
	*workspace.Tracker
}

var (
	_ Tracker         = (*WorkspaceTracker)(nil)
	_ HostCodeTracker = (*WorkspaceTracker)(nil)
)

// NewWorkspaceTracker returns the tracker of the workspace at dir (a host
// path); see workspace.New. Its baseline copies are kept in a folder
// sandbox.MkdirOwned makes (unless opt.MkdirTemp says otherwise), so a
// goalrun killed outright leaves them to sandbox.Reap.
func NewWorkspaceTracker(dir string, opt workspace.Options) *WorkspaceTracker {
	if opt.MkdirTemp == nil {
		opt.MkdirTemp = sandbox.MkdirOwned
	}
	return &WorkspaceTracker{workspace.New(dir, opt)}
}

// Changes returns the run's changes for the document: a fresh snapshot
// compared with the baseline. It returns nil when there is no baseline or
// the workspace cannot be read any more.
func (t *WorkspaceTracker) Changes(ctx context.Context) *report.Changes {
	d, err := t.Diff(ctx)
	if err != nil || d == nil {
		return nil
	}
	return ChangesReport(d)
}

// ChangesReport returns the document's "changes" block of d.
func ChangesReport(d *workspace.Diff) *report.Changes {
	c := &report.Changes{
		FilesChanged: len(d.Files), Insertions: d.Insertions, Deletions: d.Deletions,
		RiskyPaths: make([]string, 0, len(d.Risky)), CheckModified: d.CheckModified, PatchSHA256: d.PatchSHA256,
	}
	for _, f := range d.Files {
		if len(c.Paths) == report.ChangedPathsMax {
			c.PathsOmitted = len(d.Files) - len(c.Paths)
			break
		}
		c.Paths = append(c.Paths, f.Path)
	}
	for _, r := range d.HostCode {
		c.GitExecutable = append(c.GitExecutable, r.Path)
	}
	c.RiskyPaths = append(c.RiskyPaths, c.GitExecutable...)
	if d.Truncated {
		// Past MaxFiles nothing is compared: a changed check file or a
		// planted workflow could hide there, so the report says so first
		// (after git's executable configuration) and a pass is not taken
		// as untouched (check_modified: neutral).
		c.RiskyPaths = append(c.RiskyPaths, IncompleteChanges)
		c.CheckModified = true
	}
	c.CheckModifiedReason = d.CheckModifiedReason
	if c.CheckModified && c.CheckModifiedReason == "" {
		c.CheckModifiedReason = IncompleteChanges
	}
	for _, r := range d.Risky[len(d.HostCode):] {
		c.RiskyPaths = append(c.RiskyPaths, r.Path)
	}
	c.RiskyPathsOmitted = max(d.RiskyTotal-len(d.Risky), 0)
	if d.Root != "" {
		c.RelativeTo = report.RelativeToMount
	}
	return c
}

// IncompleteChanges heads changes.risky_paths when the workspace held more
// files than the tracker compares (workspace.Options.MaxFiles): the report
// then covers only part of the tree, and check_modified is set because the
// rest could hide a changed check file.
const IncompleteChanges = "(too many files: the change report covers only part of the workspace)"
