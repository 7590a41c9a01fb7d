package sandbox

import "context"

// RunOnKeptView runs cmd as a check-like step on a fresh view whose plain
// volume is kept, then shows what the step wrote below the tree in every
// later view — what the setup step does with its outputs (for tests of the
// view's layers).
func (d *Docker) RunOnKeptView(ctx context.Context, cmd Cmd) (Result, error) {
	view, err := d.openView(ctx, true)
	if err != nil {
		return Result{}, err
	}
	d.mu.Lock()
	d.stepSeq++
	seq := d.stepSeq
	d.mu.Unlock()
	res, err := d.runOnView(ctx, cmd, d.root, seq, view)
	if err == nil {
		d.setViewLayer(view.layer())
	}
	return res, err
}

// ViewsPrepared is how many views' folders the run has prepared so far
// (in the Engine's volumes or on the host).
func (d *Docker) ViewsPrepared() int {
	d.views.mu.Lock()
	defer d.views.mu.Unlock()
	return d.views.next
}
