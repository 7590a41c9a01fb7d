package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
)

// TCPEnv names the variable .ci/run sets to the Engine's loopback TCP
// address (tcp://127.0.0.1:PORT) when it starts dockerd itself.
const TCPEnv = "GOALRUN_DOCKER_TCP"

// tcpEngine returns an Engine client that reaches the Engine over TCP on
// loopback: GOALRUN_DOCKER_TCP when set, else a loopback TCP listener this
// test runs in front of the Engine's Unix socket (so the client speaks real
// HTTP over TCP either way, as it would to a remote Engine).
func tcpEngine(t *testing.T) *client.Client {
	t.Helper()
	local := dockertest.Client(t) // skips or fails when no Engine answers
	host := os.Getenv(TCPEnv)
	if host == "" {
		sock, ok := strings.CutPrefix(local.DaemonHost(), "unix://")
		if !ok {
			t.Fatalf("%s is not set and the Engine (%s) is not on a Unix socket to forward to", TCPEnv, local.DaemonHost())
		}
		host = forwardTCP(t, sock)
	}
	cli, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		t.Fatalf("the Engine does not answer over TCP at %s: %v", host, err)
	}
	return cli
}

// forwardTCP listens on 127.0.0.1 and carries each connection to the Unix
// socket; it returns "tcp://127.0.0.1:PORT".
func forwardTCP(t *testing.T, sock string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				u, err := net.Dial("unix", sock)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{})
				go func() { io.Copy(u, c); u.(*net.UnixConn).CloseWrite(); close(done) }()
				io.Copy(c, u)
				c.(*net.TCPConn).CloseWrite() // the Engine ended the stream: so does the client's side
				<-done
			}()
		}
	}()
	return "tcp://" + l.Addr().String()
}

// TestDockerRemoteEngineCopyMode is issue 7's remote-engine test: the
// Engine is reached over TCP, the workspace goes in and out by copy
// (forced), the posture says "copy", agent changes (edits, new files,
// deletions, modes) reach the host right after the step, and the check sees
// the current tree.
func TestDockerRemoteEngineCopyMode(t *testing.T) {
	cli := tcpEngine(t)
	ws := t.TempDir() // owned by whoever runs the test (root on CI): copy gives the sandbox user its own files
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(ws, "sub", "deep"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "a.txt"), []byte("from the host\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "sub", "b.txt"), []byte("to be deleted\n"), 0o644))
	must(os.WriteFile(filepath.Join(ws, "sub", "deep", "keep.txt"), []byte("untouched\n"), 0o644))
	must(os.Symlink("a.txt", filepath.Join(ws, "link")))
	keep, _ := os.Stat(filepath.Join(ws, "sub", "deep", "keep.txt"))

	cfg := sandbox.Config{RunID: dockertest.RunID(t), Image: dockertest.Image(t, cli), Workspace: ws, WorkspaceMode: sandbox.WorkspaceCopy, Lifetime: testLifetime}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := sandbox.StartDocker(ctx, cli, cfg)
	if err != nil {
		t.Fatalf("StartDocker over TCP: %v", err)
	}
	defer sb.Close(context.Background())
	if p := sb.Posture(); p.Workspace != sandbox.WorkspaceCopy || p.Root != sandbox.DockerRoot || p.User != "1000:1000" {
		t.Errorf("posture workspace %q root %q user %q, want copy %s 1000:1000", p.Workspace, p.Root, p.User, sandbox.DockerRoot)
	}

	res := run(t, sb, sh(sandbox.RoleAgent, `set -e
cat a.txt; readlink link; id -u; stat -c %u sub/deep/keep.txt
echo "edited by the agent" > a.txt
mkdir -p new/dir && echo created > new/dir/c.txt
printf '#!/bin/sh\necho run\n' > tool.sh && chmod 755 tool.sh
rm sub/b.txt`))
	if res.ExitCode != 0 {
		t.Fatalf("agent step exit %d: %s %s", res.ExitCode, res.Stdout.Tail, res.Stderr.Tail)
	}
	if got, want := string(res.Stdout.Tail), "from the host\na.txt\n1000\n1000\n"; got != want {
		t.Errorf("inside the copy: %q, want %q", got, want)
	}
	for rel, want := range map[string]string{"a.txt": "edited by the agent\n", "new/dir/c.txt": "created\n", "tool.sh": "#!/bin/sh\necho run\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(b) != want {
			t.Errorf("host %s = %q, %v; want %q", rel, b, err, want)
		}
	}
	if st, err := os.Stat(filepath.Join(ws, "tool.sh")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("tool.sh mode: %v %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "sub", "b.txt")); !os.IsNotExist(err) {
		t.Errorf("sub/b.txt should be gone from the host: %v", err)
	}
	if st, _ := os.Stat(filepath.Join(ws, "sub", "deep", "keep.txt")); !os.SameFile(st, keep) {
		t.Errorf("an unchanged file was rewritten on the host")
	}
	if target, err := os.Readlink(filepath.Join(ws, "link")); err != nil || target != "a.txt" {
		t.Errorf("link = %q, %v", target, err)
	}

	chk := run(t, sb, sh(sandbox.RoleCheck, "cat new/dir/c.txt a.txt; ./tool.sh; test ! -e sub/b.txt"))
	if chk.ExitCode != 0 || string(chk.Stdout.Tail) != "created\nedited by the agent\nrun\n" {
		t.Errorf("check sees exit %d %q (stderr %q), want the current tree", chk.ExitCode, chk.Stdout.Tail, chk.Stderr.Tail)
	}
}

// TestDockerAutoCopiesRootOwnedWorkspace: a workspace owned by root is
// copied in auto mode (root is never the sandbox user), and bind refuses.
func TestDockerAutoCopiesRootOwnedWorkspace(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs a root-owned workspace: the test runs as uid", os.Getuid())
	}
	cli := dockertest.Client(t)
	ws := t.TempDir()
	cfg := sandbox.Config{RunID: dockertest.RunID(t), Image: dockertest.Image(t, cli), Workspace: ws, WorkspaceMode: sandbox.WorkspaceBind, Lifetime: testLifetime}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if sb, err := sandbox.StartDocker(ctx, cli, cfg); err == nil {
		sb.Close(ctx)
		t.Fatal("bind mode started a sandbox on a root-owned workspace without Config.User")
	} else if re := (*sandbox.RootWorkspaceError)(nil); !errors.Is(err, sandbox.ErrRootWorkspace) || !errors.As(err, &re) || re.Workspace != ws || !strings.Contains(err.Error(), "belongs to root") {
		t.Errorf("error should say why: %v", err)
	}
	cfg.WorkspaceMode = sandbox.WorkspaceAuto
	sb, err := sandbox.StartDocker(ctx, cli, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	if p := sb.Posture(); p.Workspace != sandbox.WorkspaceCopy || p.User != "1000:1000" {
		t.Errorf("auto on a root-owned workspace: workspace %q user %q, want copy 1000:1000", p.Workspace, p.User)
	}
	res := run(t, sb, sh(sandbox.RoleAgent, "echo hi > made-inside"))
	if b, err := os.ReadFile(filepath.Join(ws, "made-inside")); res.ExitCode != 0 || string(b) != "hi\n" {
		t.Errorf("exit %d, host file %q %v", res.ExitCode, b, err)
	}
}

// TestDockerWidensToRepositoryRoot: a workspace that is a subfolder of a git
// repository gets the repository root mounted (git needs it); steps start in
// the workspace, the posture's root says where it is and mount names the
// wider host path. In both workspace modes.
func TestDockerWidensToRepositoryRoot(t *testing.T) {
	for _, mode := range []sandbox.WorkspaceMode{sandbox.WorkspaceBind, sandbox.WorkspaceCopy} {
		t.Run(string(mode), func(t *testing.T) {
			repo := t.TempDir()
			for _, d := range []string{".git", "services/api"} {
				if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			os.WriteFile(filepath.Join(repo, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
			os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module example\n"), 0o644)
			dockertest.Chown(t, repo, testUID, testGID)
			ws := filepath.Join(repo, "services", "api")
			sb, _ := startDocker(t, sandbox.Config{Workspace: ws, WorkspaceMode: mode})
			p := sb.Posture()
			if p.Root != sandbox.DockerRoot+"/services/api" || p.Mount == nil || *p.Mount != repo {
				t.Fatalf("posture root %q mount %v, want %s/services/api and %s", p.Root, p.Mount, sandbox.DockerRoot, repo)
			}
			for _, role := range bothRoles {
				res := run(t, sb, sh(role, "pwd; cat ../../.git/HEAD ../../go.mod; echo "+role.String()+" > made-by-"+role.String()))
				want := p.Root + "\nref: refs/heads/main\nmodule example\n"
				if res.ExitCode != 0 || string(res.Stdout.Tail) != want {
					t.Errorf("%s: exit %d stdout %q, want %q (stderr %q)", role, res.ExitCode, res.Stdout.Tail, want, res.Stderr.Tail)
				}
			}
			// Agent writes reach the host workspace (copy mode copies out
			// after agent steps).
			if b, err := os.ReadFile(filepath.Join(ws, "made-by-agent")); err != nil || string(b) != "agent\n" {
				t.Errorf("host workspace: %q %v", b, err)
			}
		})
	}
}

// TestDockerCopyModeHostOwned: in copy mode the files goalrun itself writes
// during a run (Config.HostOwned: its --events log and --output document)
// never enter the sandbox, and copy-back after an agent step neither
// overwrites nor removes them, even when the agent wrote or deleted the same
// paths inside; the agent's other changes still come back. Both a workspace
// mounted itself and one widened to its repository root (a document above
// the workspace) are covered.
func TestDockerCopyModeHostOwned(t *testing.T) {
	tests := []struct {
		name string
		// repo, when set, makes the workspace a subfolder of a git
		// repository, so the mount is widened to the repository root.
		repo  bool
		owned []string // workspace-relative, as cmd/goalrun passes them
	}{
		{name: "workspace mount", owned: []string{"events.jsonl", "out/doc.json"}},
		{name: "repository root mount", repo: true, owned: []string{"events.jsonl", "../doc.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cli := dockertest.Client(t)
			top := t.TempDir()
			ws := top
			if tc.repo {
				if err := os.Mkdir(filepath.Join(top, ".git"), 0o755); err != nil {
					t.Fatal(err)
				}
				ws = filepath.Join(top, "sub")
			}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(os.MkdirAll(filepath.Join(ws, "out"), 0o755))
			must(os.WriteFile(filepath.Join(ws, "a.txt"), []byte("before\n"), 0o644))
			var files []string
			for _, rel := range tc.owned {
				p := filepath.Join(ws, filepath.FromSlash(rel))
				files = append(files, p)
				must(os.WriteFile(p, []byte("{\"type\":\"started\"}\n"), 0o644))
			}

			cfg := sandbox.Config{RunID: dockertest.RunID(t), Image: dockertest.Image(t, cli), Workspace: ws,
				WorkspaceMode: sandbox.WorkspaceCopy, HostOwned: tc.owned, Lifetime: testLifetime}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sb, err := sandbox.StartDocker(ctx, cli, cfg)
			if err != nil {
				t.Fatalf("StartDocker: %v", err)
			}
			defer sb.Close(context.Background())
			if p := sb.Posture(); p.Workspace != sandbox.WorkspaceCopy || (tc.repo != (p.Mount != nil)) {
				t.Fatalf("posture workspace %q mount %v, want copy (widened %v)", p.Workspace, p.Mount, tc.repo)
			}

			// goalrun keeps writing its files while the agent runs.
			for _, p := range files {
				f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
				must(err)
				_, err = f.WriteString("{\"type\":\"turn\"}\n")
				must(err)
				must(f.Close())
			}
			script := "set -e\n"
			for _, rel := range tc.owned {
				script += fmt.Sprintf("if [ -e %[1]s ]; then echo 'visible: %[1]s'; fi\necho stale > %[1]s\n", rel)
			}
			script += "echo after > a.txt\n"
			res := run(t, sb, sh(sandbox.RoleAgent, script))
			if res.ExitCode != 0 {
				t.Fatalf("agent step exit %d: %s %s", res.ExitCode, res.Stdout.Tail, res.Stderr.Tail)
			}
			if len(res.Stdout.Tail) != 0 {
				t.Errorf("goalrun's own files were copied into the sandbox: %s", res.Stdout.Tail)
			}
			for _, p := range files {
				if b, err := os.ReadFile(p); err != nil || string(b) != "{\"type\":\"started\"}\n{\"type\":\"turn\"}\n" {
					t.Errorf("after copy-back %s = %q, %v; want goalrun's two lines untouched", p, b, err)
				}
			}
			if b, err := os.ReadFile(filepath.Join(ws, "a.txt")); err != nil || string(b) != "after\n" {
				t.Errorf("the agent's edit did not come back: a.txt = %q, %v", b, err)
			}

			// The agent deletes its copies: goalrun's files stay.
			res = run(t, sb, sh(sandbox.RoleAgent, "rm -f "+strings.Join(tc.owned, " ")+" && rm -r out"))
			if res.ExitCode != 0 {
				t.Fatalf("agent step exit %d: %s", res.ExitCode, res.Stderr.Tail)
			}
			for _, p := range files {
				if b, err := os.ReadFile(p); err != nil || !strings.HasPrefix(string(b), "{\"type\":\"started\"}\n") {
					t.Errorf("after the agent deleted its copy, %s = %q, %v; want goalrun's file kept", p, b, err)
				}
			}
		})
	}
}
