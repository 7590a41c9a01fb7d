package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// feedLines runs lines through p and returns the models announced and the
// result.
func feedLines(p Parser, lines []string, exit int) (models []string, res TurnResult) {
	emit := func(ev Event) {
		if ev.Kind == KindModel {
			models = append(models, ev.Model)
		}
	}
	for _, l := range lines {
		p.Line([]byte(l), false, emit)
	}
	return models, p.End(exit, emit)
}

// TestModelsThatAnswered: model_used and models_served name models that
// answered, never what was only asked for nor a CLI's own placeholder.
func TestModelsThatAnswered(t *testing.T) {
	t.Run("claude never <synthetic>, init is not an answer", func(t *testing.T) {
		models, res := feedLines(Claude{}.NewParser(), []string{
			`{"type":"system","subtype":"init","session_id":"s","model":"claude-opus-5-5","claude_code_version":"2.1.332"}`,
			`{"type":"assistant","session_id":"s","message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 401"}]}}`,
			`{"type":"result","subtype":"success","is_error":true,"session_id":"s","result":"API Error: 401 invalid x-api-key"}`,
		}, 1)
		if len(models) != 0 || res.Model != "" {
			t.Errorf("models %v, result model %q: nothing answered", models, res.Model)
		}
		models, res = feedLines(Claude{}.NewParser(), []string{
			`{"type":"assistant","session_id":"s","message":{"model":"claude-opus-5-5","content":[{"type":"text","text":"hi"}]}}`,
			`{"type":"result","subtype":"success","session_id":"s","result":"hi"}`,
		}, 0)
		if len(models) != 1 || res.Model != "claude-opus-5-5" {
			t.Errorf("models %v, result model %q", models, res.Model)
		}
	})
	codexOK := []string{
		`{"type":"thread.started","thread_id":"th"}`,
		`{"type":"turn.started"}`,
		`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"done"}}`,
		`{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":5}}`,
	}
	for _, c := range []struct {
		name  string
		codex Codex
		turn  Turn
		want  string
	}{
		{"codex --model", Codex{ConfigModel: "from-config"}, Turn{Model: "gpt-asked"}, "gpt-asked"},
		{"codex -m in extra args", Codex{}, Turn{Model: "gpt-flag", ExtraArgs: []string{"-m", "gpt-extra"}}, "gpt-extra"},
		{"codex -c model=", Codex{}, Turn{ExtraArgs: []string{"-c", `model="gpt-c"`}}, "gpt-c"},
		{"codex config", Codex{ConfigModel: "from-config"}, Turn{}, "from-config"},
		{"codex nothing named: null", Codex{}, Turn{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, res := feedLines(c.codex.NewTurnParser(c.turn), codexOK, 0)
			if res.Model != c.want {
				t.Errorf("model %q, want %q", res.Model, c.want)
			}
		})
	}
	t.Run("codex that never got an answer names no model", func(t *testing.T) {
		_, res := feedLines(Codex{}.NewTurnParser(Turn{Model: "gpt-asked"}), []string{
			`{"type":"thread.started","thread_id":"th"}`, `{"type":"turn.started"}`,
			`{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: Incorrect API key provided"}}`,
		}, 1)
		if res.Model != "" || res.Status != StatusAuthRequired {
			t.Errorf("%+v", res)
		}
	})
}

func TestCodexConfigModel(t *testing.T) {
	for _, c := range []struct{ name, toml, want string }{
		{"top-level", "model = \"gpt-5-codex\"\n[tools]\nweb_search = true\n", "gpt-5-codex"},
		{"profile", "model = \"a\"\nprofile = \"fast\"\n[profiles.fast]\nmodel = \"b\"\n", "b"},
		{"none", "approval_policy = \"never\"\n", ""},
		{"broken", "model = \n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(c.toml), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := CodexConfigModel(dir); got != c.want {
				t.Errorf("%q, want %q", got, c.want)
			}
		})
	}
	if got := CodexConfigModel(t.TempDir()); got != "" {
		t.Errorf("no file: %q", got)
	}
}
