package agent

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"strings"

	"github.com/goalrun/goalrun/sandbox"
)

// API is the model API an agent CLI talks to: where it is, which variables
// tell the CLI its address and key, and how the key travels upstream. The
// runner turns it into a sandbox.Upstream so that, in egress mode, goalrun's
// proxy adds the real key and the sandbox only holds sandbox.DummyKey.
type API struct {
	// Protocol names the wire protocol, e.g. "anthropic-messages".
	Protocol string
	// URL is the real base URL the CLI's own default points at, e.g.
	// "https://api.anthropic.com". For OpenAI-style APIs it includes the
	// "/v1" prefix the CLI expects in its base URL.
	URL string
	// BaseURLEnv names the variable that points the CLI at another base URL
	// ("" when the CLI has none and the URL goes on its command line, see
	// Turn.BaseURL).
	BaseURLEnv string
	// KeyEnv names the variable the CLI reads its key from.
	KeyEnv string
	// Header is the request header the key goes into upstream, and Prefix
	// what goes before the key in it (e.g. "Bearer ").
	Header, Prefix string
}

// AllowHost returns the API's host:port for the egress allowlist, e.g.
// "api.anthropic.com:443" (the port defaults to 443 for https, 80 for
// http); "" when URL does not parse.
func (a API) AllowHost() string {
	u, err := url.Parse(a.URL)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Upstream returns the sandbox.Upstream that serves this API with key, the
// real key (it never enters an egress sandbox).
func (a API) Upstream(key string) sandbox.Upstream {
	return sandbox.Upstream{URL: a.URL, BaseURLEnv: a.BaseURLEnv, KeyEnv: a.KeyEnv, Header: a.Header, Prefix: a.Prefix, Key: key}
}

// The model APIs of the built-in agents.
var (
	// AnthropicAPI is the Anthropic Messages API (POST /v1/messages). Claude
	// Code reads ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY and sends the key
	// in x-api-key.
	AnthropicAPI = API{Protocol: "anthropic-messages", URL: "https://api.anthropic.com",
		BaseURLEnv: "ANTHROPIC_BASE_URL", KeyEnv: "ANTHROPIC_API_KEY", Header: "x-api-key"}
	// OpenAIAPI is the OpenAI Responses API (POST /v1/responses). Codex gets
	// its base URL through its custom provider's base_url (Turn.BaseURL)
	// and its key from OPENAI_API_KEY, sent as "Authorization: Bearer".
	OpenAIAPI = API{Protocol: "openai-responses", URL: "https://api.openai.com/v1",
		KeyEnv: "OPENAI_API_KEY", Header: "Authorization", Prefix: "Bearer "}
	// GeminiAPI is the Gemini API (generativelanguage.googleapis.com). The
	// Gemini CLI's SDK (@google/genai) reads GOOGLE_GEMINI_BASE_URL; the key
	// comes from GEMINI_API_KEY and travels in x-goog-api-key.
	GeminiAPI = API{Protocol: "gemini", URL: "https://generativelanguage.googleapis.com",
		BaseURLEnv: "GOOGLE_GEMINI_BASE_URL", KeyEnv: "GEMINI_API_KEY", Header: "x-goog-api-key"}
	// DeepSeekAPI is DeepSeek's OpenAI-compatible API, DeepCode's default;
	// the variable names are DeepCode's documented DEEPSEEK_API_KEY and,
	// by the same convention, DEEPSEEK_BASE_URL (not verified against a
	// real binary).
	DeepSeekAPI = API{Protocol: "openai-chat", URL: "https://api.deepseek.com",
		BaseURLEnv: "DEEPSEEK_BASE_URL", KeyEnv: "DEEPSEEK_API_KEY", Header: "Authorization", Prefix: "Bearer "}
)

// Spec is what running an agent needs beyond its command line: the model
// API (for the egress allowlist and key injection), the fixed environment,
// and where its native executable is for a Docker sandbox.
type Spec struct {
	// Name is the --agent value.
	Name string
	// Bin is the executable's usual name on PATH.
	Bin string
	// Package is the npm package the pinned CLI comes from ("" when it is
	// not installed from npm).
	Package string
	// API is the model API the CLI talks to.
	API API
	// Env is set in every agent step (Invocation.Env carries it): Claude
	// Code needs IS_SANDBOX=1 to accept --dangerously-skip-permissions as
	// root and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 to call nothing
	// but the model; the Gemini CLI needs its workspace trusted. HOME must
	// be a writable folder in every agent step (the sandbox sets it): the
	// CLIs keep their sessions there (Codex creates $HOME/.codex when
	// CODEX_HOME is unset, which goalrun leaves unset).
	Env map[string]string
	// Resumes says whether Turn.SessionID resumes a session.
	Resumes bool
	// Layout tells NativeExecutable where the native binary sits in the
	// npm package; nil means the executable on PATH is used as it is.
	Layout *NpmLayout
	// NoCost is true for a CLI that reports token use but never a cost
	// (Codex, the Gemini CLI): the run's cost is unknown (cost_usd null)
	// and a cost budget cannot apply.
	NoCost bool
	// NoUsage is true for an agent that reports neither tokens nor cost
	// (the command agent, whose stdout is not parsed): no budget can apply.
	NoUsage bool
	// Node is true for a CLI that is a Node.js program (a script run by
	// node, not a native binary): a Docker sandbox mounts its npm package
	// and the host's node (NodeProgram).
	Node bool
	// Files are files the CLI needs that goalrun writes for it when it
	// serves the model API (sandbox.AgentFile): the Gemini CLI's settings.
	Files []sandbox.AgentFile
}

// AllowHosts returns the default egress allowlist: the model API's
// host:port.
func (s Spec) AllowHosts() []string {
	if h := s.API.AllowHost(); h != "" {
		return []string{h}
	}
	return nil
}

// environ returns the Invocation.Env of a turn: Spec.Env plus the base URL
// variable when the turn names one.
func (s Spec) environ(t Turn) map[string]string {
	env := maps.Clone(s.Env)
	if env == nil {
		env = map[string]string{}
	}
	if t.BaseURL != "" && s.API.BaseURLEnv != "" {
		env[s.API.BaseURLEnv] = t.BaseURL
	}
	return env
}

// The built-in agents' specs.
var (
	// ClaudeSpec: Claude Code from npm @anthropic-ai/claude-code (pinned in
	// .ci/run: 2.1.332), Anthropic Messages API.
	ClaudeSpec = Spec{
		Name: "claude", Bin: "claude", Package: "@anthropic-ai/claude-code", API: AnthropicAPI, Resumes: true,
		Env: map[string]string{
			"IS_SANDBOX": "1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
			"DISABLE_AUTOUPDATER":                      "1",
		},
		Layout: &claudeLayout,
	}
	// CodexSpec: Codex from npm @openai/codex (pinned: 0.171.0), OpenAI
	// Responses API through a custom provider (see Codex).
	CodexSpec = Spec{
		Name: "codex", Bin: "codex", Package: "@openai/codex", API: OpenAIAPI, Resumes: true, NoCost: true,
		Env:    map[string]string{},
		Layout: &codexLayout,
	}
	// GeminiSpec: the Gemini CLI from npm @google/gemini-cli (pinned in
	// .ci/run: 0.61.0), Gemini API. It is a Node.js program. It needs a
	// settings file (GeminiSettings) whenever goalrun gives it a base URL.
	GeminiSpec = Spec{
		Name: "gemini", Bin: "gemini", Package: "@google/gemini-cli", API: GeminiAPI, Resumes: true, Node: true, NoCost: true,
		Env: map[string]string{
			"GEMINI_CLI_TRUST_WORKSPACE": "true",  // headless runs refuse untrusted folders
			"GEMINI_SANDBOX":             "false", // goalrun's sandbox is the boundary
		},
		Files: []sandbox.AgentFile{GeminiSettings},
	}
	// CarSpec: CAR's `car do`. CAR talks to several providers; the default
	// assumed here is Anthropic's API (its documented default models are
	// anthropic/…); pass --allow-host for another.
	CarSpec = Spec{
		Name: "car", Bin: "car", API: AnthropicAPI, Resumes: false, Env: map[string]string{},
	}
	// DeepCodeSpec: the DeepCode CLI, DeepSeek's API.
	DeepCodeSpec = Spec{
		Name: "deepcode", Bin: "deepcode", API: DeepSeekAPI, Resumes: true, Env: map[string]string{},
	}
)

// GeminiSettings is the settings file the Gemini CLI (0.61.0) needs under
// goalrun. With GOOGLE_GEMINI_BASE_URL set (goalrun always sets it: the
// egress proxy's address, a gateway's) the CLI picks its "gateway" auth
// type, which its own non-interactive check refuses ("Invalid auth method
// selected.", exit 41); selecting "gemini-api-key" keeps the base URL and
// the key. "usageStatisticsEnabled": false stops its telemetry calls to
// play.googleapis.com (egress denials otherwise).
//
// In a container it is the system settings file, /etc/gemini-cli/settings.json
// (the CLI's getSystemSettingsPath on Linux): it wins over the user's and
// the workspace's settings, and the CLI reads a system file only when it
// and every folder above it are root's and not writable by group or
// others, which is why the Docker sandbox writes it root-owned, read-only.
// On the local host goalrun cannot make a root-owned file (and the CLI
// refuses GEMINI_CLI_SYSTEM_SETTINGS_PATH anywhere else, e.g. under /tmp):
// there it is the user settings of a per-run Gemini home, GEMINI_CLI_HOME
// (the CLI then keeps its conversations for --resume there too).
var GeminiSettings = sandbox.AgentFile{
	Path:      "/etc/gemini-cli/settings.json",
	Content:   []byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false}}` + "\n"),
	LocalEnv:  "GEMINI_CLI_HOME",
	LocalPath: ".gemini/settings.json",
}

// registry lists the adapters New knows, in the order Names reports them.
var registry = []struct {
	name string
	new  func() Adapter
	spec Spec
}{
	{"claude", func() Adapter { return Claude{} }, ClaudeSpec},
	{"codex", func() Adapter { return Codex{} }, CodexSpec},
	{"gemini", func() Adapter { return Gemini{} }, GeminiSpec},
	{"car", func() Adapter { return Car{} }, CarSpec},
	{"deepcode", func() Adapter { return DeepCode{} }, DeepCodeSpec},
	{CommandName, func() Adapter { return Command{} }, Spec{Name: CommandName, Env: map[string]string{}, NoUsage: true}},
}

// Names returns the --agent values New accepts, in documentation order:
// claude, codex, gemini, car, deepcode, command.
func Names() []string {
	out := make([]string, len(registry))
	for i, r := range registry {
		out[i] = r.name
	}
	return out
}

// New returns the adapter for an --agent value. The error names the valid
// values.
func New(name string) (Adapter, error) {
	for _, r := range registry {
		if r.name == name {
			return r.new(), nil
		}
	}
	return nil, unknownAgent(name)
}

// SpecOf returns what running the named agent needs. The command agent has
// no model API (a zero API: its network defaults to none).
func SpecOf(name string) (Spec, error) {
	for _, r := range registry {
		if r.name == name {
			s := r.spec
			s.Env = maps.Clone(s.Env)
			return s, nil
		}
	}
	return Spec{}, unknownAgent(name)
}

func unknownAgent(name string) error {
	return fmt.Errorf("unknown agent %q: use one of %s", name, strings.Join(Names(), ", "))
}
