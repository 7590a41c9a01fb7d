package dockertest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FakeRunner is a self-hosted GitHub Actions runner's folder as the runner
// lays it out, made by a test in a host system folder (/opt, /usr/local)
// and removed when the test ends: its registration and credentials, a job
// checkout (the workspace) whose .git/config holds the token
// actions/checkout persists, another repository's checkout with its own
// token, the job's temporary files, the runner's logs and .env, and a
// tool cache with one tool. Every secret holds Marker.
type FakeRunner struct {
	// Root is the runner's folder (…/goalrun-test-runner-<random>).
	Root string
	// Workspace is the job's checkout, Root/_work/demo/demo, owned by the
	// uid and gid given.
	Workspace string
	// Tool is an executable script in the tool cache that prints "tool-ok".
	Tool string
	// Marker is in every secret file (and in nothing else), so a search
	// for it finds any secret the sandbox can read.
	Marker string
	// Env is the runner's variables for a job in Workspace
	// (RUNNER_WORKSPACE, GITHUB_WORKSPACE, RUNNER_TEMP, RUNNER_TOOL_CACHE).
	Env map[string]string
}

// NewFakeRunner makes a FakeRunner in parent (created when missing; what
// the test created is removed at its end, including parent when the test
// made it).
func NewFakeRunner(t testing.TB, parent string, uid, gid int) FakeRunner {
	t.Helper()
	marker := "goalrun-secret-" + randomHex(t)
	root := filepath.Join(parent, "goalrun-test-runner-"+randomHex(t))
	removeAtEnd(t, parent, root)
	r := FakeRunner{Root: root, Marker: marker, Workspace: filepath.Join(root, "_work", "demo", "demo")}
	work := filepath.Join(root, "_work")
	r.Tool = filepath.Join(work, "_tool", "goalrun-tool", "1.0.0", "x64", "bin", "tool")
	r.Env = map[string]string{
		"RUNNER_WORKSPACE":  filepath.Join(work, "demo"),
		"GITHUB_WORKSPACE":  r.Workspace,
		"RUNNER_TEMP":       filepath.Join(work, "_temp"),
		"RUNNER_TOOL_CACHE": filepath.Join(work, "_tool"),
	}
	files := map[string]string{
		".runner":                                     `{"agentId": 7, "agentName": "` + marker + `", "gitHubUrl": "https://github.com/o"}`,
		".credentials":                                `{"scheme": "OAuth", "data": {"clientId": "` + marker + `"}}`,
		".credentials_rsaparams":                      `{"d": "` + marker + `"}`,
		".env":                                        "LANG=C.UTF-8\nRUNNER_TOKEN=" + marker + "\n",
		"_diag/Runner_20261201.log":                   "[INFO] token " + marker + "\n",
		"_work/demo/demo/.git/config":                 "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://github.com/o/demo\n[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic " + marker + "\n",
		"_work/demo/demo/.git/HEAD":                   "ref: refs/heads/main\n",
		"_work/demo/demo/main.txt":                    "hello\n",
		"_work/other/other/.git/config":               "[remote \"origin\"]\n\turl = https://x-access-token:" + marker + "@github.com/o/other\n",
		"_work/other/other/.git/HEAD":                 "ref: refs/heads/main\n",
		"_work/_temp/_runner_file_commands/env_1":     "TOKEN=" + marker + "\n",
		"_work/_tool/goalrun-tool/1.0.0/x64/bin/tool": "#!/bin/sh\necho tool-ok\n",
	}
	for rel, body := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(rel, "/tool") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	Chown(t, r.Workspace, uid, gid)
	return r
}

// NewFakeCredentials makes a folder in parent (…/goalrun-test-creds-<random>)
// holding credential files as tools write them (npmrc, pip.conf,
// gitconfig, .docker/config.json, kubeconfig, .env), each with marker,
// and one harmless file, tool.txt; removed when the test ends. It returns
// the folder.
func NewFakeCredentials(t testing.TB, parent, marker string) string {
	t.Helper()
	dir := filepath.Join(parent, "goalrun-test-creds-"+randomHex(t))
	removeAtEnd(t, parent, dir)
	files := map[string]string{
		"npmrc":               "//registry.npmjs.org/:_authToken=" + marker + "\n",
		"pip.conf":            "[global]\nindex-url = https://user:" + marker + "@pypi.example.com/simple\n",
		"gitconfig":           "[credential]\n\thelper = store --file /x/" + marker + "\n",
		".docker/config.json": `{"auths": {"ghcr.io": {"auth": "` + marker + `"}}}`,
		"kubeconfig":          "users:\n- name: x\n  user:\n    token: " + marker + "\n",
		".env":                "API_TOKEN=" + marker + "\n",
		"tool.txt":            "harmless\n",
	}
	for rel, body := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// removeAtEnd removes p (in parent) when the test ends, and parent too
// when it does not exist yet and is empty then.
func removeAtEnd(t testing.TB, parent, p string) {
	t.Helper()
	if _, err := os.Stat(parent); os.IsNotExist(err) {
		t.Cleanup(func() { os.Remove(parent) })
	}
	t.Cleanup(func() { os.RemoveAll(p) })
}

func randomHex(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}
