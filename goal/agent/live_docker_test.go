package agent

// Live tests inside the Docker sandbox: the real Claude Code and Codex
// native binaries (NativeExecutable) bind-mounted read-only into the
// hardened agent container, network "egress", the model API reached only
// through goalrun's proxy (which adds the real key; the sandbox holds
// sandbox.DummyKey), package scripted's server as the upstream. Skipped
// without an Engine unless GOALRUN_REQUIRE_DOCKER=1, and without the CLIs
// unless GOALRUN_REQUIRE_AGENTS=1.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/goal/agent/scripted"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
	"github.com/goalrun/goalrun/sandbox/egress"
)

// inContainerAgent is where the tests mount an agent's native binary.
const inContainerAgent = "/opt/goalrun-test/agent"

// startDockerEgress starts a Docker sandbox in egress mode on a workspace
// owned by the sandbox user, with native mounted at inContainerAgent and up
// served by the proxy (loopback upstreams allowed: package scripted listens on
// 127.0.0.1). It returns the sandbox and the workspace's host path.
func startDockerEgress(t *testing.T, native Native, up sandbox.Upstream) (*sandbox.Docker, string) {
	t.Helper()
	return startDockerEgressWith(t, native, up, []sandbox.Mount{{Source: native.Path, Target: inContainerAgent, ReadOnly: true}}, nil)
}

// startDockerEgressWith is startDockerEgress with the given mounts and
// agent files (native only decides the image's libraries).
func startDockerEgressWith(t *testing.T, native Native, up sandbox.Upstream, mounts []sandbox.Mount, files []sandbox.AgentFile) (*sandbox.Docker, string) {
	t.Helper()
	cli := dockertest.Client(t)
	var libsFor []string
	if !native.Static() {
		libsFor = append(libsFor, native.Path)
	}
	spec := sandbox.DefaultImageSpec(libsFor...)
	spec.Labels = map[string]string{"goalrun.test": "agents"}
	bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer bcancel()
	start := time.Now()
	image, err := sandbox.BuildImage(bctx, cli, spec)
	if err != nil {
		t.Fatalf("building the sandbox image: %v", err)
	}
	t.Logf("image %s ready in %v", image, time.Since(start).Round(time.Millisecond))
	ws := dockertest.Workspace(t, sandbox.DefaultUID, sandbox.DefaultGID)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb, err := sandbox.StartDocker(ctx, cli, sandbox.Config{
		RunID:         dockertest.RunID(t),
		Workspace:     ws,
		Network:       sandbox.NetworkEgress,
		Upstreams:     []sandbox.Upstream{up},
		Image:         image,
		RelayBinary:   dockertest.GoalrunBinary(t),
		WorkspaceMode: sandbox.WorkspaceBind,
		Mounts:        mounts,
		AgentFiles:    files,
	}, sandbox.WithEgressConfig(func(c *egress.Config) { c.AllowLoopbackUpstreams = true }))
	if err != nil {
		t.Fatalf("StartDocker: %v", err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		sb.Close(cctx)
	})
	return sb, ws
}

// agentEnv reads a variable of the agent environment inside the sandbox.
func agentEnv(t *testing.T, sb sandbox.Sandbox, name string) string {
	t.Helper()
	var out strings.Builder
	res, err := sb.Exec(context.Background(), sandbox.Cmd{Role: sandbox.RoleAgent, Args: sandbox.Shell(`printf %s "$` + name + `"`), Stdout: &out, Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("reading $%s in the sandbox: %v (exit %d)", name, err, res.ExitCode)
	}
	return out.String()
}

// checkKeys asserts the upstream saw only the real key, and the sandbox only
// the dummy one.
func checkKeys(t *testing.T, sb *sandbox.Docker, srv *scripted.Server, keyEnv, realKey string) {
	t.Helper()
	if got := agentEnv(t, sb, keyEnv); got != sandbox.DummyKey {
		t.Errorf("$%s inside the sandbox is %q, want the dummy key", keyEnv, got)
	}
	if s := sb.Posture().SecretsInSandbox; len(s) != 0 {
		t.Errorf("secrets in the sandbox: %v", s)
	}
	reqs := srv.ModelRequests()
	if len(reqs) == 0 {
		t.Fatal("the model API saw no request")
	}
	for _, r := range reqs {
		if r.Key() != realKey {
			t.Errorf("request %d reached the model API with key %q, want the real key", r.N, r.Key())
		}
	}
}

func TestLiveDockerClaudeEditsAndResumes(t *testing.T) {
	native, err := NativeExecutable(ClaudeSpec, OSFS{}, findAgentBin(t, "claude", "GOALRUN_CLAUDE_BIN"))
	if err != nil {
		t.Fatal(err)
	}
	srv := scripted.NewAnthropic(scripted.Script{
		Pick: scripted.ByAssistantTurns,
		Replies: []scripted.Reply{
			{Tools: []scripted.ToolCall{{Name: "Write", Input: map[string]any{"file_path": sandbox.DockerRoot + "/hello.txt", "content": "hello from a sandboxed claude\n"}}}},
			{Text: "Wrote hello.txt."},
			{Tools: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": "cat hello.txt >> log.txt", "description": "append"}}}},
			{Text: "Appended."},
		},
	})
	defer srv.Close()
	up := AnthropicAPI.Upstream("real-anthropic-key")
	up.URL = srv.URL
	sb, ws := startDockerEgress(t, native, up)

	t1 := runLiveTurn(t, sb, Claude{}, Turn{Iteration: 1, Prompt: "Create hello.txt (first turn)", Bin: inContainerAgent})
	if t1.res.Status != StatusSuccess || t1.res.SessionID == "" {
		t.Fatalf("turn 1: %+v", t1.res)
	}
	if len(t1.receipts) != 1 || t1.receipts[0].Name != "Write" || !t1.receipts[0].OK || strings.Join(t1.receipts[0].Paths, ",") != "hello.txt" {
		t.Errorf("turn 1 receipts %+v", t1.receipts)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(b) != "hello from a sandboxed claude\n" {
		t.Fatalf("hello.txt on the host: %q, %v", b, err)
	}
	n1 := len(srv.ModelRequests())
	t2 := runLiveTurn(t, sb, Claude{}, Turn{Iteration: 2, Prompt: "Append it to log.txt (second turn)", Bin: inContainerAgent, SessionID: t1.res.SessionID})
	if t2.res.Status != StatusSuccess || t2.res.SessionID != t1.res.SessionID {
		for _, ev := range t2.events {
			t.Logf("turn 2 event %+v", ev)
		}
		for _, r := range srv.ModelRequests()[n1:] {
			t.Logf("turn 2 request %d at %s: %d tool results, reply %d", r.N, r.Time.Format("15:04:05.000"), r.ToolResults, r.Reply)
		}
		t.Fatalf("turn 2: %+v (step %+v)", t2.res, t2.step)
	}
	if len(t2.receipts) != 1 || t2.receipts[0].Name != "Bash" || !t2.receipts[0].OK {
		t.Errorf("turn 2 receipts %+v", t2.receipts)
	}
	if reqs := srv.ModelRequests()[n1:]; len(reqs) == 0 || !reqs[0].Contains("first turn") || reqs[0].ToolResults < 1 {
		t.Errorf("turn 2 did not resume the conversation")
	}
	checkKeys(t, sb, srv, AnthropicAPI.KeyEnv, "real-anthropic-key")
	if p := sb.Posture(); p.Network != sandbox.NetworkEgress || p.EgressDenied != 0 {
		t.Errorf("posture: network %s, %d denied (%v)", p.Network, p.EgressDenied, p.EgressDenials)
	}
}

func TestLiveDockerCodexEditsAndResumes(t *testing.T) {
	native, err := NativeExecutable(CodexSpec, OSFS{}, findAgentBin(t, "codex", "GOALRUN_CODEX_BIN"))
	if err != nil {
		t.Fatal(err)
	}
	if !native.Static() {
		t.Fatalf("codex resolved to a dynamic binary %s (interp %s)", native.Path, native.Interp)
	}
	srv := scripted.NewOpenAI(scripted.Script{
		Pick: scripted.ByAssistantTurns,
		Replies: []scripted.Reply{
			{Tools: []scripted.ToolCall{{Name: "exec_command", Input: map[string]any{"cmd": "printf 'hello from a sandboxed codex\\n' > hello.txt"}}}},
			{Text: "Wrote hello.txt."},
			{Tools: []scripted.ToolCall{{Name: "exec_command", Input: map[string]any{"cmd": "cat hello.txt >> log.txt"}}}},
			{Text: "Appended."},
		},
	})
	defer srv.Close()
	up := OpenAIAPI.Upstream("real-openai-key")
	up.URL = srv.URL
	// Codex takes its base URL on the command line; give the upstream a
	// variable only so the test can read the in-sandbox address.
	up.BaseURLEnv = "GOALRUN_TEST_OPENAI_BASE_URL"
	sb, ws := startDockerEgress(t, native, up)
	base := agentEnv(t, sb, up.BaseURLEnv)
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("in-sandbox base URL %q", base)
	}

	turn := Turn{Iteration: 1, Prompt: "Create hello.txt (first turn)", Bin: inContainerAgent, Model: "gpt-agenttest", BaseURL: base}
	t1 := runLiveTurn(t, sb, Codex{}, turn)
	if t1.res.Status != StatusSuccess || t1.res.SessionID == "" {
		t.Fatalf("turn 1: %+v", t1.res)
	}
	if len(t1.receipts) != 1 || t1.receipts[0].Name != "command_execution" || !t1.receipts[0].OK {
		t.Errorf("turn 1 receipts %+v", t1.receipts)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(b) != "hello from a sandboxed codex\n" {
		t.Fatalf("hello.txt on the host: %q, %v", b, err)
	}
	n1 := len(srv.ModelRequests())
	turn.Iteration, turn.Prompt, turn.SessionID = 2, "Append it to log.txt (second turn)", t1.res.SessionID
	t2 := runLiveTurn(t, sb, Codex{}, turn)
	if t2.res.Status != StatusSuccess || t2.res.SessionID != t1.res.SessionID {
		t.Fatalf("turn 2: %+v", t2.res)
	}
	if reqs := srv.ModelRequests()[n1:]; len(reqs) == 0 || !reqs[0].Contains("first turn") || reqs[0].ToolResults < 1 {
		t.Errorf("turn 2 did not resume the conversation")
	}
	checkKeys(t, sb, srv, OpenAIAPI.KeyEnv, "real-openai-key")
}

// inContainerGemini is where the Gemini CLI's npm package is mounted.
const inContainerGemini = "/opt/goalrun-test/gemini"

// TestLiveDockerGeminiEditsAndResumes runs the real Gemini CLI (a Node.js
// program: its npm package and the host's node mounted read-only) in the
// egress sandbox, with its settings as goalrun provides them: the
// root-owned, read-only /etc/gemini-cli/settings.json. The key is added by
// the proxy; a normal run has no egress denial (no telemetry).
func TestLiveDockerGeminiEditsAndResumes(t *testing.T) {
	bin := findAgentBin(t, "gemini", "GOALRUN_GEMINI_BIN")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the Gemini CLI needs node on PATH: %v", err)
	}
	native, err := NodeProgram(GeminiSpec, OSFS{}, bin, node)
	if err != nil {
		t.Fatal(err)
	}
	srv := scripted.NewGemini(scripted.Script{
		Pick: scripted.ByAssistantTurns,
		Replies: []scripted.Reply{
			{Tools: []scripted.ToolCall{{Name: "write_file", Input: map[string]any{"file_path": sandbox.DockerRoot + "/hello.txt", "content": "hello from a sandboxed gemini\n"}}}},
			{Text: "Wrote hello.txt."},
			{Tools: []scripted.ToolCall{{Name: "run_shell_command", Input: map[string]any{"command": "cat hello.txt >> log.txt", "description": "append"}}}},
			{Text: "Appended."},
		},
	})
	defer srv.Close()
	up := GeminiAPI.Upstream("real-gemini-key")
	up.URL = srv.URL
	sb, ws := startDockerEgressWith(t, native, up, []sandbox.Mount{
		{Source: native.Package, Target: inContainerGemini, ReadOnly: true},
		{Source: native.Path, Target: "/usr/local/bin/node", ReadOnly: true},
	}, GeminiSpec.Files)
	entry := inContainerGemini + "/" + native.Entry

	t1 := runLiveTurn(t, sb, Gemini{}, Turn{Iteration: 1, Prompt: "Create hello.txt (first turn)", Bin: entry})
	if t1.res.Status != StatusSuccess || t1.res.SessionID == "" {
		t.Fatalf("turn 1: %+v; stderr %s", t1.res, t1.stderr)
	}
	if len(t1.receipts) != 1 || t1.receipts[0].Name != "write_file" || !t1.receipts[0].OK {
		t.Errorf("turn 1 receipts %+v", t1.receipts)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(b) != "hello from a sandboxed gemini\n" {
		t.Fatalf("hello.txt on the host: %q, %v", b, err)
	}
	n1 := len(srv.ModelRequests())
	t2 := runLiveTurn(t, sb, Gemini{}, Turn{Iteration: 2, Prompt: "Append it to log.txt (second turn)", Bin: entry, SessionID: t1.res.SessionID})
	if t2.res.Status != StatusSuccess || t2.res.SessionID != t1.res.SessionID {
		t.Fatalf("turn 2: %+v; stderr %s", t2.res, t2.stderr)
	}
	if len(t2.receipts) != 1 || t2.receipts[0].Name != "run_shell_command" || !t2.receipts[0].OK {
		t.Errorf("turn 2 receipts %+v", t2.receipts)
	}
	if reqs := srv.ModelRequests()[n1:]; len(reqs) == 0 || !reqs[0].Contains("first turn") || reqs[0].ToolResults < 1 {
		t.Errorf("turn 2 did not resume the conversation")
	}
	for _, r := range srv.Requests() {
		if k := r.Header.Get("x-goog-api-key"); k != "real-gemini-key" {
			t.Errorf("request %d reached the model API with key %q, want the real key", r.N, k)
		}
	}
	if got := agentEnv(t, sb, GeminiAPI.KeyEnv); got != sandbox.DummyKey {
		t.Errorf("$%s inside the sandbox is %q, want the dummy key", GeminiAPI.KeyEnv, got)
	}
	if p := sb.Posture(); p.Network != sandbox.NetworkEgress || p.EgressDenied != 0 || len(p.SecretsInSandbox) != 0 {
		t.Errorf("posture: network %s, %d denied (%v), secrets %v", p.Network, p.EgressDenied, p.EgressDenials, p.SecretsInSandbox)
	}
}
