package sandbox_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
	"github.com/goalrun/goalrun/sandbox/egress"
	"github.com/goalrun/goalrun/sandbox/egress/egresstest"
)

// setupConfig is a Docker sandbox with setup steps whose tools keep what
// they fetch under DepsDir/x.
func setupConfig(t *testing.T, allow ...string) sandbox.Config {
	return sandbox.Config{
		RelayBinary: dockertest.GoalrunBinary(t),
		Setup: sandbox.SetupConfig{
			Enabled:    true,
			Env:        map[string]string{"X_DEPS": sandbox.DepsDir + "/x"},
			CheckEnv:   map[string]string{"X_DEPS": sandbox.DepsDir + "/x", "X_OFFLINE": "1"},
			AllowHosts: allow,
		},
		Secrets:   map[string]string{"GOALRUN_TEST_SECRET": "s3cret-value-for-the-agent-only"},
		Upstreams: []sandbox.Upstream{{URL: "https://api.anthropic.com", BaseURLEnv: "ANTHROPIC_BASE_URL", KeyEnv: "ANTHROPIC_API_KEY", Key: "real-model-key-never-in-setup"}},
	}
}

// TestDockerSetupDepsVolume: what a setup step writes under DepsDir is
// there, read-only, for every check and agent step; neither can write it
// (an agent that could would poison every later check). What it writes in
// the tree lands in the setup layer: never in the workspace, never in the
// agent's container, below the tree in every check's view (the agent's
// own file wins, and the layer's comes back when the agent removes it).
// The setup step gets no secret and no model API, and setup steps after
// the first check are refused.
func TestDockerSetupDepsVolume(t *testing.T) {
	for _, mode := range []sandbox.WorkspaceMode{sandbox.WorkspaceBind, sandbox.WorkspaceCopy} {
		t.Run(string(mode), func(t *testing.T) { testSetupDepsVolume(t, mode) })
	}
}

func testSetupDepsVolume(t *testing.T, mode sandbox.WorkspaceMode) {
	ws := dockertest.Workspace(t, testUID, testGID)
	if err := os.WriteFile(filepath.Join(ws, "go.mod"), []byte("module example.test/m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dockertest.Chown(t, ws, testUID, testGID)
	cfg := setupConfig(t)
	cfg.Workspace, cfg.WorkspaceMode = ws, mode
	sb, cfg := startDocker(t, cfg)

	res := run(t, sb, sandbox.Cmd{Role: sandbox.RoleSetup, Args: sandbox.Shell(
		`set -e; mkdir -p "$X_DEPS/pkg"; echo prepared > "$X_DEPS/pkg/file"; cat go.mod; id -u; env | sort; ` +
			`mkdir -p node_modules/dep && echo from-setup > node_modules/dep/index.js`)})
	out := string(res.Stdout.Tail)
	if res.ExitCode != 0 || !strings.Contains(out, "module example.test/m") || !strings.Contains(out, "1000\n") {
		t.Fatalf("setup step: exit %d stdout %q stderr %q", res.ExitCode, out, res.Stderr.Tail)
	}
	for _, bad := range []string{"s3cret-value", "real-model-key", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "X_OFFLINE"} {
		if strings.Contains(out, bad) {
			t.Errorf("the setup step's environment shows %q:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "HTTPS_PROXY=http://127.0.0.1:") || !strings.Contains(out, "X_DEPS="+sandbox.DepsDir+"/x") {
		t.Errorf("the setup step lacks its proxy or its deps folder:\n%s", out)
	}

	layer := func(role sandbox.Role) string {
		t.Helper()
		r := run(t, sb, sh(role, `cat node_modules/dep/index.js 2>/dev/null || echo absent`))
		return strings.TrimSpace(string(r.Stdout.Tail))
	}
	if got := layer(sandbox.RoleCheck); got != "from-setup" {
		t.Errorf("the check does not see the setup layer: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "node_modules")); err == nil {
		t.Errorf("the setup step wrote the workspace")
	}
	if got := layer(sandbox.RoleAgent); got != "absent" {
		t.Errorf("the agent sees the setup layer: %q", got)
	}

	for _, role := range []sandbox.Role{sandbox.RoleCheck, sandbox.RoleAgent} {
		t.Run(role.String(), func(t *testing.T) {
			res := run(t, sb, sh(role, `cat "$X_DEPS/pkg/file"; echo "offline=$X_OFFLINE"; `+
				`echo poisoned > "$X_DEPS/pkg/file" 2>/dev/null && echo WROTE-FILE; `+
				`mkdir "$X_DEPS/new" 2>/dev/null && echo WROTE-FOLDER; `+
				`chmod u+w "$X_DEPS/pkg/file" 2>/dev/null && echo CHMOD; `+
				`mv "$X_DEPS/pkg" "$X_DEPS/moved" 2>/dev/null && echo MOVED; `+
				`rm -rf "$X_DEPS/pkg" 2>/dev/null; test -e "$X_DEPS/pkg/file" || echo REMOVED; `+
				`ln -s /tmp "$X_DEPS/link" 2>/dev/null && echo LINKED; `+
				`mount -o remount,rw `+sandbox.DepsDir+` 2>/dev/null && echo REMOUNTED; `+
				`grep -l from-setup $(find / -xdev -path /proc -prune -o -name index.js -print 2>/dev/null) 2>/dev/null | grep -v '^/workspace/' ; true`))
			got := string(res.Stdout.Tail)
			if !strings.HasPrefix(got, "prepared\noffline=1\n") {
				t.Errorf("the %s step does not see what the setup prepared: %q (stderr %q)", role, got, res.Stderr.Tail)
			}
			for _, breach := range []string{"WROTE-FILE", "WROTE-FOLDER", "CHMOD", "MOVED", "REMOVED", "LINKED", "REMOUNTED", "index.js"} {
				if strings.Contains(got, breach) {
					t.Errorf("the %s step could change the deps volume or find the setup layer (%s): breach", role, breach)
				}
			}
		})
	}
	// The agent shadows the layer's file, then removes its own: the check
	// sees the agent's file, then the layer's again (the layer itself is
	// out of the agent's reach). A check's own writes are discarded.
	run(t, sb, sh(sandbox.RoleAgent, `mkdir -p node_modules/dep && echo from-agent > node_modules/dep/index.js`))
	if got := layer(sandbox.RoleCheck); got != "from-agent" {
		t.Errorf("the agent's file does not win over the layer: %q", got)
	}
	run(t, sb, sh(sandbox.RoleAgent, `rm -rf node_modules`))
	run(t, sb, sh(sandbox.RoleCheck, `echo from-check > node_modules/dep/index.js`))
	if got := layer(sandbox.RoleCheck); got != "from-setup" {
		t.Errorf("after the agent removed its file and a check wrote one, the check sees %q, want the layer's", got)
	}
	res = run(t, sb, sh(sandbox.RoleCheck, `cat "$X_DEPS/pkg/file"; ls "$X_DEPS"`))
	if got := string(res.Stdout.Tail); got != "prepared\npkg\n" {
		t.Errorf("the check after the agent sees %q", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := sb.Exec(ctx, sh(sandbox.RoleSetup, "true")); !errors.Is(err, sandbox.ErrSetupOver) {
		t.Errorf("a setup step after the first check: %v, want ErrSetupOver", err)
	}
	p := sb.Posture()
	if !slices.Contains(p.ExtraMounts, sandbox.DepsDir+":ro") {
		t.Errorf("posture extra_mounts %q lacks %s:ro", p.ExtraMounts, sandbox.DepsDir)
	}
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if left := runVolumes(t, dockertest.Client(t), cfg.RunID); len(left) > 0 {
		t.Errorf("Close left volumes: %q", left)
	}
}

// TestDockerSetupEgress: the setup container reaches only its own
// allowlist, through its own proxy (not the agent's): an allowed site
// answers, anything else is refused and counted in the posture, and there
// is no way around the proxy; the agent does not get the setup's hosts.
func TestDockerSetupEgress(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("registry answer\n"))
	}))
	defer site.Close()
	res := egresstest.NewResolver(map[string][]netip.Addr{
		"registry.test": {egresstest.PublicV4},
		"evil.test":     {egresstest.PublicV4B},
		"rebind.test":   {netip.MustParseAddr("10.0.0.7")},
	})
	router := egresstest.NewRouter()
	router.Route(netip.AddrPortFrom(egresstest.PublicV4, 80).String(), site.Listener.Addr().String())

	cfg := setupConfig(t, "registry.test:80", "rebind.test:80")
	cfg.Network = sandbox.NetworkNone
	sb, _ := startDocker(t, cfg, sandbox.WithEgressConfig(func(c *egress.Config) {
		c.Resolver = res
		c.DialContext = router.DialContext
	}))

	ok := run(t, sb, sh(sandbox.RoleSetup, `wget -q -O- http://registry.test/`))
	if ok.ExitCode != 0 || string(ok.Stdout.Tail) != "registry answer\n" {
		t.Fatalf("allowed registry: exit %d stdout %q stderr %q", ok.ExitCode, ok.Stdout.Tail, ok.Stderr.Tail)
	}
	for _, tc := range []struct{ name, script string }{
		{"host not on the setup allowlist", `timeout 20 wget -q -O- http://evil.test/`},
		{"the agent's model API host", `timeout 20 wget -q -O- https://api.anthropic.com/`},
		{"allowed name resolving to a private address", `timeout 20 wget -q -O- http://rebind.test/`},
		{"IP literal", `timeout 20 wget -q -O- http://93.184.215.14/`},
		{"around the proxy", `timeout 20 wget -Y off -q -O- http://93.184.215.14/`},
		{"the Docker bridge gateway around the proxy", `timeout 20 wget -Y off -q -O- http://172.17.0.1:2375/version`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, sb, sh(sandbox.RoleSetup, tc.script))
			if r.ExitCode == 0 {
				t.Errorf("reached: stdout %q: breach", r.Stdout.Tail)
			}
		})
	}
	p := sb.Posture()
	if !slices.Equal(p.SetupEgressAllowlist, []string{"registry.test:80", "rebind.test:80"}) || p.SetupEgressAllowed < 1 || p.SetupEgressDenied < 3 {
		t.Errorf("posture: setup allowlist %q allowed %d denied %d (%q)", p.SetupEgressAllowlist, p.SetupEgressAllowed, p.SetupEgressDenied, p.SetupEgressDenials)
	}
	// The agent's network is none: the setup's registry is not its.
	r := run(t, sb, sh(sandbox.RoleAgent, `timeout 20 wget -q -O- http://registry.test/`))
	if r.ExitCode == 0 {
		t.Errorf("the agent reached the setup's registry: breach")
	}
	if after := sb.Posture(); !slices.Equal(after.SetupEgressAllowlist, p.SetupEgressAllowlist) || after.SetupEgressDenied != p.SetupEgressDenied {
		t.Errorf("the setup's counters changed after the setup ended: %+v", after)
	}
}

// TestDockerSetupGoModules: a Go module with a third-party dependency and
// no vendor folder: the setup step downloads it through the setup
// container's proxy (the go preset, resolved by goalrun) and warms the
// build cache without running the module's code; the check then passes
// with no network, GOPROXY=off and the deps volume read-only, and a module
// the agent adds later is named as missing.
func TestDockerSetupGoModules(t *testing.T) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skipf("no go toolchain on PATH: %v", err)
	}
	goroot := strings.TrimSpace(string(out))
	ws := dockertest.Workspace(t, testUID, testGID)
	files := map[string]string{
		"go.mod":      "module example.test/ids\n\ngo 1.22\n\nrequire github.com/google/uuid v1.6.0\n",
		"go.sum":      "github.com/google/uuid v1.6.0 h1:NIvaJDMOsjHA8n1jAhLSgzrAzy1Hgr+hNrb57e+94F0=\ngithub.com/google/uuid v1.6.0/go.mod h1:TIyPZe4MgqvfeYDBFedMoGGpEw/LqOeaOT+nhxU+yHo=\n",
		"ids.go":      "package ids\n\nimport \"github.com/google/uuid\"\n\nfunc New() string { return uuid.NewString() }\n",
		"ids_test.go": "package ids\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc init() { os.WriteFile(\"/tmp/module-code-ran\", nil, 0o644) }\n\nfunc TestNew(t *testing.T) {\n\tif len(New()) != 36 {\n\t\tt.Fatal(New())\n\t}\n}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dockertest.Chown(t, ws, testUID, testGID)
	// The standard library warmed once per toolchain (CI keeps it between
	// runs), seeded into the deps volume's build cache by the sandbox.
	root := t.TempDir()
	if c := os.Getenv("GOALRUN_CACHE"); c != "" {
		root = filepath.Join(c, "gocache")
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer wcancel()
	dir, err := sandbox.WarmGoCache(wctx, goroot, root, false)
	if err != nil {
		t.Fatal(err)
	}
	stdlib, env := sandbox.GoCacheMount(dir, false)
	env["PATH"] = filepath.Join(goroot, "bin") + ":" + sandbox.ImagePath
	deps := sandbox.DepsDir
	cfg := sandbox.Config{
		Workspace:       ws,
		EgressAllowNets: dockertest.RegistryNets(t, "proxy.golang.org"),
		ToolEnv:         env,
		Mounts:          []sandbox.Mount{{Source: goroot, Target: goroot, ReadOnly: true}, stdlib},
		RelayBinary:     dockertest.GoalrunBinary(t),
		Setup: sandbox.SetupConfig{
			Enabled:    true,
			Env:        map[string]string{"GOMODCACHE": deps + "/gomod", "GOCACHE": deps + "/gocache", "GOTOOLCHAIN": "local"},
			CheckEnv:   map[string]string{"GOMODCACHE": deps + "/gomod", "GOCACHE": deps + "/gocache", "GOTOOLCHAIN": "local", "GOPROXY": "off"},
			AllowHosts: []string{"go"},
		},
	}
	sb, _ := startDocker(t, cfg)
	long := func(cmd sandbox.Cmd) sandbox.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		res, err := sb.Exec(ctx, cmd)
		if err != nil {
			t.Fatalf("Exec %q: %v", cmd.Args, err)
		}
		return res
	}
	for _, step := range []string{"go mod download", "go test -count=1 -exec true ./... && test ! -e /tmp/module-code-ran"} {
		r := long(sandbox.Cmd{Role: sandbox.RoleSetup, Args: sandbox.Shell(step)})
		if r.ExitCode != 0 {
			t.Fatalf("setup %q: exit %d stdout %q stderr %q (posture %+v)", step, r.ExitCode, r.Stdout.Tail, r.Stderr.Tail, sb.Posture())
		}
	}
	r := long(sandbox.Cmd{Role: sandbox.RoleCheck, Args: sandbox.Shell(`go test -count=1 ./... 2>&1; echo "compiles=$(go test -count=1 -x ./... 2>&1 | grep -c '/compile ')"`)})
	got := string(r.Stdout.Tail)
	if r.ExitCode != 0 || !strings.Contains(got, "ok  \texample.test/ids") {
		t.Fatalf("check: exit %d stdout %q stderr %q", r.ExitCode, got, r.Stderr.Tail)
	}
	if !strings.HasSuffix(got, "compiles=0\n") {
		t.Errorf("the check compiled what the setup step warmed: %s", got[max(0, len(got)-400):])
	}
	// The agent tries to poison what the check builds with: the module's
	// source in the module cache, the build cache, and the go command's
	// own settings (go env -w writes the user's config file). None of it
	// reaches the next check.
	a := long(sandbox.Cmd{Role: sandbox.RoleAgent, Args: sandbox.Shell(`f=$(go env GOMODCACHE)/github.com/google/uuid@v1.6.0/version4.go; ` +
		`chmod u+w "$f" 2>/dev/null; echo 'package uuid' > "$f" 2>/dev/null && echo WROTE-MODCACHE; ` +
		`for e in $(find "$GOCACHE" -type f -name '*-d' | head -50); do echo poison > "$e" 2>/dev/null && echo WROTE-GOCACHE; done; ` +
		`mkdir -p /tmp/poison; go env -w GOMODCACHE=/tmp/poison GOFLAGS=-mod=mod GOPROXY=https://evil.test 2>/dev/null; ` +
		`mkdir -p "$HOME/.config/go" && printf 'GOMODCACHE=/tmp/poison\nGOFLAGS=-mod=mod\n' > "$HOME/.config/go/env"; true`)})
	if out := string(a.Stdout.Tail); strings.Contains(out, "WROTE-") {
		t.Errorf("the agent wrote the prepared dependencies: %q: breach", out)
	}
	r = long(sandbox.Cmd{Role: sandbox.RoleCheck, Args: sandbox.Shell(`go env GOMODCACHE GOFLAGS GOPROXY; go test -count=1 ./...`)})
	if got := string(r.Stdout.Tail); r.ExitCode != 0 || !strings.HasPrefix(got, deps+"/gomod\n\noff\n") || !strings.Contains(got, "ok  \texample.test/ids") {
		t.Errorf("the check after the agent's attempt: exit %d stdout %q stderr %q", r.ExitCode, got, r.Stderr.Tail)
	}

	// A module the agent imports later is not there, and says so.
	if err := os.WriteFile(filepath.Join(ws, "cmp.go"), []byte("package ids\n\nimport \"github.com/google/go-cmp/cmp\"\n\nvar _ = cmp.Equal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dockertest.Chown(t, ws, testUID, testGID)
	r = long(sandbox.Cmd{Role: sandbox.RoleCheck, Args: sandbox.Shell(`go test ./...`)})
	if all := string(r.Stdout.Tail) + string(r.Stderr.Tail); r.ExitCode == 0 || !strings.Contains(all, "github.com/google/go-cmp/cmp") {
		t.Errorf("a module missing from the deps volume: exit %d output %q", r.ExitCode, all)
	}
	if p := sb.Posture(); p.SetupEgressAllowed < 1 || !slices.Contains(p.SetupEgressAllowlist, "proxy.golang.org:443") {
		t.Errorf("posture: %+v", p)
	}
}

// TestDockerSetupCopyViewAndCleanup: when the Engine refuses overlay views
// the setup step still fills the deps volume, but its in-tree outputs are
// not shown to checks (a snapshot copy of the whole tree below the
// agent's would bring back what the agent deletes); Close removes the deps
// volume and the setup's view with everything else.
func TestDockerSetupCopyViewAndCleanup(t *testing.T) {
	cli := dockertest.Client(t)
	runID := dockertest.RunID(t)
	ws := dockertest.Workspace(t, testUID, testGID)
	writeTree(t, ws, map[string]string{"a.txt": "a\n"})
	cfg := setupConfig(t)
	cfg.RunID, cfg.Workspace = runID, ws
	sb := startDockerOn(t, refuseOverlay{cli}, cfg)
	if got := sb.Posture().CheckView; got != sandbox.CheckViewCopy {
		t.Fatalf("check_view %q", got)
	}
	if r := run(t, sb, sh(sandbox.RoleSetup, `mkdir -p "$X_DEPS" node_modules && echo dep > "$X_DEPS/d" && echo layer > node_modules/x && rm a.txt`)); r.ExitCode != 0 {
		t.Fatalf("setup: %d %s", r.ExitCode, r.Stderr.Tail)
	}
	r := run(t, sb, sh(sandbox.RoleCheck, `cat "$X_DEPS/d"; cat node_modules/x 2>/dev/null || echo no-layer; cat a.txt`))
	if got := string(r.Stdout.Tail); got != "dep\nno-layer\na\n" {
		t.Errorf("the check sees %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if left := runVolumes(t, cli, runID); len(left) > 0 {
		t.Errorf("Close left volumes: %q", left)
	}
}
