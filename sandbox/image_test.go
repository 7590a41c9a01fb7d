package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/errdefs"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// cancelDuringImport is the Engine client with the image upload
// interrupted at the wire: the caller's context is cancelled once `after`
// bytes of the root filesystem went out (SIGINT during the first run's
// image build); after < 0 cancels when the whole stream was read.
type cancelDuringImport struct {
	sandbox.DockerAPI
	after  int64
	cancel context.CancelFunc
	sent   int64
}

func (c *cancelDuringImport) ImageImport(ctx context.Context, src image.ImportSource, ref string, opts image.ImportOptions) (io.ReadCloser, error) {
	src.Source = &cancellingReader{r: src.Source, c: c}
	return c.DockerAPI.ImageImport(ctx, src, ref, opts)
}

type cancellingReader struct {
	r io.Reader
	c *cancelDuringImport
}

func (r *cancellingReader) Read(p []byte) (int, error) {
	if r.c.after >= 0 && r.c.sent >= r.c.after {
		r.c.cancel()
	}
	n, err := r.r.Read(p)
	r.c.sent += int64(n)
	if err == io.EOF && r.c.after < 0 {
		r.c.cancel()
	}
	return n, err
}

// TestBuildImageInterruptedLeavesNoLayer: BuildImage cancelled at any point
// of the upload returns an error wrapping context.Canceled and leaves no
// dangling (untagged) image on the Engine; at most the complete, tagged
// image exists (when the upload had ended), which a later run reuses.
func TestBuildImageInterruptedLeavesNoLayer(t *testing.T) {
	cli := dockertest.Client(t)
	dangling := func() []string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		imgs, err := cli.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("dangling", "true"))})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, i := range imgs {
			ids = append(ids, i.ID)
		}
		return ids
	}
	for _, tc := range []struct {
		name  string
		after int64
	}{
		{"before the first byte", 0},
		{"after 256 KiB", 256 << 10},
		{"after the last byte", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nonce := filepath.Join(t.TempDir(), "nonce")
			if err := os.WriteFile(nonce, []byte(fmt.Sprintf("%s %d", t.Name(), time.Now().UnixNano())), 0o644); err != nil {
				t.Fatal(err)
			}
			spec := sandbox.ImageSpec{Name: "goalrun-test-import", Files: map[string]string{"/etc/goalrun-test-nonce": nonce}}
			before := dangling()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			wire := &cancelDuringImport{DockerAPI: cli, after: tc.after, cancel: cancel}
			ref, err := sandbox.BuildImage(ctx, wire, spec)
			if err == nil {
				t.Fatalf("BuildImage = %q, nil after a cancellation", ref)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("BuildImage error %v does not wrap context.Canceled", err)
			}
			if wire.sent == 0 && tc.after != 0 {
				t.Errorf("nothing was uploaded: the test did not exercise the import")
			}
			// The same spec again, uninterrupted: it must import (or reuse
			// what an import that got the whole stream tagged) and work.
			ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel2()
			ref, err = sandbox.BuildImage(ctx2, cli, spec)
			if err != nil {
				t.Fatalf("BuildImage after the interrupted one: %v", err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if _, err := cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true}); err != nil && !errdefs.IsNotFound(err) {
					t.Errorf("removing %s: %v", ref, err)
				}
			})
			ins, err := cli.ImageInspect(ctx2, ref)
			if err != nil {
				t.Fatal(err)
			}
			if ins.Config == nil || ins.Config.WorkingDir != sandbox.DockerRoot || !slices.Contains(ins.Config.Env, "PATH="+sandbox.ImagePath) ||
				!slices.Equal(ins.Config.Cmd, []string{"sh"}) || ins.Config.Labels["goalrun.image"] == "" {
				t.Errorf("image config %+v, want WORKDIR %s, PATH %s, CMD sh and the goalrun.image label", ins.Config, sandbox.DockerRoot, sandbox.ImagePath)
			}
			// An import that got the whole stream may complete on the
			// Engine after the second one tagged the image: the tidying
			// every run's start-up does (RemoveStaleImports, beside the
			// reap of dead runs) removes that leftover.
			defer sandbox.SetStaleImportAge(0)()
			if _, err := sandbox.BuildImage(ctx2, cli, spec); err != nil {
				t.Fatalf("BuildImage reusing the image: %v", err)
			}
			sandbox.RemoveStaleImports(ctx2, cli)
			for _, id := range dangling() {
				if slices.Contains(before, id) {
					continue
				}
				if ins, err := cli.ImageInspect(ctx2, id); err == nil && ins.Config != nil && ins.Config.Labels["goalrun.image"] != "" {
					t.Errorf("a dangling goalrun image %s is left after the interrupted BuildImage", id)
				}
			}
		})
	}
}
