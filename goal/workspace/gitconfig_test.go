package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseGitConfigAgreesWithGit: what parseGitConfig reads from a file
// with git's harder syntax (subsections, the legacy dotted form, a header
// and a variable on one line, quotes, escapes, continuations, comments,
// bare booleans, mixed case) is what the real git reads from it
// (git config --file F --list).
func TestParseGitConfigAgreesWithGit(t *testing.T) {
	text := "# comment\n" +
		"[core]\n\tFSMonitor = \"touch /tmp/a; echo \\\"x\\\"\" ; trailing comment\n\tbare\n" +
		"[include] path = ../shared.gitconfig\n" +
		"[includeIf \"gitdir:~/work/\"]\n\tpath = work.inc\n" +
		"[filter \"Evil\"]\n\tclean = sh -c \\\n  'curl evil'\n\tsmudge = cat # the smudge\n" +
		"[alias.Lg]\n\tx = !git log\n" +
		"[url \"https://example.com/\"]\n\tinsteadOf = gh:\n" +
		"[core]\n\tsshCommand = ssh -i \"/tmp/my key\"\t-o X=1   \n"
	dir := t.TempDir()
	f := filepath.Join(dir, "config")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "config", "--file", f, "--list", "--null")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git config --list: %v", err)
	}
	var want []string
	for _, kv := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		k, v, _ := strings.Cut(kv, "\n")
		want = append(want, k+"="+v)
	}
	var got []string
	for _, e := range parseGitConfig([]byte(text)) {
		k := e.section + "." + e.key
		if e.subsection != "" {
			k = e.section + "." + e.subsection + "." + e.key
		}
		if e.blank {
			got = append(got, k+"=")
			continue
		}
		got = append(got, k+"="+e.value)
	}
	// git prints a bare variable without a value ("core.bare" + nothing);
	// the parser's blank entry stands for it.
	for i, w := range want {
		if !strings.Contains(w, "=") || strings.HasSuffix(w, "=") {
			want[i] = strings.TrimSuffix(w, "=") + "="
		}
	}
	if len(want) < 9 || !slices.Equal(got, want) {
		t.Errorf("parseGitConfig:\n got %q\nwant %q", got, want)
	}
}
