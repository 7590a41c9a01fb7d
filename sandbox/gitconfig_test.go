package sandbox

import (
	"strings"
	"testing"
)

// checkoutToken is the base64 of "x-access-token:ghs_…" as actions/checkout
// writes it (a made-up token of the real shape).
const checkoutToken = "eC1hY2Nlc3MtdG9rZW46Z2hzX2dvYWxydW5UZXN0VG9rZW4wMTIzNDU2Nzg5QUJD"

// checkoutConfig is .git/config as actions/checkout (v4) leaves it with
// persist-credentials on: git init's core settings, the origin remote,
// gc.auto 0, the token as an http.https://github.com/.extraheader, and the
// branch it checked out.
const checkoutConfig = `[core]
	repositoryformatversion = 0
	filemode = true
	bare = false
	logallrefupdates = true
[remote "origin"]
	url = https://github.com/goalrun/goalrun
	fetch = +refs/heads/*:refs/remotes/origin/*
[gc]
	auto = 0
[http "https://github.com/"]
	extraheader = AUTHORIZATION: basic ` + checkoutToken + `
[branch "main"]
	remote = origin
	merge = refs/heads/main
`

func TestSanitizeGitConfig(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		gone     []string // must not be in the output
		kept     []string // must still be there
		same     bool     // nothing to remove: the input comes back as it is
	}{
		{
			name: "actions/checkout's persisted token",
			in:   checkoutConfig,
			gone: []string{checkoutToken, "extraheader", "AUTHORIZATION"},
			kept: []string{"[core]\n\trepositoryformatversion = 0\n", "[remote \"origin\"]\n\turl = https://github.com/goalrun/goalrun\n", "[gc]\n\tauto = 0\n", "[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n"},
		},
		{
			name: "no credentials",
			in:   "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = git@github.com:goalrun/goalrun.git\n\turl2 = ssh://git@github.com/goalrun/goalrun\n",
			same: true,
		},
		{
			name: "token URLs in remotes, insteadOf and proxies",
			in: "[remote \"origin\"]\n\turl = https://x-access-token:ghs_URLTOKEN1@github.com/o/r.git\n" +
				"[remote \"fork\"]\n\turl = https://ghp_BARETOKEN2@github.com/o/r\n" +
				"[url \"https://oauth2:glpat-INSTEADOF3@gitlab.com/\"]\n\tinsteadOf = https://gitlab.com/\n" +
				"[http]\n\tproxy = http://proxyuser:PROXYPASS4@proxy.example:3128\n" +
				"[remote \"ssh\"]\n\turl = ssh://git:SSHPASS5@host/r\n",
			gone: []string{"ghs_URLTOKEN1", "ghp_BARETOKEN2", "glpat-INSTEADOF3", "PROXYPASS4", "SSHPASS5", "proxyuser"},
			kept: []string{"url = https://github.com/o/r.git", "url = https://github.com/o/r\n", "[url \"https://gitlab.com/\"]", "insteadOf = https://gitlab.com/", "proxy = http://proxy.example:3128", "url = ssh://git@host/r"},
		},
		{
			name: "credential sections and helpers",
			in: "[credential]\n\thelper = store --file=/home/u/.git-credentials\n\tusername = alice\n" +
				"[credential \"https://github.com\"]\n\thelper = !gh auth git-credential\n" +
				"[user]\n\tname = Alice\n",
			gone: []string{"helper", "git-credentials", "alice", "gh auth", "[credential"},
			kept: []string{"[user]\n\tname = Alice\n"},
		},
		{
			name: "keys that name a secret, any case, header on the same line",
			in:   "[github] token = ghp_SAMELINE6\n[hub]\n\toauthToken = OAUTH7\n[http \"https://x/\"]\n\tExtraHeader = Authorization: bearer BEARER8\n\tsslVerify = true\n[sendemail]\n\tsmtpPass = x\n\tsmtpPassword = SMTP9\n",
			gone: []string{"ghp_SAMELINE6", "OAUTH7", "BEARER8", "SMTP9"},
			kept: []string{"[github]", "[hub]\n", "\tsslVerify = true\n"},
		},
		{
			name: "a dropped value's continuation lines go too",
			in:   "[http]\n\textraheader = AUTHORIZATION: \\\n  basic CONT10\n\tpostBuffer = 1\n",
			gone: []string{"CONT10"},
			kept: []string{"\tpostBuffer = 1\n"},
		},
		{
			name: "deprecated dotted header",
			in:   "[http.https://github.com/]\n\textraheader = AUTHORIZATION: basic DOTTED11\n",
			gone: []string{"DOTTED11"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, changed := sanitizeGitConfig([]byte(tc.in))
			if tc.same {
				if changed || string(out) != tc.in {
					t.Fatalf("changed a config without credentials:\n%s", out)
				}
				return
			}
			if !changed || !strings.HasPrefix(string(out), gitConfigNote) {
				t.Fatalf("changed = %v, want true and the note first:\n%s", changed, out)
			}
			body := strings.TrimPrefix(string(out), gitConfigNote)
			for _, g := range tc.gone {
				if strings.Contains(body, g) {
					t.Errorf("%q is still there:\n%s", g, out)
				}
			}
			for _, k := range tc.kept {
				if !strings.Contains(string(out), k) {
					t.Errorf("%q was lost:\n%s", k, out)
				}
			}
			if again, changed := sanitizeGitConfig(out); changed || string(again) != string(out) {
				t.Errorf("sanitizing twice changes it again:\n%s", again)
			}
		})
	}
}

func TestIsGitConfigFileAndPath(t *testing.T) {
	for _, tc := range []struct {
		rel            string
		config, inside bool
	}{
		{".git/config", true, true},
		{"sub/.git/config", true, true},
		{".git/modules/lib/x/config", true, true},
		{".git/worktrees/w/config.worktree", true, true},
		{"config", false, false},
		{"app/config", false, false},
		{".gitconfig", false, false},
		{".git", false, true},
		{"a/.git", false, true},
		{".github/config", false, false},
		{"x.git/config", false, false},
	} {
		if got := isGitConfigFile(tc.rel); got != tc.config {
			t.Errorf("isGitConfigFile(%q) = %v, want %v", tc.rel, got, tc.config)
		}
		if got := isGitPath(tc.rel); got != tc.inside {
			t.Errorf("isGitPath(%q) = %v, want %v", tc.rel, got, tc.inside)
		}
	}
}
