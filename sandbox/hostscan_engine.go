package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
)

// HostScanCommand is goalrun's hidden subcommand that looks through the
// host folders from inside a container of the Engine (RunHostScan), when
// goalrun cannot see them itself.
const HostScanCommand = "__hostscan"

// Inside the scan container: goalrun's executable and the request.
const (
	scanDir     = "/goalrun-scan"
	scanBin     = scanDir + "/goalrun"
	scanRequest = scanDir + "/request.json"
	// scanTimeout bounds the scan container's run (a cold walk of a
	// runner's /usr and /opt takes seconds, docs/benchmarks.md).
	scanTimeout = 5 * time.Minute
	// scanOutputMax bounds what is read of its output.
	scanOutputMax = 64 << 20
)

// hostScanRequest is what the scan container is asked: the policy (its
// paths as the Engine's host names them) and the candidates that exist.
type hostScanRequest struct {
	Above      []string          `json:"above"`
	Tree       []string          `json:"tree"`
	Allow      []string          `json:"allow"`
	Reasons    map[string]string `json:"reasons"`
	Candidates []string          `json:"candidates"`
}

// RunHostScan is HostScanCommand: it reads the request at args[0] (JSON),
// scans and plans the host folders (scanAndPlan) in this container, where
// they are mounted at their own paths, and writes the plan to stdout as
// JSON.
func RunHostScan(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("%s: want the request file", HostScanCommand)
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	var req hostScanRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return fmt.Errorf("%s: %w", HostScanCommand, err)
	}
	// The paths are the host's; the same paths here also get the spelling
	// their symbolic links resolve to in the host folders mounted here.
	p := mountPolicy{reasons: map[string]string{}}
	for _, a := range req.Above {
		p.addAbove(a, req.Reasons[a])
	}
	for _, t := range req.Tree {
		p.addTree(t, req.Reasons[t])
	}
	for _, a := range req.Allow {
		p.addAllow(a)
	}
	return json.NewEncoder(stdout).Encode(scanAndPlan(p, req.Candidates, nil))
}

// hostScanAPI is what the scan through the Engine asks of it: a container
// that gets the scanner copied in, runs it and is removed.
type hostScanAPI interface {
	containerEngine
	EngineArchive
}

// scanThroughEngine runs RunHostScan in a short container of image with
// the candidates mounted read-only at their own paths, as root with only
// CAP_DAC_READ_SEARCH (it lists and reads every folder, as the scan must
// find what a sandbox user could reach), no network, and bin (a statically
// linked goalrun) copied in; it returns the plan it writes.
func scanThroughEngine(ctx context.Context, cli hostScanAPI, image, bin string, p mountPolicy, candidates []string) (hostPlan, error) {
	fail := func(err error) (hostPlan, error) {
		return hostPlan{}, fmt.Errorf("sandbox: host tools: looking through the host folders from a container of the Engine at %s: %w", cli.DaemonHost(), err)
	}
	req, err := json.Marshal(hostScanRequest{Above: p.above, Tree: p.tree, Allow: p.allow, Reasons: p.reasons, Candidates: candidates})
	if err != nil {
		return fail(err)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return fail(err)
	}
	var mounts []mount.Mount
	for _, c := range candidates {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: c, Target: c, ReadOnly: true})
	}
	host := os.Getenv("HOSTNAME")
	if host == "" {
		host, _ = os.Hostname()
	}
	labels := map[string]string{
		LabelRun: "host-tools-scan", LabelRole: "probe", LabelOwner: ownerLabel(ownerHost(host)),
		LabelExpires: strconv.FormatInt(time.Now().Add(scanTimeout+expiryGrace).Unix(), 10),
	}
	ctx, cancel := context.WithTimeout(ctx, scanTimeout)
	defer cancel()
	resp, err := cli.ContainerCreate(ctx, &container.Config{
		Image: image, Entrypoint: []string{}, Cmd: []string{scanBin, HostScanCommand, scanRequest},
		User: "0:0", Env: []string{"PATH=/nonexistent"}, Labels: labels, NetworkDisabled: true,
	}, &container.HostConfig{
		NetworkMode: network.NetworkNone,
		CapDrop:     []string{"ALL"},
		CapAdd:      []string{"CAP_DAC_READ_SEARCH"},
		SecurityOpt: []string{"no-new-privileges"},
		Mounts:      mounts,
	}, nil, nil, "")
	if err != nil {
		return fail(err)
	}
	defer func() {
		cctx, cancel := bg(ctx)
		defer cancel()
		_ = cli.ContainerRemove(cctx, resp.ID, container.RemoveOptions{Force: true})
	}()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	files := []struct {
		name string
		mode int64
		body []byte
	}{{strings.TrimPrefix(scanBin, "/"), 0o555, exe}, {strings.TrimPrefix(scanRequest, "/"), 0o444, req}}
	_ = tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(scanDir, "/") + "/", Typeflag: tar.TypeDir, Mode: 0o555})
	for _, f := range files {
		_ = tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: f.mode, Size: int64(len(f.body))})
		_, _ = tw.Write(f.body)
	}
	if err := tw.Close(); err != nil {
		return fail(err)
	}
	if err := cli.CopyToContainer(ctx, resp.ID, "/", &tb, container.CopyToContainerOptions{}); err != nil {
		return fail(err)
	}
	hj, err := cli.ContainerAttach(ctx, resp.ID, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return fail(err)
	}
	defer hj.Close()
	stop := context.AfterFunc(ctx, hj.Close)
	defer stop()
	waitC, errC := cli.ContainerWait(ctx, resp.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return fail(err)
	}
	var out, errOut bytes.Buffer
	_, _ = stdcopy.StdCopy(&limitWriter{w: &out, n: scanOutputMax}, &limitWriter{w: &errOut, n: 4096}, hj.Reader)
	select {
	case w := <-waitC:
		if w.StatusCode != 0 {
			return fail(fmt.Errorf("the scan exited %d: %s", w.StatusCode, strings.TrimSpace(errOut.String())))
		}
	case err := <-errC:
		return fail(err)
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	var plan hostPlan
	if err := json.Unmarshal(out.Bytes(), &plan); err != nil {
		return fail(fmt.Errorf("reading the scan's answer: %w (stderr: %s)", err, strings.TrimSpace(errOut.String())))
	}
	return plan, nil
}

// limitWriter keeps the first n bytes written and drops the rest.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(b []byte) (int, error) {
	if l.n > 0 {
		k := min(len(b), l.n)
		l.n -= k
		if _, err := l.w.Write(b[:k]); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}
