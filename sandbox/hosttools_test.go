package sandbox

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestStepPath(t *testing.T) {
	mounted := HostToolchain{Mounts: []Mount{{Source: "/usr"}, {Source: "/bin"}, {Source: "/opt"}}}
	tests := []struct {
		name, host, want string
	}{
		{"this machine: pyenv under /root and cargo are left out, /usr/local/go/bin stays first",
			"/usr/local/go/bin:/root/go/bin:/root/.cargo/bin:/root/.pyenv/shims:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/bin:/sbin"},
		{"a setup-* toolchain under /opt comes first as on the host",
			"/opt/hostedtoolcache/Python/3.12.4/x64/bin:/home/runner/.local/bin:/usr/bin",
			"/opt/hostedtoolcache/Python/3.12.4/x64/bin:/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin:/bin"},
		{"relative entries, empty entries and duplicates are dropped",
			".:bin::/usr/bin/:/usr/bin:/usr/../usr/bin",
			"/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin:/bin"},
		{"no PATH at all", "", SystemPath},
		{"a folder that only shares a prefix with a mount is not inside it", "/usrlocal/bin:/optional", SystemPath},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := stepPath(tc.host, mounted.Covers); got != tc.want {
				t.Errorf("stepPath(%q) = %q, want %q", tc.host, got, tc.want)
			}
		})
	}
}

func TestCarriedToolVariables(t *testing.T) {
	covers := HostToolchain{Mounts: []Mount{{Source: "/usr"}, {Source: "/opt"}}}.Covers
	tests := []struct {
		name, key, value string
		carried          bool
	}{
		{"JAVA_HOME inside /usr", "JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64", true},
		{"a runner's versioned JAVA_HOME", "JAVA_HOME_17_X64", "/opt/hostedtoolcache/Java_Temurin-Hotspot_jdk/17.0.9-9/x64", true},
		{"a runner's versioned GOROOT", "GOROOT_1_22_X64", "/opt/hostedtoolcache/go/1.22.5/x64", true},
		{"a library path list inside mounts", "LD_LIBRARY_PATH", "/opt/hostedtoolcache/Python/3.12.4/x64/lib:/usr/local/lib", true},
		{"a list with one entry outside the mounts", "LD_LIBRARY_PATH", "/usr/local/lib:/root/lib", false},
		{"GOROOT under a home folder", "GOROOT", "/home/u/sdk/go1.26", false},
		{"not a path", "JAVA_HOME", "https://user:token@example.com/jdk", false},
		{"empty", "JAVA_HOME", "", false},
		{"a newline smuggled in", "JAVA_HOME", "/usr/lib/jvm\nFOO=1", false},
		{"a variable not on the list", "NPM_CONFIG_PREFIX", "/usr/local", false},
		{"a prefix alone is not a name", "JAVA_HOME_", "/usr/lib/jvm", false},
		{"CARGO_HOME: cargo writes there", "CARGO_HOME", "/usr/local/cargo", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := carriedToolVar(tc.key) && carriedValue(tc.value, covers); got != tc.carried {
				t.Errorf("%s=%q carried = %v, want %v", tc.key, tc.value, got, tc.carried)
			}
		})
	}
}

// Every path the default sandbox may mount passes the mount policy on its
// own (the policy and the lists are kept apart; a list entry the policy
// refused would silently vanish from every sandbox).
func TestHostCandidatesPassThePolicy(t *testing.T) {
	p := newMountPolicy("/home/user", func(string) (string, bool) { return "", false }, "unix:///var/run/docker.sock")
	for _, c := range hostCandidates() {
		if err := p.check("candidate", c); err != nil {
			t.Errorf("candidate %s: %v", c, err)
		}
		if c == "/etc" || c == "/etc/ssl" || c == "/etc/pki" || c == "/etc/pki/tls" || strings.HasPrefix(c, "/etc/shadow") {
			t.Errorf("candidate %s exposes /etc's secrets", c)
		}
	}
}

func TestBareImageHoldsNoProgram(t *testing.T) {
	files, err := imageFiles(ImageSpec{Bare: true})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]imageFile{}
	for _, f := range files {
		names[f.name] = f
		if f.src != "" {
			t.Errorf("%s is copied from this machine (%s); a Bare image is generated", f.name, f.src)
		}
		if !f.dir && f.linkname == "" && !strings.HasPrefix(f.name, "/etc/") {
			t.Errorf("%s: a Bare image holds files only in /etc", f.name)
		}
		if f.mode&0o111 != 0 && !f.dir {
			t.Errorf("%s is executable", f.name)
		}
	}
	for _, want := range []string{"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf", "/etc/mtab", "/tmp", DockerRoot, DockerHome, MountRoot} {
		if _, ok := names[want]; !ok {
			t.Errorf("%s is missing", want)
		}
	}
	if names["/tmp"].mode != 0o1777 {
		t.Errorf("/tmp mode %o", names["/tmp"].mode)
	}
	if got := imageChanges(ImageSpec{Bare: true})[0]; got != "ENV PATH="+SystemPath {
		t.Errorf("PATH change %q", got)
	}
	h1, _ := hashImage(files, strings.Join(imageChanges(ImageSpec{Bare: true}), "\n"))
	files2, _ := imageFiles(ImageSpec{Bare: true})
	h2, _ := hashImage(files2, strings.Join(imageChanges(ImageSpec{Bare: true}), "\n"))
	if h1 != h2 {
		t.Error("the Bare image's hash is not stable")
	}
}

// engineAnswers fakes the Engine's answer to the mount check.
type engineAnswers struct {
	DockerAPI
	create func(hc *container.HostConfig) error
	root   string
}

func (e engineAnswers) Info(context.Context) (system.Info, error) {
	return system.Info{DockerRootDir: e.root}, nil
}
func (e engineAnswers) DaemonHost() string { return "unix:///var/run/docker.sock" }
func (e engineAnswers) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	return container.InspectResponse{}, errors.New("Error response from daemon: No such container")
}
func (e engineAnswers) ContainerCreate(_ context.Context, _ *container.Config, hc *container.HostConfig, _ *network.NetworkingConfig, _ *ocispec.Platform, _ string) (container.CreateResponse, error) {
	return container.CreateResponse{}, e.create(hc)
}

// TestHostToolsAsksTheEngine: which folders exist is the Engine's answer
// (its host may not be goalrun's), a folder the policy refuses is left out
// and named, and an Engine that does not answer as expected is an error,
// never a guess.
func TestHostToolsAsksTheEngine(t *testing.T) {
	onEngineHost := map[string]bool{"/usr": true, "/bin": true, "/sbin": true, "/sbin/ldconfig": true, "/opt": true, "/lib64": true, "/etc/ssl/certs": true, "/etc/ld.so.cache": true}
	answer := func(hc *container.HostConfig) error {
		if src := hc.Mounts[0].Source; !onEngineHost[src] {
			return errors.New(`Error response from daemon: invalid mount config for type "bind": bind source path does not exist: ` + src)
		}
		return errors.New(`Error response from daemon: invalid mount config for type "tmpfs": invalid mount path: '` + hc.Mounts[1].Target + `' mount path must be absolute`)
	}
	env := []string{"PATH=/root/.pyenv/shims:/opt/tools/bin:/usr/bin", "HOME=/root", "JAVA_HOME=/opt/jdk", "GOROOT=/root/go"}
	whole := func(_ context.Context, p mountPolicy, candidates []string) (hostPlan, error) {
		var pl hostPlan
		for _, c := range candidates {
			pl.Mounts = append(pl.Mounts, planMount{c, c})
		}
		return pl, nil
	}
	t.Run("what exists on the Engine's host", func(t *testing.T) {
		h, err := HostTools(context.Background(), engineAnswers{create: answer}, HostToolsOptions{Image: "img", Env: env, plan: whole})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range h.Mounts {
			if !m.ReadOnly || !m.EngineHost || m.Source != m.Target {
				t.Errorf("mount %+v: want read-only, at the same path, on the Engine's host", m)
			}
			got = append(got, m.Source)
		}
		if want := "/usr /bin /lib64 /opt /sbin/ldconfig /etc/ld.so.cache /etc/ssl/certs"; strings.Join(got, " ") != want {
			t.Errorf("mounts %q, want %q", got, want)
		}
		if want := "/opt/tools/bin:/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin:/bin"; h.Env["PATH"] != want {
			t.Errorf("PATH %q, want %q", h.Env["PATH"], want)
		}
		if h.Env["JAVA_HOME"] != "/opt/jdk" {
			t.Errorf("JAVA_HOME not carried: %v", h.Env)
		}
		if _, ok := h.Env["GOROOT"]; ok {
			t.Errorf("GOROOT under /root carried: %v", h.Env)
		}
		if len(h.LeftOut) != 0 {
			t.Errorf("left out %+v", h.LeftOut)
		}
	})
	t.Run("the plan decides what is mounted and what is left out", func(t *testing.T) {
		var seen []string
		plan := func(_ context.Context, p mountPolicy, candidates []string) (hostPlan, error) {
			seen = candidates
			if v := p.judge("/var/lib/docker"); v.rel != relIs {
				t.Errorf("the policy does not refuse the Engine's data: %+v", v)
			}
			return hostPlan{Mounts: []planMount{{"/usr", "/usr"}, {"/opt/tools", "/opt/tools"}},
				LeftOut: []LeftOut{{Path: "/opt/docker", Reason: "the Docker Engine's data root", Sealed: true}}}, nil
		}
		h, err := HostTools(context.Background(), engineAnswers{create: answer, root: "/opt/docker"}, HostToolsOptions{Image: "img", Env: env, plan: plan})
		if err != nil {
			t.Fatal(err)
		}
		if want := "/usr /bin /lib64 /opt /sbin/ldconfig /etc/ld.so.cache /etc/ssl/certs"; strings.Join(seen, " ") != want {
			t.Errorf("the plan got %q, want what exists on the Engine's host, %q", seen, want)
		}
		if h.Covers("/opt") || !h.Covers("/opt/tools/bin") || len(h.LeftOut) != 1 || h.LeftOut[0].Path != "/opt/docker" {
			t.Errorf("mounts %+v left out %+v, want /opt/tools mounted and /opt/docker left out", h.Mounts, h.LeftOut)
		}
		if want := "/opt/tools/bin:/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin:/bin"; h.Env["PATH"] != want {
			t.Errorf("PATH %q, want %q", h.Env["PATH"], want)
		}
		if h.Env["JAVA_HOME"] != "" {
			t.Errorf("env %v points into /opt/jdk, which is not mounted", h.Env)
		}
	})
	t.Run("an Engine whose host goalrun cannot see, and no static goalrun to look there", func(t *testing.T) {
		_, err := HostTools(context.Background(), engineAnswers{create: answer}, HostToolsOptions{Image: "img", Env: env})
		if err == nil || !strings.Contains(err.Error(), "cannot see the folders") {
			t.Errorf("error %v, want one saying goalrun cannot look through the Engine host's folders", err)
		}
	})
	for _, tc := range []struct {
		name   string
		answer func(*container.HostConfig) error
		want   string
	}{
		{"an Engine that accepts any source", func(hc *container.HostConfig) error {
			return errors.New("invalid mount path: '" + hc.Mounts[1].Target + "' mount path must be absolute")
		}, "does not say which bind mount sources are missing"},
		{"an Engine that creates the container", func(*container.HostConfig) error { return nil }, "created a container with an invalid mount"},
		{"an Engine failing otherwise", func(*container.HostConfig) error { return errors.New("connection reset") }, "connection reset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli := engineAnswers{create: tc.answer}
			_, err := HostTools(context.Background(), removeOK{cli}, HostToolsOptions{Image: "img", Env: env, plan: whole})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// removeOK lets the fake remove what it "created".
type removeOK struct{ engineAnswers }

func (removeOK) ContainerRemove(context.Context, string, container.RemoveOptions) error { return nil }

// countCreates counts the Engine's container creates (the host-folder
// probe's look-ups).
type countCreates struct {
	engineAnswers
	n *atomic.Int64 // the probe asks in parallel
}

func (c countCreates) ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, p *ocispec.Platform, name string) (container.CreateResponse, error) {
	c.n.Add(1)
	return c.engineAnswers.ContainerCreate(ctx, cfg, hc, nc, p, name)
}

// TestHostToolsRemembersFolders: with EngineFacts, the first look-up asks
// the Engine and remembers its answer; the next skips the Engine's probe
// and mounts the same folders. A remembered answer never adds a mount: it
// only ever names candidates, the mount policy still refuses what it
// refuses, and a planted fact naming other paths mounts nothing more.
// Reprobe asks the Engine again (a remembered folder went away) and
// replaces the fact; another Engine never reads it.
func TestHostToolsRemembersFolders(t *testing.T) {
	onHost := map[string]bool{"/usr": true, "/bin": true, "/opt": true, "/etc/ssl/certs": true}
	answer := func(hc *container.HostConfig) error {
		if src := hc.Mounts[0].Source; !onHost[src] {
			return errors.New(`Error response from daemon: invalid mount config for type "bind": bind source path does not exist: ` + src)
		}
		return errors.New(`Error response from daemon: invalid mount config for type "tmpfs": invalid mount path: '` + hc.Mounts[1].Target + `' mount path must be absolute`)
	}
	env := []string{"PATH=/usr/bin", "HOME=/root"}
	// The Engine's host here is not this machine: candidates are mounted
	// whole unless the policy refuses them (no look through them).
	policyOnly := func(_ context.Context, p mountPolicy, candidates []string) (hostPlan, error) {
		var pl hostPlan
		for _, c := range candidates {
			if v := p.judge(c); v.rel == relNone {
				pl.Mounts = append(pl.Mounts, planMount{c, c})
			} else {
				pl.LeftOut = append(pl.LeftOut, LeftOut{Path: c, Reason: leftOutReason(v), Sealed: true})
			}
		}
		return pl, nil
	}
	facts := EngineFacts{Dir: filepath.Join(t.TempDir(), "engines")}
	info := &system.Info{ID: "ENGINE-A", ServerVersion: "20.10.24", Driver: "overlay2"}
	// The same Engine with its data in /opt: the policy refuses /opt.
	dataInOpt := &system.Info{ID: "ENGINE-A", ServerVersion: "20.10.24", Driver: "overlay2", DockerRootDir: "/opt/docker"}
	mounts := func(h HostToolchain) string {
		var out []string
		for _, m := range h.Mounts {
			out = append(out, m.Source)
		}
		return strings.Join(out, " ")
	}
	look := func(t *testing.T, info *system.Info, reprobe bool, root string) (HostToolchain, int) {
		t.Helper()
		var n atomic.Int64
		h, err := HostTools(context.Background(), countCreates{engineAnswers{create: answer, root: root}, &n}, HostToolsOptions{Image: "img", Env: env, Info: info, Facts: facts, Reprobe: reprobe, plan: policyOnly})
		if err != nil {
			t.Fatal(err)
		}
		return h, int(n.Load())
	}
	const all = "/usr /bin /opt /etc/ssl/certs"
	for _, tc := range []struct {
		name           string
		before         func()
		info           *system.Info
		reprobe        bool
		root           string
		wantProbe      bool
		wantRemembered bool
		wantMounts     string
	}{
		{"first look-up asks the Engine", nil, info, false, "", true, false, all},
		{"next look-up remembers", nil, info, false, "", false, true, all},
		{"another Engine asks", nil, &system.Info{ID: "ENGINE-B"}, false, "", true, false, all},
		{"a remembered folder is gone until re-probed", func() { delete(onHost, "/opt") }, info, false, "", false, true, all},
		{"re-probe replaces the fact", nil, info, true, "", true, false, "/usr /bin /etc/ssl/certs"},
		{"the replaced fact is remembered", nil, info, false, "", false, true, "/usr /bin /etc/ssl/certs"},
		{"a planted fact adds nothing", func() {
			onHost["/opt"] = true
			if err := facts.store(factHostPaths, *dataInOpt, hostPathsKey(hostCandidates()), []string{"/usr", "/opt", "/root", "/var/run/docker.sock", "/home/u/.ssh", "/etc/shadow", "/"}); err != nil {
				t.Fatal(err)
			}
		}, dataInOpt, false, "", false, true, "/usr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before()
			}
			h, n := look(t, tc.info, tc.reprobe, tc.root)
			if (n > 0) != tc.wantProbe {
				t.Errorf("%d Engine look-ups, want a probe: %v", n, tc.wantProbe)
			}
			if h.Remembered != tc.wantRemembered {
				t.Errorf("Remembered %v, want %v", h.Remembered, tc.wantRemembered)
			}
			if got := mounts(h); got != tc.wantMounts {
				t.Errorf("mounts %q, want %q", got, tc.wantMounts)
			}
		})
	}
}

// TestHostToolsStoresNoFactForAnotherEngine: a look-up from a remembered
// Engine info (ConfirmInfo set) keeps the Engine's answer under that
// info's identity only when the live info confirms it: the answer of
// another Engine now behind the same address is not remembered as the
// remembered Engine's, and the next look-up on that info asks again.
func TestHostToolsStoresNoFactForAnotherEngine(t *testing.T) {
	onHost := map[string]bool{"/usr": true, "/bin": true}
	answer := func(hc *container.HostConfig) error {
		if src := hc.Mounts[0].Source; !onHost[src] {
			return errors.New(`Error response from daemon: invalid mount config for type "bind": bind source path does not exist: ` + src)
		}
		return errors.New(`Error response from daemon: invalid mount config for type "tmpfs": invalid mount path: '` + hc.Mounts[1].Target + `' mount path must be absolute`)
	}
	policyOnly := func(_ context.Context, p mountPolicy, candidates []string) (hostPlan, error) {
		var pl hostPlan
		for _, c := range candidates {
			if v := p.judge(c); v.rel == relNone {
				pl.Mounts = append(pl.Mounts, planMount{c, c})
			}
		}
		return pl, nil
	}
	remembered := system.Info{ID: "ENGINE-A", ServerVersion: "20.10.24", Driver: "overlay2"}
	for _, tc := range []struct {
		name      string
		confirm   func(context.Context) error
		wantFacts int
	}{
		{name: "a live info", confirm: nil, wantFacts: 1},
		{name: "a remembered info the live one confirms", confirm: func(context.Context) error { return nil }, wantFacts: 1},
		{name: "a remembered info of another Engine", confirm: func(context.Context) error { return ErrEngineChanged }, wantFacts: 0},
		{name: "a remembered info the live one could not confirm", confirm: func(context.Context) error { return context.DeadlineExceeded }, wantFacts: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			facts := EngineFacts{Dir: filepath.Join(t.TempDir(), "engines")}
			info := remembered
			var n atomic.Int64
			_, err := HostTools(t.Context(), countCreates{engineAnswers{create: answer}, &n}, HostToolsOptions{
				Image: "img", Env: []string{"PATH=/usr/bin", "HOME=/root"}, Info: &info, ConfirmInfo: tc.confirm, Facts: facts, plan: policyOnly})
			if err != nil {
				t.Fatal(err)
			}
			if n.Load() == 0 {
				t.Fatal("the Engine was not asked: the test proves nothing")
			}
			got, err := filepath.Glob(filepath.Join(facts.Dir, factHostPaths+"-*.json"))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.wantFacts {
				t.Errorf("stored facts %q, want %d", got, tc.wantFacts)
			}
		})
	}
}
