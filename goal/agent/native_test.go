package agent

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// tinyELF returns a minimal ELF64 executable header for machine, with a
// PT_INTERP program header naming interp when interp != "".
func tinyELF(machine elf.Machine, interp string) []byte {
	const ehsize, phsize = 64, 56
	b := make([]byte, ehsize+phsize+len(interp)+1)
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	b[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	b[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	le := binary.LittleEndian
	le.PutUint16(b[16:], uint16(elf.ET_EXEC))
	le.PutUint16(b[18:], uint16(machine))
	le.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	le.PutUint64(b[32:], ehsize) // e_phoff
	le.PutUint16(b[52:], ehsize) // e_ehsize
	le.PutUint16(b[54:], phsize) // e_phentsize
	if interp != "" {
		le.PutUint16(b[56:], 1) // e_phnum
		ph := b[ehsize:]
		le.PutUint32(ph[0:], uint32(elf.PT_INTERP))
		le.PutUint32(ph[4:], uint32(elf.PF_R))
		le.PutUint64(ph[8:], ehsize+phsize) // p_offset
		le.PutUint64(ph[32:], uint64(len(interp)+1))
		le.PutUint64(ph[40:], uint64(len(interp)+1))
		le.PutUint64(ph[48:], 1)
		copy(b[ehsize+phsize:], interp)
	}
	return b
}

// npmTree lays out files (path → content; a "->target" content is a
// symlink) under a temp folder and returns its root.
func npmTree(t *testing.T, files map[string]any) string {
	t.Helper()
	root := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch c := content.(type) {
		case string:
			if target, ok := strings.CutPrefix(c, "->"); ok {
				if err := os.Symlink(target, p); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(p, []byte(c), 0o755); err != nil {
				t.Fatal(err)
			}
		case []byte:
			if err := os.WriteFile(p, c, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

const (
	glibcInterp = "/lib64/ld-linux-x86-64.so.2"
	stubScript  = "#!/bin/sh\necho 'claude native binary not installed'\n"
)

func TestNativeExecutable(t *testing.T) {
	amd := tinyELF(elf.EM_X86_64, glibcInterp)
	amdStatic := tinyELF(elf.EM_X86_64, "")
	arm := tinyELF(elf.EM_AARCH64, "")
	claudePkg := `{"name":"@anthropic-ai/claude-code","version":"2.1.332"}`
	codexPkg := `{"name":"@openai/codex","version":"0.171.0"}`
	cases := []struct {
		name   string
		spec   Spec
		files  map[string]any
		onPath string
		goarch string
		want   string // path relative to the tree; "" = error
		interp string
		errIs  error
	}{
		{
			name: "claude after its postinstall: bin/claude.exe is the binary", spec: ClaudeSpec, goarch: "amd64",
			files: map[string]any{
				"node_modules/.bin/claude":                                  "->../@anthropic-ai/claude-code/bin/claude.exe",
				"node_modules/@anthropic-ai/claude-code/package.json":       claudePkg,
				"node_modules/@anthropic-ai/claude-code/bin/claude.exe":     amd,
				"node_modules/@anthropic-ai/claude-code-linux-x64/claude":   amd,
				"node_modules/@anthropic-ai/claude-code-linux-x64/pkg.json": "{}",
			},
			onPath: "node_modules/.bin/claude", want: "node_modules/@anthropic-ai/claude-code/bin/claude.exe", interp: glibcInterp,
		},
		{
			name: "claude without its postinstall: the platform package's glibc binary", spec: ClaudeSpec, goarch: "amd64",
			files: map[string]any{
				"node_modules/.bin/claude":                                     "->../@anthropic-ai/claude-code/bin/claude.exe",
				"node_modules/@anthropic-ai/claude-code/package.json":          claudePkg,
				"node_modules/@anthropic-ai/claude-code/bin/claude.exe":        stubScript,
				"node_modules/@anthropic-ai/claude-code-linux-x64-musl/claude": tinyELF(elf.EM_X86_64, "/lib/ld-musl-x86_64.so.1"),
				"node_modules/@anthropic-ai/claude-code-linux-x64/claude":      amd,
			},
			onPath: "node_modules/.bin/claude", want: "node_modules/@anthropic-ai/claude-code-linux-x64/claude", interp: glibcInterp,
		},
		{
			name: "claude nested platform package (npm without hoisting)", spec: ClaudeSpec, goarch: "arm64",
			files: map[string]any{
				"lib/node_modules/@anthropic-ai/claude-code/package.json":                                              claudePkg,
				"lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe":                                            stubScript,
				"lib/node_modules/@anthropic-ai/claude-code/node_modules/@anthropic-ai/claude-code-linux-arm64/claude": arm,
				"bin/claude": "->../lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe",
			},
			onPath: "bin/claude", want: "lib/node_modules/@anthropic-ai/claude-code/node_modules/@anthropic-ai/claude-code-linux-arm64/claude",
		},
		{
			name: "claude from the native installer: already the binary", spec: ClaudeSpec, goarch: "amd64",
			files:  map[string]any{".local/bin/claude": "->../share/claude/versions/2.1.332", ".local/share/claude/versions/2.1.332": amd},
			onPath: ".local/bin/claude", want: ".local/share/claude/versions/2.1.332", interp: glibcInterp,
		},
		{
			name: "claude with the platform package missing", spec: ClaudeSpec, goarch: "amd64",
			files: map[string]any{
				"node_modules/@anthropic-ai/claude-code/package.json":   claudePkg,
				"node_modules/@anthropic-ai/claude-code/bin/claude.exe": stubScript,
			},
			onPath: "node_modules/@anthropic-ai/claude-code/bin/claude.exe", errIs: ErrNotNative,
		},
		{
			name: "codex: the static musl binary, not the node wrapper", spec: CodexSpec, goarch: "amd64",
			files: map[string]any{
				"node_modules/.bin/codex":                                                         "->../@openai/codex/bin/codex.js",
				"node_modules/@openai/codex/package.json":                                         codexPkg,
				"node_modules/@openai/codex/bin/codex.js":                                         "#!/usr/bin/env node\n",
				"node_modules/@openai/codex-linux-x64/package.json":                               `{"name":"@openai/codex","version":"0.171.0-linux-x64"}`,
				"node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex": amdStatic,
			},
			onPath: "node_modules/.bin/codex", want: "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
		},
		{
			name: "codex with vendor/ in the main package (older layout)", spec: CodexSpec, goarch: "amd64",
			files: map[string]any{
				"node_modules/@openai/codex/package.json":                               codexPkg,
				"node_modules/@openai/codex/bin/codex.js":                               "#!/usr/bin/env node\n",
				"node_modules/@openai/codex/vendor/x86_64-unknown-linux-musl/bin/codex": amdStatic,
			},
			onPath: "node_modules/@openai/codex/bin/codex.js", want: "node_modules/@openai/codex/vendor/x86_64-unknown-linux-musl/bin/codex",
		},
		{
			name: "codex built for another machine is refused", spec: CodexSpec, goarch: "amd64",
			files: map[string]any{
				"node_modules/@openai/codex/package.json":                                         codexPkg,
				"node_modules/@openai/codex/bin/codex.js":                                         "#!/usr/bin/env node\n",
				"node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex": arm,
			},
			onPath: "node_modules/@openai/codex/bin/codex.js", errIs: ErrNotNative,
		},
		{
			name: "gemini is a node script: no native executable", spec: GeminiSpec, goarch: "amd64",
			files:  map[string]any{"bin/gemini": "#!/usr/bin/env node\n"},
			onPath: "bin/gemini", errIs: ErrNotNative,
		},
		{
			name: "car as a native binary", spec: CarSpec, goarch: "amd64",
			files:  map[string]any{"bin/car": amdStatic},
			onPath: "bin/car", want: "bin/car",
		},
		{
			name: "a missing file", spec: ClaudeSpec, goarch: "amd64",
			files: map[string]any{}, onPath: "nope", errIs: fs.ErrNotExist,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := npmTree(t, c.files)
			n, err := nativeExecutable(c.spec, OSFS{}, filepath.Join(root, c.onPath), c.goarch)
			if c.want == "" {
				if err == nil || !errors.Is(err, c.errIs) {
					t.Fatalf("got %+v, %v; want an error wrapping %v", n, err, c.errIs)
				}
				if !strings.Contains(err.Error(), "agent "+c.spec.Name) {
					t.Errorf("the error does not name the agent: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, _ := filepath.EvalSymlinks(filepath.Join(root, c.want))
			if n.Path != want || n.Interp != c.interp || n.Static() != (c.interp == "") {
				t.Errorf("got %+v, want %s (interp %q)", n, want, c.interp)
			}
		})
	}
}

func TestNativeExecutableNotExecutable(t *testing.T) {
	root := npmTree(t, map[string]any{"bin/car": tinyELF(elf.EM_X86_64, "")})
	p := filepath.Join(root, "bin/car")
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := nativeExecutable(CarSpec, OSFS{}, p, "amd64"); !errors.Is(err, ErrNotNative) || !strings.Contains(err.Error(), "not executable") {
		t.Fatalf("err = %v", err)
	}
}

// TestNativeExecutableRealCLIs resolves the real installed CLIs (the ones
// the live tests run), when present.
func TestNativeExecutableRealCLIs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("native executables are resolved for linux sandboxes only")
	}
	for _, c := range []struct {
		spec   Spec
		env    string
		static bool
	}{{ClaudeSpec, "GOALRUN_CLAUDE_BIN", false}, {CodexSpec, "GOALRUN_CODEX_BIN", true}} {
		t.Run(c.spec.Name, func(t *testing.T) {
			bin := findAgentBin(t, c.spec.Name, c.env)
			n, err := NativeExecutable(c.spec, OSFS{}, bin)
			if err != nil {
				t.Fatal(err)
			}
			if n.Static() != c.static {
				t.Errorf("%s: static = %v (interp %q), want %v", n.Path, n.Static(), n.Interp, c.static)
			}
			if strings.HasSuffix(n.Path, ".js") {
				t.Errorf("resolved to the node wrapper %s", n.Path)
			}
			t.Logf("%s → %s (interp %q)", bin, n.Path, n.Interp)
		})
	}
}

// TestNodeProgram: an agent that is a Node.js program (the Gemini CLI) is
// run in a container from its npm package folder (the script npm links
// onto PATH, found inside it) and the host's node.
func TestNodeProgram(t *testing.T) {
	root := t.TempDir()
	pkg := filepath.Join(root, "lib", "node_modules", "@google", "gemini-cli")
	if err := os.MkdirAll(filepath.Join(pkg, "bundle"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"name":"@google/gemini-cli","version":"0.61.0"}`), 0o644)
	os.WriteFile(filepath.Join(pkg, "bundle", "gemini.js"), []byte("#!/usr/bin/env node\n"), 0o755)
	bin := filepath.Join(root, "bin")
	os.MkdirAll(bin, 0o755)
	os.Symlink(filepath.Join(pkg, "bundle", "gemini.js"), filepath.Join(bin, "gemini"))
	node := filepath.Join(root, "node")
	os.WriteFile(node, tinyELF(elfMachines[runtime.GOARCH], "/lib64/ld-linux-x86-64.so.2"), 0o755)

	n, err := nodeProgram(GeminiSpec, OSFS{}, filepath.Join(bin, "gemini"), node, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	if n.Package != pkg || n.Entry != "bundle/gemini.js" || n.Path != node || n.Static() {
		t.Errorf("%+v", n)
	}
	for name, c := range map[string]struct{ onPath, node string }{
		"no node":                {filepath.Join(bin, "gemini"), ""},
		"node is a script":       {filepath.Join(bin, "gemini"), filepath.Join(pkg, "bundle", "gemini.js")},
		"not inside its package": {node, node},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := nodeProgram(GeminiSpec, OSFS{}, c.onPath, c.node, runtime.GOARCH); !errors.Is(err, ErrNotNative) {
				t.Errorf("err %v, want ErrNotNative", err)
			}
		})
	}
}
