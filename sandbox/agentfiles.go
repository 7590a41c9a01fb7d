package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
)

// checkAgentFiles validates Config.AgentFiles: each path absolute and
// clean, its folder at least two levels deep (never a system folder such
// as /etc itself), clear of what the sandbox provides (the workspace, /tmp,
// /run, HOME, the relay's folder), the content within AgentFileMax, no path
// given twice, and a local path that stays inside its folder.
func checkAgentFiles(files []AgentFile, home string) error {
	seen := map[string]bool{}
	for i, f := range files {
		what := fmt.Sprintf("sandbox: agent file %d (%s)", i+1, f.Path)
		dir := path.Dir(f.Path)
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || strings.Count(dir, "/") < 2 {
			return fmt.Errorf("%s: the path must be clean, absolute and in a folder of its own at least two levels deep (like /etc/gemini-cli/settings.json)", what)
		}
		for _, own := range []string{DockerRoot, "/tmp", "/run", relayDir, home} {
			if own != "" && (dir == own || isUnder(dir, own) || isUnder(own, dir)) {
				return fmt.Errorf("%s: its folder would cover or lie in %s, which the sandbox itself provides", what, own)
			}
		}
		if len(f.Content) > AgentFileMax {
			return fmt.Errorf("%s: %d bytes; at most %d", what, len(f.Content), AgentFileMax)
		}
		if seen[f.Path] {
			return fmt.Errorf("%s: given twice", what)
		}
		seen[f.Path] = true
		if f.LocalEnv != "" && (f.LocalPath == "" || !filepath.IsLocal(filepath.FromSlash(f.LocalPath))) {
			return fmt.Errorf("%s: local path %q must be a relative path inside its folder", what, f.LocalPath)
		}
	}
	return nil
}

// agentFileDirs groups the agent files by folder, folders sorted.
func agentFileDirs(files []AgentFile) (dirs []string, byDir map[string][]AgentFile) {
	byDir = map[string][]AgentFile{}
	for _, f := range files {
		d := path.Dir(f.Path)
		if _, ok := byDir[d]; !ok {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], f)
	}
	sort.Strings(dirs)
	return dirs, byDir
}

// agentFilesTar is a tar of one folder's agent files: the folder itself
// ("./", root's, 0755) and each file (root's, 0444), so that a CLI that
// trusts only a system settings file owned by root and not writable by
// others takes it.
func agentFilesTar(files []AgentFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}); err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: path.Base(f.Path), Typeflag: tar.TypeReg, Mode: 0o444, Size: int64(len(f.Content)), ModTime: mtime}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// prepareAgentFiles puts the agent files into per-run volumes, one per
// folder, and returns their read-only mounts for the agent container. A
// volume is filled through a helper container that is created (with the
// volume writable) and never started: the Engine writes the files itself,
// owned by root whoever runs goalrun, and the Engine sees them even when it
// cannot see goalrun's filesystem (goalrun in a container, a remote
// Engine). The helper is removed at once; Close removes the volumes.
func (d *Docker) prepareAgentFiles(ctx context.Context) ([]mount.Mount, error) {
	if len(d.cfg.AgentFiles) == 0 {
		return nil, nil
	}
	dirs, byDir := agentFileDirs(d.cfg.AgentFiles)
	var vols, mounts []mount.Mount
	for i, dir := range dirs {
		name := fmt.Sprintf("goalrun-%s-files%d", d.cfg.RunID, i)
		if err := d.createVolume(ctx, name, "agent-files"); err != nil {
			return nil, fmt.Errorf("sandbox: docker: creating the agent files volume %s: %w", name, err)
		}
		noCopy := &mount.VolumeOptions{NoCopy: true} // never the image's own files at that folder
		vols = append(vols, mount.Mount{Type: mount.TypeVolume, Source: name, Target: dir, VolumeOptions: noCopy})
		mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: name, Target: dir, ReadOnly: true, VolumeOptions: noCopy})
	}
	cfg := &container.Config{Image: d.imageID, Cmd: []string{"true"}, Entrypoint: []string{}, NetworkDisabled: true, Labels: d.labels("agent-files")}
	hc := &container.HostConfig{NetworkMode: "none", Mounts: vols, LogConfig: container.LogConfig{Type: "none"}}
	name := "goalrun-" + d.cfg.RunID + "-files"
	id, err := d.createContainer(ctx, cfg, hc, name, func(ref string) {
		d.track(func(c *createdSet) { c.containers = append(c.containers, ref) })
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: docker: creating the container that writes the agent's files: %w", err)
	}
	defer func() {
		rctx, cancel := bg(ctx)
		defer cancel()
		_ = d.cli.ContainerRemove(rctx, id, container.RemoveOptions{Force: true}) // else Close removes it
	}()
	for _, dir := range dirs {
		b, err := agentFilesTar(byDir[dir])
		if err != nil {
			return nil, fmt.Errorf("sandbox: docker: packing the agent's files for %s: %w", dir, err)
		}
		if err := d.cli.CopyToContainer(ctx, id, dir, bytes.NewReader(b), container.CopyToContainerOptions{}); err != nil {
			return nil, fmt.Errorf("sandbox: docker: writing the agent's files into %s: %w", dir, err)
		}
	}
	return mounts, nil
}

// writeLocalAgentFiles writes the agent files the local sandbox provides
// (those with LocalEnv): one fresh folder (mode 0700, under the temporary
// folder) per variable, the files inside it (mode 0600). It returns the
// variables for agent steps and the folders to remove; on error nothing is
// left behind.
func writeLocalAgentFiles(files []AgentFile) (env map[string]string, dirs []string, err error) {
	env = map[string]string{}
	defer func() {
		if err != nil {
			for _, d := range dirs {
				os.RemoveAll(d)
			}
			env, dirs = nil, nil
		}
	}()
	for _, f := range files {
		if f.LocalEnv == "" {
			continue
		}
		dir, ok := env[f.LocalEnv]
		if !ok {
			dir, err = os.MkdirTemp("", "goalrun-agent-files-")
			if err != nil {
				return nil, nil, fmt.Errorf("sandbox: local: a folder for the agent's files: %w", err)
			}
			dirs = append(dirs, dir)
			env[f.LocalEnv] = dir
		}
		p := filepath.Join(dir, filepath.FromSlash(f.LocalPath))
		if err = os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, nil, fmt.Errorf("sandbox: local: %w", err)
		}
		if err = os.WriteFile(p, f.Content, 0o600); err != nil {
			return nil, nil, fmt.Errorf("sandbox: local: writing the agent's file %s: %w", p, err)
		}
	}
	if len(env) == 0 {
		return nil, nil, nil
	}
	return env, dirs, nil
}

var errAgentFileTarget = errors.New("agent file folder overlaps a mount")

// agentFilesOverlap reports an agent file folder that covers, or lies
// under, an extra mount's target (the two would hide each other).
func agentFilesOverlap(files []AgentFile, mounts []Mount) error {
	dirs, _ := agentFileDirs(files)
	for _, d := range dirs {
		for _, m := range mounts {
			if m.Target == d || isUnder(m.Target, d) || isUnder(d, m.Target) {
				return fmt.Errorf("sandbox: agent files in %s and mount %s would hide each other: %w", d, m.Target, errAgentFileTarget)
			}
		}
	}
	return nil
}
