package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hostTree makes files (path relative to root → content; a value starting
// with "->" makes a symbolic link to the rest, "/" a folder) under root.
func hostTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasPrefix(body, "->"):
			err = os.Symlink(strings.ReplaceAll(body[2:], "ROOT", root), p)
		case body == "/":
			err = os.MkdirAll(p, 0o755)
		default:
			err = os.WriteFile(p, []byte(body), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// testPolicy is the mount policy of a user whose home is nowhere near root.
func testPolicy() mountPolicy {
	return newMountPolicy("/nonexistent-home", func(string) (string, bool) { return "", false }, "unix:///var/run/docker.sock")
}

// relPaths returns ps relative to root, sorted.
func relPaths(root string, ps []string) []string {
	var out []string
	for _, p := range ps {
		out = append(out, strings.TrimPrefix(p, root))
	}
	slices.Sort(out)
	return out
}

// A self-hosted runner's host, in a folder: the runner under /opt, a
// checkout with actions/checkout's token, credential files where tools and
// admins put them, and what only looks like one.
var runnerHost = map[string]string{
	"opt/actions-runner/.runner":                       `{"agentName": "x"}`,
	"opt/actions-runner/.credentials":                  `{"scheme": "OAuth"}`,
	"opt/actions-runner/bin/Runner.Listener":           "elf",
	"opt/actions-runner/_work/demo/demo/.git/config":   "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldA==\n",
	"opt/actions-runner/_work/other/other/.git/config": "[remote \"origin\"]\n\turl = https://x-access-token:ghs_other@github.com/o/other\n",
	"opt/tools/bin/tool":                               "elf",
	"opt/app/.env":                                     "DATABASE_PASSWORD=hunter2\n",
	"opt/venv/.env/bin/python":                         "elf",
	"opt/k/.config/gcloud/credentials.db":              "sqlite",
	"opt/k/.config/other/settings":                     "{}",
	"opt/link-to-runner":                               "->ROOT/opt/actions-runner/_work",
	"opt/link-to-tools":                                "->ROOT/opt/tools",
	"opt/link-outside":                                 "->/etc/ssl/certs",
	"opt/dangling":                                     "->ROOT/nowhere",
	"usr/bin/python3":                                  "elf",
	"usr/etc/npmrc":                                    "registry=https://registry.npmjs.org/\n",
	"usr/local/etc/npmrc":                              "//registry.npmjs.org/:_authToken=npm_abcdef\n",
	"usr/local/etc/other.conf":                         "x=1\n",
	"usr/local/bin/tool":                               "elf",
	"usr/share/maven/conf/settings.xml":                "<settings>\n<!--\n <server><id>x</id><password>repopwd</password></server>\n-->\n</settings>\n",
	"usr/share/vcpkg/.git/config":                      "[remote \"origin\"]\n\turl = https://github.com/microsoft/vcpkg\n",
	"usr/share/app/.git/config":                        "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: bearer x\n",
	"usr/share/app/README":                             "hi",
	"usr/lib/jvm/management/jmxremote.password":        "monitorRole QED\n",
	"usr/lib/jvm/management/jmxremote.access":          "monitorRole readonly\n",
	"usr/lib/sdk/jetty/jmx.d/jmxremote.password":       "# monitorRole  QED\n# controlRole  R&D\n",
	"usr/share/conda/.condarc":                         "channels:\n  - https://conda.anaconda.org/t/abcdefgh1234/private\n",
	"usr/share/pip/pip.conf":                           "[global]\nindex-url = https://user:pass@pypi.example.com/simple\n",
	"usr/share/link/npmrc":                             "->../../local/etc/other.conf",
}

func TestScanHost(t *testing.T) {
	root := t.TempDir()
	hostTree(t, root, runnerHost)
	hits := scanHost([]string{filepath.Join(root, "usr"), filepath.Join(root, "opt")}, nil, nil)
	var got []string
	for _, h := range hits {
		got = append(got, strings.TrimPrefix(h.Path, root)+": "+h.Reason)
		if !h.Sealed {
			t.Errorf("%s is not sealed", h.Path)
		}
	}
	want := []string{
		"/opt/actions-runner: a GitHub Actions runner's folder (it holds .credentials)",
		"/opt/app/.env: a configuration file holding a credential (.env)",
		"/opt/k/.config/gcloud: a credential file or folder (…/.config/gcloud)",
		"/usr/lib/jvm/management/jmxremote.password: a configuration file holding a credential (jmxremote.password)",
		"/usr/local/etc/npmrc: a configuration file holding a credential (npmrc)",
		"/usr/share/app/.git/config: a configuration file holding a credential (.git/config)",
		"/usr/share/conda/.condarc: a configuration file holding a credential (.condarc)",
		"/usr/share/link/npmrc: a configuration file that may hold a credential (npmrc), a symbolic link",
		"/usr/share/pip/pip.conf: a configuration file holding a credential (pip.conf)",
	}
	// Which runner marker is seen first depends on the folder's order.
	for i, g := range got {
		if strings.HasPrefix(g, "/opt/actions-runner:") {
			got[i] = "/opt/actions-runner: a GitHub Actions runner's folder (it holds .credentials)"
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("hits:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPlanSplitsAroundWhatIsPrivate: the runner's host above, its /usr and
// /opt as the candidates, the workspace a checkout in the runner's _work.
// Nothing private is mounted, everything else is, child by child.
func TestPlanSplitsAroundWhatIsPrivate(t *testing.T) {
	root := t.TempDir()
	hostTree(t, root, runnerHost)
	ws := filepath.Join(root, "opt/actions-runner/_work/demo/demo")
	p := testPolicy().withKeepOuts(runKeepOuts(func(string) (string, bool) { return "", false }, func(p string) (string, bool) { return p, true }, ws))
	pl := scanAndPlan(p, []string{filepath.Join(root, "usr"), filepath.Join(root, "opt")}, nil)
	var mounts []string
	for _, m := range pl.Mounts {
		if m.Source != m.Target {
			t.Errorf("mount %s at %s: want the same path", m.Source, m.Target)
		}
		mounts = append(mounts, m.Source)
	}
	wantMounts := []string{
		"/opt/k/.config/other", "/opt/link-to-tools", "/opt/tools", "/opt/venv",
		"/usr/bin", "/usr/etc", "/usr/lib/jvm/management/jmxremote.access", "/usr/lib/sdk",
		"/usr/local/bin",
		"/usr/share/app/README", "/usr/share/maven", "/usr/share/vcpkg",
	}
	if got := relPaths(root, mounts); !slices.Equal(got, wantMounts) {
		t.Errorf("mounts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantMounts, "\n"))
	}
	var left []string
	for _, l := range pl.LeftOut {
		left = append(left, strings.TrimPrefix(l.Path, root))
	}
	wantLeft := []string{
		"/opt/actions-runner", "/opt/app/.env", "/opt/k/.config/gcloud", "/opt/link-outside", "/opt/link-to-runner",
		"/usr/lib/jvm/management/jmxremote.password", "/usr/local/etc/npmrc",
		// The file npmrc leads to is npm's configuration, unread.
		"/usr/local/etc/other.conf",
		"/usr/share/app/.git/config",
		"/usr/share/conda/.condarc", "/usr/share/link/npmrc", "/usr/share/pip/pip.conf",
	}
	if !slices.Equal(left, wantLeft) {
		t.Errorf("left out:\n%s\nwant:\n%s", strings.Join(left, "\n"), strings.Join(wantLeft, "\n"))
	}
	for _, l := range pl.LeftOut {
		if strings.HasSuffix(l.Path, "/link-to-runner") && !strings.Contains(l.Reason, "runner's folder") {
			t.Errorf("%s: %s, want the runner's folder it leads into", l.Path, l.Reason)
		}
	}
	// Whatever is mounted, nothing private is reachable through it.
	for _, m := range pl.Mounts {
		real, _ := filepath.EvalSymlinks(m.Source)
		_ = filepath.Walk(real, func(p string, info os.FileInfo, err error) error {
			for _, secret := range []string{"actions-runner", ".env", "gcloud", "management/jmxremote.password", "usr/local/etc/npmrc", "app/.git/config", ".condarc", "pip.conf"} {
				if strings.Contains(p, secret) && !(secret == ".env" && strings.Contains(p, "venv")) {
					t.Errorf("mount %s shows %s", m.Source, p)
				}
			}
			return nil
		})
	}
}

// TestPlanKeepsTheRunnersOwnFolders: a runner with no marker files in
// sight (its registration elsewhere, as in a container), found by its
// variables alone: RUNNER_WORKSPACE, the work folder above it with the
// other checkouts, RUNNER_TEMP stay out; RUNNER_TOOL_CACHE inside the work
// folder is mounted.
func TestPlanKeepsTheRunnersOwnFolders(t *testing.T) {
	root := t.TempDir()
	hostTree(t, root, map[string]string{
		"opt/r/bin/Runner.Worker":                    "elf",
		"opt/r/_work/demo/demo/.git/HEAD":            "ref: refs/heads/main\n",
		"opt/r/_work/other/other/.git/HEAD":          "ref: refs/heads/main\n",
		"opt/r/_work/_temp/_runner_file_commands/x":  "GITHUB_TOKEN=x",
		"opt/r/_work/_tool/go/1.26.0/x64/bin/go":     "elf",
		"opt/r/_work/_actions/actions/checkout/v4/x": "js",
		"opt/hostedtoolcache/node/22/x64/bin/node":   "elf",
	})
	work := filepath.Join(root, "opt/r/_work")
	env := map[string]string{
		"RUNNER_WORKSPACE":  filepath.Join(work, "demo"),
		"GITHUB_WORKSPACE":  filepath.Join(work, "demo/demo"),
		"RUNNER_TEMP":       filepath.Join(work, "_temp"),
		"RUNNER_TOOL_CACHE": filepath.Join(work, "_tool"),
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	p := testPolicy().withKeepOuts(runKeepOuts(lookup, func(p string) (string, bool) { return p, true }, filepath.Join(work, "demo/demo")))
	pl := scanAndPlan(p, []string{filepath.Join(root, "opt")}, nil)
	var mounts, left []string
	for _, m := range pl.Mounts {
		mounts = append(mounts, m.Source)
	}
	for _, l := range pl.LeftOut {
		left = append(left, strings.TrimPrefix(l.Path, root)+": "+l.Reason)
	}
	if want := []string{"/opt/hostedtoolcache", "/opt/r/_work/_tool", "/opt/r/bin"}; !slices.Equal(relPaths(root, mounts), want) {
		t.Errorf("mounts %q, want %q", relPaths(root, mounts), want)
	}
	want := []string{
		"/opt/r/_work/_actions: inside " + work + ", the runner's work folder, with every repository's checkout (above RUNNER_WORKSPACE)",
		"/opt/r/_work/_temp: the runner's temporary folder (RUNNER_TEMP)",
		"/opt/r/_work/demo: the runner's workspace (RUNNER_WORKSPACE)",
		"/opt/r/_work/other: inside " + work + ", the runner's work folder, with every repository's checkout (above RUNNER_WORKSPACE)",
	}
	if !slices.Equal(left, want) {
		t.Errorf("left out:\n%s\nwant:\n%s", strings.Join(left, "\n"), strings.Join(want, "\n"))
	}
}

func TestRunKeepOuts(t *testing.T) {
	root := t.TempDir()
	hostTree(t, root, map[string]string{"repo/.git/HEAD": "ref: refs/heads/main\n", "repo/sub/x": "x"})
	same := func(p string) (string, bool) { return p, true }
	// A cache folder reached through a link, goalrun's folders not made
	// in it yet (a first run): the keep-outs name where they will be.
	if err := os.Mkdir(filepath.Join(root, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "data"), filepath.Join(root, "cachelink")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		env       map[string]string
		workspace string
		hostPath  func(string) (string, bool)
		want      []string
	}{
		{"a developer's machine: the workspace, the repository above it, goalrun's cache and TMPDIR",
			map[string]string{"HOME": "/home/u", "TMPDIR": "/var/tmp/u"}, filepath.Join(root, "repo/sub"), same,
			[]string{"sealed " + root + "/repo/sub", "sealed " + root + "/repo", "above /home/u/.cache/goalrun", "sealed /home/u/.cache/goalrun/views", "above /var/tmp/u"}},
		{"XDG_CACHE_HOME and no TMPDIR",
			map[string]string{"XDG_CACHE_HOME": "/opt/cache"}, "", same,
			[]string{"above /opt/cache/goalrun", "sealed /opt/cache/goalrun/views", "above /tmp"}},
		{"GitHub's hosted runner: the tool cache is /opt's, /opt stays a system folder",
			map[string]string{"HOME": "/home/runner", "RUNNER_WORKSPACE": "/home/runner/work/demo", "RUNNER_TEMP": "/home/runner/work/_temp",
				"RUNNER_TOOL_CACHE": "/opt/hostedtoolcache", "GITHUB_WORKSPACE": "/home/runner/work/demo/demo"}, "", same,
			[]string{"above /home/runner/.cache/goalrun", "sealed /home/runner/.cache/goalrun/views", "above /tmp", "sealed /home/runner/work/demo", "sealed /home/runner/work",
				"sealed /home/runner/work/_temp", "sealed /home/runner/work/demo/demo", "allowed /opt/hostedtoolcache"}},
		{"a self-hosted runner under /opt",
			map[string]string{"RUNNER_WORKSPACE": "/opt/actions-runner/_work/demo", "RUNNER_TEMP": "/opt/actions-runner/_work/_temp",
				"RUNNER_TOOL_CACHE": "/opt/actions-runner/_work/_tool"}, "", same,
			[]string{"above /tmp", "sealed /opt/actions-runner/_work/demo", "sealed /opt/actions-runner/_work", "sealed /opt/actions-runner/_work/_temp",
				"sealed /opt/actions-runner/_work", "allowed /opt/actions-runner/_work/_tool"}},
		{"goalrun in a container: paths the Engine's host knows otherwise are translated, others dropped",
			map[string]string{"RUNNER_TEMP": "/__w/_temp", "TMPDIR": "/tmp", "RUNNER_TOOL_CACHE": "/__t"}, "", func(p string) (string, bool) {
				if rest, ok := strings.CutPrefix(p, "/__w/"); ok {
					return "/opt/actions-runner/_work/" + rest, true
				}
				if p == "/__t" {
					return "/opt/actions-runner/_work/_tool", true
				}
				return "", false
			},
			[]string{"sealed /opt/actions-runner/_work/_temp", "sealed /opt/actions-runner/_work", "allowed /opt/actions-runner/_work/_tool"}},
		{"XDG_CACHE_HOME a link, goalrun's folders not made yet: where they will be",
			map[string]string{"XDG_CACHE_HOME": filepath.Join(root, "cachelink")}, "", same,
			[]string{"above " + root + "/data/goalrun", "sealed " + root + "/data/goalrun/views", "above /tmp"}},
		{"relative and empty values are ignored",
			map[string]string{"RUNNER_TEMP": "tmp", "RUNNER_WORKSPACE": "", "TMPDIR": "rel"}, "", same,
			[]string{"above /tmp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			var got []string
			for _, k := range runKeepOuts(lookup, tc.hostPath, tc.workspace) {
				got = append(got, []string{"sealed", "above", "allowed"}[k.kind]+" "+k.path)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("keep-outs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestConfigHoldsCredential: configuration files as tools write them.
func TestConfigHoldsCredential(t *testing.T) {
	for _, tc := range []struct {
		name, file, body string
		holds            bool
	}{
		{"npm's token for a registry", "npmrc", "//registry.npmjs.org/:_authToken=npm_x\n", true},
		{"npm's basic auth", ".npmrc", "_auth=dXNlcjpwYXNz\n", true},
		{"npm with a registry only", "npmrc", "registry=https://registry.npmjs.org/\nprefix=/usr/local\n", false},
		{"npm's token in a comment only", "npmrc", "# _authToken=put yours here\nregistry=https://r.example/\n", false},
		{"pip with a password in the index URL", "pip.conf", "[global]\nindex-url = https://u:p@pypi.example.com/simple\n", true},
		{"pip with a token as the user", "pip.conf", "[global]\nextra-index-url = https://ghp_token@pypi.example.com/simple\n", true},
		{"pip with a plain index", "pip.conf", "[global]\nindex-url = https://pypi.org/simple\ntimeout = 60\n", false},
		{"conda with a channel token", ".condarc", "channels:\n  - https://conda.anaconda.org/t/ab-12345678/private\n", true},
		{"conda with public channels", "condarc", "channels:\n  - conda-forge\n  - defaults\n", false},
		{"git's extraheader", "config", "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic x\n", true},
		{"git's credential store", "gitconfig", "[credential]\n\thelper = store\n", true},
		{"git with a plain remote", "config", "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://github.com/o/r\n", false},
		{"git's safe.directory", "gitconfig", "[safe]\n\tdirectory = *\n", false},
		{"NuGet's credentials", "NuGet.Config", "<configuration><packageSourceCredentials><feed><add key=\"ClearTextPassword\" value=\"x\" /></feed></packageSourceCredentials></configuration>", true},
		{"NuGet's sources only", "nuget.config", "<configuration><packageSources><add key=\"nuget.org\" value=\"https://api.nuget.org/v3/index.json\" /></packageSources></configuration>", false},
		{"Maven's default settings, examples commented out", "settings.xml", "<settings>\n<!--\n<server><username>u</username><password>repopwd</password></server>\n-->\n</settings>", false},
		{"Maven's settings with a server password", "settings.xml", "<settings><servers><server><id>x</id><password>p</password></server></servers></settings>", true},
		{"Yarn's npmAuthToken", ".yarnrc.yml", "npmAuthToken: x\n", true},
		{"an application's .env", ".env", "DATABASE_URL=postgres://app:s3cret@db/app\n", true},
		{"an application's .env with an API key", ".env", "STRIPE_API_KEY=sk_live_x\n", true},
		{"a .env of plain settings", ".env", "PORT=8080\nLOG_LEVEL=debug\n", false},
		{"a JMX password file", "jmxremote.password", "# roles\nmonitorRole QED\n", true},
		{"a JMX password template, all comments", "jmxremote.password", "# monitorRole  QED\n# controlRole   R&D\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := configHoldsCredential(tc.file, []byte(tc.body)); got != tc.holds {
				t.Errorf("configHoldsCredential(%s, %q) = %v, want %v", tc.file, tc.body, got, tc.holds)
			}
		})
	}
}

// TestPlanLimits: a folder that would split into more than maxSplitEntries
// mounts is left out whole, and so is one goalrun cannot list.
func TestPlanLimits(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{"wide/.env": "SECRET=x"}
	for i := 0; i < maxSplitEntries; i++ {
		files[fmt.Sprintf("wide/f%03d", i)] = "x"
	}
	files["narrow/.env"] = "SECRET=x"
	files["narrow/bin/x"] = "x"
	hostTree(t, root, files)
	pl := scanAndPlan(testPolicy(), []string{filepath.Join(root, "wide"), filepath.Join(root, "narrow")}, nil)
	var left []string
	for _, l := range pl.LeftOut {
		left = append(left, strings.TrimPrefix(l.Path, root)+": "+l.Reason)
	}
	want := []string{
		"/narrow/.env: a configuration file holding a credential (.env)",
		"/wide: it holds " + root + "/wide/.env, and has too many entries to mount one by one",
	}
	if !slices.Equal(left, want) {
		t.Errorf("left out:\n%s\nwant:\n%s", strings.Join(left, "\n"), strings.Join(want, "\n"))
	}
	if len(pl.Mounts) != 1 || pl.Mounts[0].Source != filepath.Join(root, "narrow/bin") {
		t.Errorf("mounts %+v, want narrow/bin only", pl.Mounts)
	}
}

// TestPlanToolCacheInARunnersFolder: the runner's own folder is left out
// but the tool cache inside it (RUNNER_TOOL_CACHE) is mounted — and looked
// through like any other folder.
func TestPlanToolCacheInARunnersFolder(t *testing.T) {
	root := t.TempDir()
	hostTree(t, root, map[string]string{
		"opt/runner/.runner":                           "{}",
		"opt/runner/_work/_tool/node/22/x64/bin/node":  "elf",
		"opt/runner/_work/_tool/node/22/x64/etc/npmrc": "//npm.example.com/:_authToken=x\n",
		"opt/runner/_work/_tool/node/22/x64/lib/x":     "x",
		"opt/runner/_work/demo/demo/x":                 "x",
	})
	env := map[string]string{"RUNNER_TOOL_CACHE": filepath.Join(root, "opt/runner/_work/_tool")}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	p := testPolicy().withKeepOuts(runKeepOuts(lookup, func(p string) (string, bool) { return p, true }, ""))
	pl := scanAndPlan(p, []string{filepath.Join(root, "opt")}, nil)
	var mounts, left []string
	for _, m := range pl.Mounts {
		mounts = append(mounts, m.Source)
	}
	for _, l := range pl.LeftOut {
		left = append(left, l.Path)
	}
	if want := []string{"/opt/runner/_work/_tool/node/22/x64/bin", "/opt/runner/_work/_tool/node/22/x64/lib"}; !slices.Equal(relPaths(root, mounts), want) {
		t.Errorf("mounts %q, want %q", relPaths(root, mounts), want)
	}
	if want := []string{"/opt/runner/.runner", "/opt/runner/_work/_tool/node/22/x64/etc/npmrc", "/opt/runner/_work/demo"}; !slices.Equal(relPaths(root, left), want) {
		t.Errorf("left out %q, want %q", relPaths(root, left), want)
	}
}
