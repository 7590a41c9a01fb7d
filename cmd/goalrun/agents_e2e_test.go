package main

// The agents through `goalrun run` as a user runs it (the built static
// binary): a model gateway in Docker egress and on the local host, and a
// Gemini retry storm. The gateway tests: the built static binary,
// the Docker sandbox with network egress, the real agent CLI, and a
// scripted model gateway on this machine's loopback — reachable only
// because it is named as the gateway.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goalrun/goalrun/goal/agent"
	"github.com/goalrun/goalrun/goal/agent/scripted"
	"github.com/goalrun/goalrun/report/reporttest"
	"github.com/goalrun/goalrun/sandbox"
	"github.com/goalrun/goalrun/sandbox/dockertest"
	"github.com/goalrun/goalrun/sandbox/egress/egresstest"
)

// agentCLI returns the pinned agent CLI named by env (else name on PATH),
// or skips naming the condition (fails with GOALRUN_REQUIRE_AGENTS=1).
func agentCLI(t *testing.T, name, env string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", env, p, err)
		}
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	msg := "agent CLI " + name + " unavailable: " + env + " is unset and " + name + " is not on PATH"
	if os.Getenv("GOALRUN_REQUIRE_AGENTS") == "1" {
		t.Fatal(msg + " (GOALRUN_REQUIRE_AGENTS=1)")
	}
	t.Skip(msg)
	return ""
}

func TestModelGatewayOnLoopbackDockerEgress(t *testing.T) {
	dockerEngine(t)
	bin := dockertest.GoalrunBinary(t)
	const key = "real-gateway-key"
	cases := []struct {
		agent, env, keyEnv string
		server             func(scripted.Script) *scripted.Server
		write              scripted.ToolCall
		args               []string
		model              string // model_used wanted ("" = the one the server saw)
	}{
		{"claude", "GOALRUN_CLAUDE_BIN", "ANTHROPIC_API_KEY", scripted.NewAnthropic,
			scripted.ToolCall{Name: "Write", Input: map[string]any{"file_path": sandbox.DockerRoot + "/done.txt", "content": "ok\n"}}, nil, ""},
		{"codex", "GOALRUN_CODEX_BIN", "OPENAI_API_KEY", scripted.NewOpenAI,
			scripted.ToolCall{Name: "exec_command", Input: map[string]any{"cmd": "echo ok > done.txt"}}, []string{"--model", "gpt-agenttest"}, "gpt-agenttest"},
		{"gemini", "GOALRUN_GEMINI_BIN", "GEMINI_API_KEY", scripted.NewGemini,
			scripted.ToolCall{Name: "write_file", Input: map[string]any{"file_path": sandbox.DockerRoot + "/done.txt", "content": "ok\n"}}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			cli := agentCLI(t, c.agent, c.env)
			gw := c.server(scripted.Script{Replies: []scripted.Reply{{Tools: []scripted.ToolCall{c.write}}, {Text: "Wrote done.txt."}}})
			defer gw.Close()
			ws := dockertest.Workspace(t, sandbox.DefaultUID, sandbox.DefaultGID)
			doc := filepath.Join(t.TempDir(), "doc.json")
			args := append([]string{"run", "--agent", c.agent, "--agent-bin", cli, "--model-gateway", gw.URL,
				"--until", "test -f done.txt", "--max-iterations", "2", "--step-timeout", "8m", "--workdir", ws,
				"--output", doc, "--no-config", "--json"}, c.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = append(baseEnv(), c.keyEnv+"="+key)
			if h, ok := os.LookupEnv("DOCKER_HOST"); ok {
				cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
			}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			if code := cmd.ProcessState.ExitCode(); code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%.4000s", code, out.Bytes(), errb.Bytes())
			}
			b := bytes.TrimSpace(out.Bytes())
			reporttest.Validate(t, b)
			var d map[string]any
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			if get(d, "goal", "passed") != true || get(d, "goal", "grounded") != true || get(d, "goal", "iterations") != 1.0 {
				t.Errorf("goal %v", d["goal"])
			}
			// The posture records the gateway; the key never entered the
			// sandbox; the gateway saw only the real key; nothing was refused.
			if get(d, "sandbox", "model_gateway") != gw.URL || get(d, "sandbox", "network") != "egress" {
				t.Errorf("sandbox %v", d["sandbox"])
			}
			if s, _ := get(d, "sandbox", "secrets_in_sandbox").([]any); len(s) != 0 {
				t.Errorf("secrets in the sandbox %v", s)
			}
			// Nothing was refused: no agent calls anything but its model
			// API on a normal run (Codex with agent.CodexQuiet).
			if denials := get(d, "sandbox", "egress_denials"); denials != nil {
				t.Errorf("egress denials %v", denials)
			}
			reqs := gw.Requests()
			if len(gw.ModelRequests()) < 2 {
				t.Fatalf("the gateway saw %d model requests", len(gw.ModelRequests()))
			}
			for _, r := range reqs {
				got := r.Key()
				if got == "" {
					got = r.Header.Get("x-goog-api-key")
				}
				if got != key {
					t.Errorf("request %d (%s) reached the gateway with key %q", r.N, r.Path, got)
				}
			}
			want := c.model
			if want == "" {
				want = gw.ModelRequests()[len(gw.ModelRequests())-1].Model
			}
			if get(d, "model_used") != want {
				t.Errorf("model_used %v, want %q", d["model_used"], want)
			}
			// models_served: every model that answered (the Gemini CLI's
			// router model too), model_used among them, none a local
			// fallback.
			served, _ := d["models_served"].([]any)
			var ids []any
			for _, m := range served {
				if mm, ok := m.(map[string]any); ok && mm["local_last_resort"] == false {
					ids = append(ids, mm["model_id"])
				}
			}
			if len(ids) == 0 || len(ids) != len(served) || !slices.Contains(ids, any(want)) {
				t.Errorf("models_served %v, want objects {model_id, local_last_resort false} naming %q", d["models_served"], want)
			}
			// Codex and the Gemini CLI report tokens but no cost: unknown
			// (null), never 0; Claude Code reports one.
			usage, _ := d["usage"].(map[string]any)
			cost, present := usage["cost_usd"]
			_, isNumber := cost.(float64)
			if wantNull := c.agent != "claude"; !present || wantNull != (cost == nil) || !wantNull && !isNumber {
				t.Errorf("usage %v: cost_usd should be null exactly when the agent reports no cost", usage)
			}
			if bytes.Contains(errb.Bytes(), []byte(key)) || bytes.Contains(b, []byte(key)) {
				t.Errorf("the key appears in goalrun's output")
			}
		})
	}
}

// TestAttackModelGatewayOpensNothingElse: the agent (the real Claude Code,
// its Bash tool) tries to use the loopback gateway's allowance to reach
// another service on this machine's loopback: through the forward proxy by
// address and by name, the gateway itself through the forward proxy, and
// through the gateway's own base URL with a path and Host header aimed
// elsewhere. Only the gateway's own requests get through.
func TestAttackModelGatewayOpensNothingElse(t *testing.T) {
	dockerEngine(t)
	bin := dockertest.GoalrunBinary(t)
	cli := agentCLI(t, "claude", "GOALRUN_CLAUDE_BIN")
	var hits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1); fmt.Fprint(w, "SECRET") }))
	defer other.Close()
	_, otherPort, _ := strings.Cut(other.Listener.Addr().String(), ":")
	// Raw HTTP over bash's /dev/tcp (no client's own proxy rules in the
	// way): CONNECT and absolute-form requests to the forward proxy, and
	// requests aimed elsewhere on the gateway's own base URL.
	script := `req() { exec 3<>/dev/tcp/$1/$2 || return; printf "$3" >&3; timeout 10 cat <&3; exec 3<&-; }
P=${HTTP_PROXY##*:}; B=${ANTHROPIC_BASE_URL#http://}; B=${B%%/*}; BH=${B%%:*}; BP=${B##*:}
for t in 127.0.0.1:OTHER localhost:OTHER $(cat gateway.txt); do
  req 127.0.0.1 $P "CONNECT $t HTTP/1.1\r\nHost: $t\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" | grep -q SECRET && echo "REACHED CONNECT $t"
  req 127.0.0.1 $P "GET http://$t/ HTTP/1.1\r\nHost: $t\r\nConnection: close\r\n\r\n" | grep -q SECRET && echo "REACHED GET $t"
done > attempts.txt
req $BH $BP "GET http://127.0.0.1:OTHER/ HTTP/1.1\r\nHost: 127.0.0.1:OTHER\r\nConnection: close\r\n\r\n" | grep -q SECRET && echo "REACHED via the base URL (absolute form)" >> attempts.txt
req $BH $BP "GET /../../ HTTP/1.1\r\nHost: 127.0.0.1:OTHER\r\nConnection: close\r\n\r\n" | grep -q SECRET && echo "REACHED via the base URL (Host header)" >> attempts.txt
echo ok > done.txt`
	script = strings.ReplaceAll(script, "OTHER", otherPort)
	replies := []scripted.Reply{{Tools: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": script}}}}, {Text: "Tried."}}
	gw := scripted.NewAnthropic(scripted.Script{Replies: replies})
	defer gw.Close()
	// The script also aims at the gateway's own address through the
	// forward proxy; that address is known only once the server listens,
	// so it reaches the script through a file in the workspace (the
	// server's script must not change while it serves).
	ws := dockertest.Workspace(t, sandbox.DefaultUID, sandbox.DefaultGID)
	if err := os.WriteFile(filepath.Join(ws, "gateway.txt"), []byte(strings.TrimPrefix(gw.URL, "http://")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(ws, "gateway.txt"), sandbox.DefaultUID, sandbox.DefaultGID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--agent", "claude", "--agent-bin", cli, "--model-gateway", gw.URL,
		"--until", "test -f done.txt", "--max-iterations", "1", "--workdir", ws, "--no-config", "--json")
	cmd.Env = append(baseEnv(), "ANTHROPIC_API_KEY=real-gateway-key")
	if h, ok := os.LookupEnv("DOCKER_HOST"); ok {
		cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	_ = cmd.Run()
	var d map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &d); err != nil {
		t.Fatalf("no document: %v\nstderr:\n%.4000s", err, errb.Bytes())
	}
	if get(d, "goal", "passed") != true {
		t.Fatalf("the attack script did not run to its end: %v\nstderr:\n%.4000s", d["goal"], errb.Bytes())
	}
	attempts, err := os.ReadFile(filepath.Join(ws, "attempts.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(bytes.TrimSpace(attempts)) != 0 || hits.Load() != 0 {
		t.Errorf("the agent reached another loopback service (%d requests): %s", hits.Load(), attempts)
	}
	if n, _ := get(d, "sandbox", "egress_denied").(float64); n < 3 {
		t.Errorf("egress_denied %v, want the forward attempts refused (%v)", n, get(d, "sandbox", "egress_denials"))
	}
	if get(d, "sandbox", "model_gateway") != gw.URL {
		t.Errorf("model_gateway %v", get(d, "sandbox", "model_gateway"))
	}
	for _, r := range gw.Requests() {
		if r.Reply < 0 && r.Path != "/v1/messages/count_tokens" {
			t.Logf("the gateway got %s %s (its own listener only reaches it)", r.Method, r.Path)
		}
	}
}

// TestModelGatewayLocalGemini: on the local host (no proxy) `goalrun run`
// gives the Gemini CLI the gateway's URL and key directly, with the
// settings it needs in a per-run GEMINI_CLI_HOME; the posture records the
// gateway and names the key as in the sandbox.
func TestModelGatewayLocalGemini(t *testing.T) {
	cli := agentCLI(t, "gemini", "GOALRUN_GEMINI_BIN")
	bin := dockertest.GoalrunBinary(t)
	ws := t.TempDir()
	gw := scripted.NewGemini(scripted.Script{Replies: []scripted.Reply{
		{Tools: []scripted.ToolCall{{Name: "write_file", Input: map[string]any{"file_path": filepath.Join(ws, "done.txt"), "content": "ok\n"}}}},
		{Text: "Wrote done.txt."},
	}})
	defer gw.Close()
	home := t.TempDir() // the user's own ~/.gemini stays untouched
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--sandbox", "local", "--agent", "gemini", "--agent-bin", cli, "--model-gateway", gw.URL,
		"--until", "test -f done.txt", "--max-iterations", "1", "--workdir", ws, "--no-config", "--json")
	cmd.Env = append(baseEnv(), "GEMINI_API_KEY=real-gateway-key", "HOME="+home)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	_ = cmd.Run()
	var d map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &d); err != nil {
		t.Fatalf("no document: %v\nstderr:\n%.4000s", err, errb.Bytes())
	}
	if get(d, "goal", "passed") != true || get(d, "sandbox", "model_gateway") != gw.URL || get(d, "sandbox", "mode") != "local" {
		t.Fatalf("goal %v, sandbox %v\nstderr:\n%.4000s", d["goal"], d["sandbox"], errb.Bytes())
	}
	if s, _ := get(d, "sandbox", "secrets_in_sandbox").([]any); len(s) != 1 || s[0] != "GEMINI_API_KEY" {
		t.Errorf("secrets_in_sandbox %v: on the local host the key is passed in, and said so", s)
	}
	if _, err := os.Stat(filepath.Join(home, ".gemini", "settings.json")); err == nil {
		t.Errorf("goalrun wrote into the user's own ~/.gemini")
	}
	for _, r := range gw.Requests() {
		if k := r.Header.Get("x-goog-api-key"); k != "real-gateway-key" {
			t.Errorf("request %d carried key %q", r.N, k)
		}
	}
}

// TestRetryStormEndsTheRun: `goalrun run` with each real agent CLI
// against a model API that keeps failing (Claude Code and the Gemini CLI:
// 429; Codex, which does not retry a 429: 500): the CLI's retries come out
// as inference_retry events (the Gemini CLI's from its stderr), and the
// turn ends at the agent's storm limit (AgentFailed, cause retry_storm),
// not minutes later when the CLI would give up.
func TestRetryStormEndsTheRun(t *testing.T) {
	bin := dockertest.GoalrunBinary(t)
	cases := []struct {
		agent, env, keyEnv string
		server             func(scripted.Script) *scripted.Server
		status, limit      int
		args               []string
	}{
		{"claude", "GOALRUN_CLAUDE_BIN", "ANTHROPIC_API_KEY", scripted.NewAnthropic, 429, agent.ClaudeRetryStormLimit, nil},
		{"codex", "GOALRUN_CODEX_BIN", "OPENAI_API_KEY", scripted.NewOpenAI, 500, agent.CodexRetryStormLimit, []string{"--model", "gpt-agenttest"}},
		{"gemini", "GOALRUN_GEMINI_BIN", "GEMINI_API_KEY", scripted.NewGemini, 429, agent.GeminiRetryStormLimit, nil},
	}
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			t.Parallel()
			cli := agentCLI(t, c.agent, c.env)
			gw := c.server(scripted.Script{Replies: []scripted.Reply{{Status: c.status}}})
			defer gw.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			args := append([]string{"run", "--sandbox", "local", "--agent", c.agent, "--agent-bin", cli, "--model-gateway", gw.URL,
				"--until", "test -f done.txt", "--max-iterations", "1", "--workdir", t.TempDir(), "--no-config", "--json"}, c.args...)
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = append(baseEnv(), c.keyEnv+"=k", "HOME="+t.TempDir())
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			start := time.Now()
			_ = cmd.Run()
			var d map[string]any
			if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &d); err != nil {
				t.Fatalf("no document: %v\nstderr:\n%.4000s", err, errb.Bytes())
			}
			if cmd.ProcessState.ExitCode() != exitRunFailed || d["error"] != "AgentFailed" || get(d, "failure", "cause") != "retry_storm" {
				t.Fatalf("exit %d, error %v, failure %v", cmd.ProcessState.ExitCode(), d["error"], d["failure"])
			}
			retries := 0
			for _, e := range (result{stderr: errb.Bytes()}).events(t) {
				if e.Type == "inference_retry" {
					retries++
					if c.agent != "codex" && e.Data["status"] != float64(c.status) { // Codex's notices name no status
						t.Errorf("retry event %v", e.Data)
					}
				}
			}
			if retries != c.limit {
				t.Errorf("%d inference_retry events, want the turn ended at the %d-th", retries, c.limit)
			}
			t.Logf("%s: HTTP %d storm ended the run after %v", c.agent, c.status, time.Since(start).Round(time.Second))
		})
	}
}

// TestModelAPIThroughCorporateProxyDockerEgress: with goalrun's
// environment naming a corporate proxy (HTTPS_PROXY, HTTP_PROXY with a user
// and password, NO_PROXY), `goalrun run` in Docker egress reaches a model
// gateway that only that proxy can reach: for an https gateway by CONNECT
// (TLS verified end to end against SSL_CERT_FILE), for an http one in
// absolute form; each real agent CLI finishes its goal, the proxy sees the
// gateway's address and the operator's credentials and nothing else, and
// the posture names the proxy without its password. In the claude case the
// agent's shell also tries to use the corporate proxy directly, through the
// forward proxy by address and by name: refused by goalrun, never reaching
// the corporate proxy.
func TestModelAPIThroughCorporateProxyDockerEgress(t *testing.T) {
	dockerEngine(t)
	bin := dockertest.GoalrunBinary(t)
	const key, proxyUser, proxyPassword = "real-gateway-key", "alice", "corp-pw-5d1e"
	attack := `req() { exec 3<>/dev/tcp/$1/$2 || return; printf "$3" >&3; timeout 10 cat <&3; exec 3<&-; }
P=${HTTP_PROXY##*:}
for t in CORP localhost:CORPPORT GATEWAY example.com:443; do
  req 127.0.0.1 $P "CONNECT $t HTTP/1.1\r\nHost: $t\r\n\r\n" | head -1 | grep -q ' 200 ' && echo "REACHED CONNECT $t"
  req 127.0.0.1 $P "GET http://$t/ HTTP/1.1\r\nHost: $t\r\nConnection: close\r\n\r\n" | head -1 | grep -q ' 200 ' && echo "REACHED GET $t"
done > attempts.txt
echo ok > done.txt`
	cases := []struct {
		name, agent, env, keyEnv string
		server                   func(scripted.Script) *scripted.Server
		write                    scripted.ToolCall
		args                     []string
		https                    bool
		attack                   bool
	}{
		{"claude https, the agent tries the corporate proxy", "claude", "GOALRUN_CLAUDE_BIN", "ANTHROPIC_API_KEY", scripted.NewAnthropic,
			scripted.ToolCall{Name: "Bash", Input: map[string]any{"command": attack}}, nil, true, true},
		{"codex https", "codex", "GOALRUN_CODEX_BIN", "OPENAI_API_KEY", scripted.NewOpenAI,
			scripted.ToolCall{Name: "exec_command", Input: map[string]any{"cmd": "echo ok > done.txt"}}, []string{"--model", "gpt-agenttest"}, true, false},
		{"gemini https", "gemini", "GOALRUN_GEMINI_BIN", "GEMINI_API_KEY", scripted.NewGemini,
			scripted.ToolCall{Name: "write_file", Input: map[string]any{"file_path": sandbox.DockerRoot + "/done.txt", "content": "ok\n"}}, nil, true, false},
		{"claude http", "claude", "GOALRUN_CLAUDE_BIN", "ANTHROPIC_API_KEY", scripted.NewAnthropic,
			scripted.ToolCall{Name: "Write", Input: map[string]any{"file_path": sandbox.DockerRoot + "/done.txt", "content": "ok\n"}}, nil, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cli := agentCLI(t, c.agent, c.env)
			corp, err := egresstest.NewCorporateProxy(proxyUser+":"+proxyPassword, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer corp.Close()
			_, corpPort, _ := net.SplitHostPort(corp.Addr)
			write := c.write
			if c.attack {
				s := strings.NewReplacer("CORPPORT", corpPort, "CORP", corp.Addr, "GATEWAY", "10.255.255.1:8443").Replace(attack)
				write.Input = map[string]any{"command": s}
			}
			gw := c.server(scripted.Script{Replies: []scripted.Reply{{Tools: []scripted.ToolCall{write}}, {Text: "Wrote done.txt."}}})
			defer gw.Close()
			gwURL, err := url.Parse(gw.URL) // the OpenAI server's base URL ends in /v1
			if err != nil {
				t.Fatal(err)
			}
			gwHost := gwURL.Host
			// The gateway's address is private and routed nowhere: only the
			// corporate proxy, which maps it to the scripted server, gets
			// there.
			gateway, target := "http://10.255.255.2:8080", "10.255.255.2:8080"
			env := append(baseEnv(), c.keyEnv+"="+key,
				"HTTP_PROXY=http://"+proxyUser+":"+proxyPassword+"@"+corp.Addr, "NO_PROXY=.internal.example")
			if c.https {
				gateway, target = "https://10.255.255.1:8443", "10.255.255.1:8443"
				front, caFile := tlsFront(t, gwHost, "10.255.255.1")
				corp.Route(target, front)
				env = append(env, "HTTPS_PROXY=http://"+proxyUser+":"+proxyPassword+"@"+corp.Addr, "SSL_CERT_FILE="+caFile)
			} else {
				corp.Route(target, gwHost)
			}
			ws := dockertest.Workspace(t, sandbox.DefaultUID, sandbox.DefaultGID)
			args := append([]string{"run", "--agent", c.agent, "--agent-bin", cli, "--model-gateway", gateway + gwURL.Path,
				"--until", "test -f done.txt", "--max-iterations", "2", "--step-timeout", "8m", "--workdir", ws,
				"--no-config", "--json"}, c.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = env
			if h, ok := os.LookupEnv("DOCKER_HOST"); ok {
				cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
			}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err = cmd.Run()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			if code := cmd.ProcessState.ExitCode(); code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%.4000s\ncorporate proxy saw %+v", code, out.Bytes(), errb.Bytes(), corp.Requests())
			}
			b := bytes.TrimSpace(out.Bytes())
			reporttest.Validate(t, b)
			var d map[string]any
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			if get(d, "goal", "passed") != true || get(d, "goal", "grounded") != true {
				t.Errorf("goal %v", d["goal"])
			}
			wantPosture := "http=http://" + corp.Addr + " no_proxy=.internal.example"
			if c.https {
				wantPosture = "https=http://" + corp.Addr + " " + wantPosture
			}
			if got := get(d, "sandbox", "egress_outbound_proxy"); got != wantPosture {
				t.Errorf("egress_outbound_proxy %v, want %q", got, wantPosture)
			}
			reqs := corp.Requests()
			if len(gw.ModelRequests()) < 2 || len(reqs) == 0 {
				t.Fatalf("the gateway saw %d model requests, the corporate proxy %d", len(gw.ModelRequests()), len(reqs))
			}
			wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(proxyUser+":"+proxyPassword))
			for i, r := range reqs {
				if got := corp.Targets()[i]; got != target || r.Auth != wantAuth || r.Status != http.StatusOK {
					t.Errorf("the corporate proxy got %s %s (%d, auth %q), want only %s with the operator's credentials", r.Method, r.Target, r.Status, r.Auth, target)
				}
				if c.https != (r.Method == http.MethodConnect) {
					t.Errorf("the corporate proxy got %s %s", r.Method, r.Target)
				}
			}
			for _, r := range gw.Requests() {
				if got := cmp.Or(r.Key(), r.Header.Get("x-goog-api-key")); got != key {
					t.Errorf("request %d (%s) reached the gateway with key %q", r.N, r.Path, got)
				}
			}
			denials, _ := get(d, "sandbox", "egress_denials").([]any)
			if c.attack {
				attempts, err := os.ReadFile(filepath.Join(ws, "attempts.txt"))
				if err != nil {
					t.Fatal(err)
				}
				if len(bytes.TrimSpace(attempts)) != 0 {
					t.Errorf("the agent got through: %s", attempts)
				}
				if len(denials) < 4 {
					t.Errorf("egress denials %v, want the agent's attempts refused", denials)
				}
			} else if len(denials) != 0 {
				t.Errorf("egress denials %v, want none on a normal run", denials)
			}
			for _, secret := range []string{key, proxyPassword} {
				if bytes.Contains(errb.Bytes(), []byte(secret)) || bytes.Contains(b, []byte(secret)) {
					t.Errorf("%q appears in goalrun's output", secret)
				}
			}
		})
	}
}

// tlsFront serves HTTPS on loopback with a certificate for ip (made here,
// its CA written to the returned file for SSL_CERT_FILE) and forwards every
// request to the plain-HTTP server at backend ("host:port").
func tlsFront(t *testing.T, backend, ip string) (addr, caFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "goalrun test gateway"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP(ip)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: backend})
	rp.FlushInterval = -1
	srv := httptest.NewUnstartedServer(rp)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), caFile
}
