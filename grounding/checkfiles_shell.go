package grounding

import (
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// shellScriptDepth bounds how deep "sh -c '…'" scripts nested in a command
// line are parsed: 4 levels.
const shellScriptDepth = 4

// shellCommands parses a shell command line with a real shell parser
// (mvdan.cc/sh; the check runs as sh -c, so bash syntax is tried first and
// POSIX after) without running anything, and returns its simple commands in
// source order, each as its words after quote removal: assignments before
// the command (FOO=1) are left out, and a word whose value only exists when
// the shell runs ($VAR, $(…), `…`) is "". The script of "sh -c SCRIPT"
// (bash, dash, zsh, …) and of "eval WORDS" is parsed in turn, up to
// shellScriptDepth levels. ok is false when the line does not parse (the
// shell would refuse it too); cmds then holds its blank-separated fields as
// one command, so that nothing it names is lost.
func shellCommands(src string) (cmds [][]string, ok bool) {
	cmds, ok = parseCommands(src, 0)
	if !ok {
		return [][]string{strings.Fields(src)}, false
	}
	return cmds, true
}

func parseCommands(src string, depth int) ([][]string, bool) {
	var file *syntax.File
	var err error
	for _, lang := range []syntax.LangVariant{syntax.LangBash, syntax.LangPOSIX} {
		if file, err = syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(src), ""); err == nil {
			break
		}
	}
	if err != nil {
		return nil, false
	}
	var cmds [][]string
	syntax.Walk(file, func(n syntax.Node) bool {
		call, isCall := n.(*syntax.CallExpr)
		if !isCall || len(call.Args) == 0 {
			return true
		}
		words := make([]string, len(call.Args))
		for i, w := range call.Args {
			words[i], _ = wordLiteral(w)
		}
		cmds = append(cmds, words)
		if depth >= shellScriptDepth {
			return true
		}
		scripts := nestedScripts(words)
		for k, w := range words {
			if slices.Contains(scripts, w) {
				words[k] = "" // the script's own words follow as commands
			}
		}
		for _, script := range scripts {
			if inner, ok := parseCommands(script, depth+1); ok {
				cmds = append(cmds, inner...)
			} else {
				cmds = append(cmds, strings.Fields(script))
			}
		}
		return true
	})
	return cmds, true
}

// nestedScripts returns the shell scripts a command runs from its words:
// the argument of -c for a shell (sh -c 'go test ./...'), and the joined
// arguments of eval. Commands that run other commands (env, timeout, nice,
// xargs, …) are seen through by commandName.
func nestedScripts(words []string) []string {
	name, rest := commandName(words)
	switch name {
	case "sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "busybox":
		for i, w := range rest {
			if w == "-c" || (strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "--") && strings.HasSuffix(w, "c")) {
				if i+1 < len(rest) && rest[i+1] != "" {
					return []string{rest[i+1]}
				}
			}
		}
	case "eval":
		return []string{strings.Join(rest, " ")}
	}
	return nil
}

// commandName returns the program a simple command runs (its base name)
// and its arguments, seeing through programs that run another one with
// their options first: env (and its NAME=value words), timeout, nice,
// nohup, time, command, exec, stdbuf, xargs, sudo. "" when the program
// is not literal.
func commandName(words []string) (string, []string) {
	for i := 0; i < len(words); i++ {
		name := path.Base(words[i])
		if words[i] == "" {
			return "", words[i+1:]
		}
		switch name {
		case "env", "timeout", "nice", "nohup", "time", "command", "exec", "stdbuf", "xargs", "sudo", "ionice", "setsid":
			// Skip the wrapper's options and operands that are not the
			// program: options, NAME=value, and timeout's duration.
			j := i + 1
			for j < len(words) && (strings.HasPrefix(words[j], "-") || strings.Contains(words[j], "=") ||
				(name == "timeout" && j == i+1 && words[j] != "" && strings.Trim(words[j], "0123456789.smhd") == "")) {
				j++
			}
			i = j - 1
			continue
		}
		return name, words[i+1:]
	}
	return "", nil
}

// wordLiteral returns the value a shell word has after quote removal, and
// whether it is literal (no expansion the shell would only do when it
// runs). A word that is not literal returns "".
func wordLiteral(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(unescapeBare(p.Value))
		case *syntax.SglQuoted:
			if p.Dollar && strings.Contains(p.Value, `\`) {
				return "", false // $'…' with escapes
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, in := range p.Parts {
				lit, ok := in.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(unescapeDouble(lit.Value))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// unescapeBare removes the backslashes of an unquoted word (a backslash
// quotes the next character; backslash-newline is removed).
func unescapeBare(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unescapeDouble removes the backslashes that quote inside double quotes:
// before $ ` " \ and newline only.
func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ShellWords returns every literal word of a command line's simple
// commands (shellCommands), in order, nested scripts included.
func ShellWords(s string) []string {
	cmds, _ := shellCommands(s)
	var words []string
	for _, c := range cmds {
		for _, w := range c {
			if w != "" {
				words = append(words, w)
			}
		}
	}
	return words
}

// checkRunners records in runs what one simple command of the check runs
// for the Go rules: "go" when it runs the go command (or a wrapper of go
// test), "gotest" when that runs tests (go test, gotestsum, ginkgo,
// richgo test).
func checkRunners(words []string, runs map[string]bool) {
	switch name, _ := commandName(words); name {
	case "gotestsum", "ginkgo", "richgo", "go-test-coverage", "tparse":
		runs["go"], runs["gotest"] = true, true
		return
	}
	if args, ok := goArgs(words); ok {
		runs["go"] = true
		if goSubcommand(args) == "test" {
			runs["gotest"] = true
		}
	}
}

// goArgs returns the go command's arguments when a simple command runs
// it: itself or behind a wrapper commandName sees through, or among the
// words of a program that runs the rest of its words as a command line
// (xvfb-run go test, unbuffer go test, …).
func goArgs(words []string) ([]string, bool) {
	name, args := commandName(words)
	if name == "go" {
		return args, true
	}
	if k := slices.IndexFunc(args, func(w string) bool { return path.Base(w) == "go" }); k >= 0 {
		return args[k+1:], true
	}
	return nil, false
}

// goSubcommand is the subcommand among the go command's arguments ("" for
// none): the first word that is not a flag, -C taking the next word (go
// -C dir test: the only flag before the subcommand).
func goSubcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-C":
			i++
		case !strings.HasPrefix(args[i], "-"):
			return args[i]
		}
	}
	return ""
}

// goReadOnlyCommands are the go command's subcommands that build and run
// none of the tree's code (go help).
var goReadOnlyCommands = map[string]bool{"vet": true, "fmt": true, "list": true, "mod": true, "env": true, "version": true,
	"doc": true, "help": true, "clean": true, "work": true, "fix": true, "telemetry": true, "bug": true}

// goRunsCode reports whether a check command line runs the go command
// with a subcommand that builds and runs code of the tree (go run, go
// build whose result the line may then run, go generate, go tool, go
// install, or one goalrun does not know), test or not.
func goRunsCode(check string) bool {
	cmds, _ := shellCommands(check)
	for _, c := range cmds {
		if args, ok := goArgs(c); ok {
			if sub := goSubcommand(args); sub != "" && !goReadOnlyCommands[sub] {
				return true
			}
		}
	}
	return false
}

// programUnknown reports whether a simple command of a check command line
// runs a program named only when the shell runs ($(which go) test, $GO
// test, "$RUNNER" ./...).
func programUnknown(check string) bool {
	cmds, ok := shellCommands(check)
	if !ok {
		return true
	}
	for _, c := range cmds {
		if name, _ := commandName(c); name == "" {
			return true
		}
	}
	return false
}
