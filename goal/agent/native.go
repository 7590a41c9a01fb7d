package agent

import (
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// HostFS is the part of the host filesystem NativeExecutable reads: it
// resolves symlinks and opens files. OSFS is the real one; tests use temp
// folders or fakes.
type HostFS interface {
	// EvalSymlinks returns name with every symlink resolved (see
	// filepath.EvalSymlinks).
	EvalSymlinks(name string) (string, error)
	// Open opens a file for reading.
	Open(name string) (HostFile, error)
}

// HostFile is an open file: *os.File satisfies it.
type HostFile interface {
	io.ReaderAt
	io.Closer
	Stat() (fs.FileInfo, error)
}

// OSFS is HostFS on the real filesystem.
type OSFS struct{}

// EvalSymlinks calls filepath.EvalSymlinks.
func (OSFS) EvalSymlinks(name string) (string, error) { return filepath.EvalSymlinks(name) }

// Open calls os.Open.
func (OSFS) Open(name string) (HostFile, error) { return os.Open(name) }

// NpmLayout says where an npm-installed CLI keeps its native executable:
// the command npm links onto PATH is a wrapper (a Node script, or a
// placeholder that a postinstall script replaces), and the real binary sits
// in a per-platform package beside the main one.
type NpmLayout struct {
	// Candidates returns, for a Go architecture ("amd64", "arm64"), the
	// native executable's possible paths relative to the main package's
	// folder, best first.
	Candidates func(goarch string) []string
}

// claudeLayout: @anthropic-ai/claude-code's bin/claude.exe is the native
// binary itself once its postinstall script has run (it hard-links the
// platform package's binary there); npm 11 does not run that script by
// default, and then bin/claude.exe is a placeholder and the binary is
// @anthropic-ai/claude-code-linux-<arch>/claude (glibc; the -musl package
// is the fallback).
var claudeLayout = NpmLayout{Candidates: func(goarch string) []string {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[goarch]
	if arch == "" {
		return []string{"bin/claude.exe"}
	}
	var out []string
	out = append(out, "bin/claude.exe")
	for _, variant := range []string{"linux-" + arch, "linux-" + arch + "-musl"} {
		out = append(out,
			"../claude-code-"+variant+"/claude",
			"node_modules/@anthropic-ai/claude-code-"+variant+"/claude")
	}
	return out
}}

// codexLayout: @openai/codex's bin/codex.js is a Node wrapper that spawns
// the static musl binary vendor/<target>/bin/codex of the platform package
// @openai/codex-linux-<arch> (older releases kept vendor/ in the main
// package).
var codexLayout = NpmLayout{Candidates: func(goarch string) []string {
	arch, target := "", ""
	switch goarch {
	case "amd64":
		arch, target = "x64", "x86_64-unknown-linux-musl"
	case "arm64":
		arch, target = "arm64", "aarch64-unknown-linux-musl"
	default:
		return nil
	}
	rel := "vendor/" + target + "/bin/codex"
	return []string{
		"../codex-linux-" + arch + "/" + rel,
		"node_modules/@openai/codex-linux-" + arch + "/" + rel,
		rel,
	}
}}

// Native is an agent's native executable on the host, ready to be
// bind-mounted read-only into a Docker sandbox.
type Native struct {
	// Path is the absolute host path, symlinks resolved.
	Path string
	// Interp is the ELF interpreter (dynamic loader) the binary needs, e.g.
	// "/lib64/ld-linux-x86-64.so.2" for Claude Code's glibc build; "" for a
	// static binary (Codex), which runs in an image with no libc at all.
	Interp string
	// Package and Entry are set for a CLI that is a Node.js program
	// (Spec.Node): Package is the host folder of its npm package, to be
	// mounted read-only, and Entry the script to run in it (a slash path
	// relative to Package, e.g. "bundle/gemini.js"); Path and Interp are
	// then those of the node executable that runs it.
	Package, Entry string
}

// Static reports whether the executable needs no dynamic loader.
func (n Native) Static() bool { return n.Interp == "" }

// ErrNotNative is wrapped by NativeExecutable's error when no native
// executable was found for the agent (a Node script without a known
// layout, a missing platform package, another architecture).
var ErrNotNative = errors.New("no native executable for the agent")

// NativeExecutable finds the native executable to bind-mount into a Docker
// sandbox for the agent spec describes, given onPath, the agent's path on
// the host's PATH (or --agent-bin). Symlinks are resolved. When onPath
// already is an ELF executable for this machine it is the answer; else, for
// an agent with an npm layout (claude, codex), the main package's folder is
// found above onPath (the folder whose package.json names spec.Package) and
// the layout's candidates are tried in order. Errors wrap ErrNotNative (with
// what was tried) or the filesystem's error.
func NativeExecutable(spec Spec, fsys HostFS, onPath string) (Native, error) {
	return nativeExecutable(spec, fsys, onPath, runtime.GOARCH)
}

func nativeExecutable(spec Spec, fsys HostFS, onPath, goarch string) (Native, error) {
	real, err := fsys.EvalSymlinks(onPath)
	if err != nil {
		return Native{}, fmt.Errorf("agent %s: resolving %s: %w", spec.Name, onPath, err)
	}
	n, elfErr := inspectELF(fsys, real, goarch)
	if elfErr == nil {
		return n, nil
	}
	if spec.Layout == nil || spec.Package == "" {
		return Native{}, fmt.Errorf("agent %s: %s is not a native executable for linux/%s (%v); a Docker sandbox needs an image that provides its runtime: %w",
			spec.Name, real, goarch, elfErr, ErrNotNative)
	}
	pkgDir, err := findPackage(fsys, filepath.Dir(real), spec.Package)
	if err != nil {
		return Native{}, fmt.Errorf("agent %s: %s is not a native executable (%v) and no %s package folder is above it: %w",
			spec.Name, real, elfErr, spec.Package, ErrNotNative)
	}
	tried := []string{real}
	for _, rel := range spec.Layout.Candidates(goarch) {
		c := filepath.Join(pkgDir, filepath.FromSlash(rel))
		if c == real {
			continue
		}
		tried = append(tried, c)
		cr, err := fsys.EvalSymlinks(c)
		if err != nil {
			continue
		}
		if n, err := inspectELF(fsys, cr, goarch); err == nil {
			return n, nil
		}
	}
	return Native{}, fmt.Errorf("agent %s: no native executable for linux/%s in %s (tried %v); reinstall %s with its optional dependencies: %w",
		spec.Name, goarch, pkgDir, tried, spec.Package, ErrNotNative)
}

// elfMachines maps Go architectures to ELF machine types.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "386": elf.EM_386, "arm": elf.EM_ARM, "riscv64": elf.EM_RISCV, "ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390}

// inspectELF checks that name is a regular, executable ELF file for goarch
// and reads its interpreter.
func inspectELF(fsys HostFS, name, goarch string) (Native, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return Native{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Native{}, err
	}
	if !fi.Mode().IsRegular() {
		return Native{}, fmt.Errorf("not a regular file")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return Native{}, fmt.Errorf("not executable")
	}
	var magic [4]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil || string(magic[:]) != elf.ELFMAG {
		if _, err := f.ReadAt(magic[:2], 0); err == nil && string(magic[:2]) == "#!" {
			return Native{}, fmt.Errorf("a script")
		}
		return Native{}, fmt.Errorf("not an ELF file")
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return Native{}, fmt.Errorf("unreadable ELF file: %v", err)
	}
	if want, ok := elfMachines[goarch]; ok && ef.Machine != want {
		return Native{}, fmt.Errorf("built for %v, not %s", ef.Machine, goarch)
	}
	n := Native{Path: name}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
		if err != nil {
			return Native{}, fmt.Errorf("unreadable ELF interpreter: %v", err)
		}
		for len(b) > 0 && b[len(b)-1] == 0 {
			b = b[:len(b)-1]
		}
		n.Interp = string(b)
	}
	return n, nil
}

// findPackage walks up at most four folders from dir to the one whose
// package.json is named pkg.
func findPackage(fsys HostFS, dir, pkg string) (string, error) {
	for i := 0; i < 4; i++ {
		if name, err := packageName(fsys, filepath.Join(dir, "package.json")); err == nil && name == pkg {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fs.ErrNotExist
}

func packageName(fsys HostFS, name string) (string, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	if err != nil {
		return "", err
	}
	var m struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return "", err
	}
	return m.Name, nil
}

// NodeProgram finds what a Docker sandbox needs to run an agent that is a
// Node.js program (Spec.Node, the Gemini CLI): onPath is the command on the
// host's PATH (or --agent-bin; npm links it to the package's script), node
// the host's node executable. The package folder is the one above the
// script whose package.json names spec.Package; node must be a native
// executable for this machine. Errors wrap ErrNotNative or the
// filesystem's error.
func NodeProgram(spec Spec, fsys HostFS, onPath, node string) (Native, error) {
	return nodeProgram(spec, fsys, onPath, node, runtime.GOARCH)
}

func nodeProgram(spec Spec, fsys HostFS, onPath, node, goarch string) (Native, error) {
	script, err := fsys.EvalSymlinks(onPath)
	if err != nil {
		return Native{}, fmt.Errorf("agent %s: resolving %s: %w", spec.Name, onPath, err)
	}
	pkgDir, err := findPackage(fsys, filepath.Dir(script), spec.Package)
	if err != nil {
		return Native{}, fmt.Errorf("agent %s: %s is not inside an npm package named %s: %w", spec.Name, script, spec.Package, ErrNotNative)
	}
	entry, err := filepath.Rel(pkgDir, script)
	if err != nil || !filepath.IsLocal(entry) {
		return Native{}, fmt.Errorf("agent %s: %s is not inside its package folder %s: %w", spec.Name, script, pkgDir, ErrNotNative)
	}
	if node == "" {
		return Native{}, fmt.Errorf("agent %s is a Node.js program and no node executable is on this machine's PATH: %w", spec.Name, ErrNotNative)
	}
	realNode, err := fsys.EvalSymlinks(node)
	if err != nil {
		return Native{}, fmt.Errorf("agent %s: resolving node %s: %w", spec.Name, node, err)
	}
	n, err := inspectELF(fsys, realNode, goarch)
	if err != nil {
		return Native{}, fmt.Errorf("agent %s: node at %s is not a native executable for linux/%s (%v): %w", spec.Name, realNode, goarch, err, ErrNotNative)
	}
	n.Package, n.Entry = pkgDir, filepath.ToSlash(entry)
	return n, nil
}
