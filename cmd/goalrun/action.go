package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v75/github"
	"github.com/sethvargo/go-githubactions"

	"github.com/goalrun/goalrun/report"
	ghsink "github.com/goalrun/goalrun/report/github"
)

// actionInput is one input of action.yml. flag is the `goalrun run` flag it
// maps to ("" for inputs only the action uses); how says how the value
// becomes flags.
type actionInput struct {
	name string
	flag string
	how  inputKind
}

type inputKind int

const (
	asIs       inputKind = iota // one flag with the value
	perLine                     // one flag per non-empty line
	perItem                     // one flag per item, split on newlines and commas
	minutes                     // a whole number of minutes → --timeout=Nm
	workspace                   // a path inside GITHUB_WORKSPACE (links resolved) → --<flag>
	actionOnly                  // read by the action itself
)

// actionInputs lists every input of action.yml, in its order. A test keeps
// it, action.yml and README.md's table identical.
var actionInputs = []actionInput{
	{"agent", "agent", asIs},
	{"agent-bin", "agent-bin", asIs},
	{"prompt", "prompt", asIs},
	{"prompt-file", "prompt-file", workspace},
	{"until", "until", asIs},
	{"infer-until", "infer-until", asIs},
	{"max-iterations", "max-iterations", asIs},
	{"timeout-minutes", "timeout", minutes},
	{"max-cost-usd", "max-cost-usd", asIs},
	{"sandbox", "sandbox", asIs},
	{"image", "image", asIs},
	{"network", "network", asIs},
	{"allow-hosts", "allow-host", perItem},
	{"model", "model", asIs},
	{"agent-args", "agent-arg", perLine},
	{"working-directory", "workdir", workspace},
	{"config", "config", workspace},
	{"github-token", "", actionOnly},
	{"check-name", "", actionOnly},
	{"comment", "", actionOnly},
	{"open-pr", "", actionOnly},
	{"pr-branch-prefix", "", actionOnly},
	{"base-branch", "", actionOnly},
	{"trigger-phrase", "", actionOnly},
	{"allowed-bots", "", actionOnly},
}

// publishTimeout bounds reporting to GitHub after the run; publishGrace
// does after an interruption (the document must be out within seconds).
const (
	publishTimeout = 2 * time.Minute
	publishGrace   = 4 * time.Second
)

// actionEnviron lists the process environment, to find INPUT_* variables
// action.yml does not declare (a lookupEnv cannot enumerate).
var actionEnviron = os.Environ

// actionCmd is `goalrun action`, the container action's entry point: it
// reads the inputs (INPUT_*) and the workflow context (GITHUB_*, the event
// payload), maps the inputs to the same validated configuration as `goalrun
// run`, runs the same engine with a live check run, and then publishes the
// document: check run, pull request comment, fix pull request, job summary,
// step outputs. A failing GitHub destination is a warning; the exit code is
// decided by the run alone (0 met, 1 not met, 2 bad input, 3 failed, 130
// interrupted). Comment events that do not trigger a run exit 0.
func actionCmd(ctx context.Context, args []string, env lookupEnv, stdout, stderr io.Writer) int {
	getenv := func(k string) string { v, _ := env(k); return v }
	log := ghsink.NewLog(stdout)
	defer log.Close()
	a := githubactions.New(githubactions.WithGetenv(getenv), githubactions.WithWriter(log.Commands()))
	act := &action{ctx: ctx, env: env, getenv: getenv, log: log, gha: a}
	if len(args) > 0 && args[0] != "" {
		a.Errorf("goalrun action takes no arguments (got %q); it reads the action's inputs from INPUT_* variables", args[0])
		return exitBadInput
	}
	return act.run()
}

// action is one `goalrun action` invocation.
type action struct {
	ctx    context.Context
	env    lookupEnv
	getenv func(string) string
	log    *ghsink.Log
	gha    *githubactions.Action

	ev       *ghsink.Event
	client   *gh.Client
	notes    []string // failures shown above the report in the job summary
	outputs  bool     // GITHUB_OUTPUT is usable
	summary  bool     // GITHUB_STEP_SUMMARY is usable
	docPath  string   // where the document is written (container path)
	docShown string   // the document path as later steps see it
}

func (a *action) input(name string) string { return a.gha.GetInput(name) }

// warn issues a ::warning:: and remembers it for the job summary.
func (a *action) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	a.gha.Warningf("%s", msg)
	a.notes = append(a.notes, msg)
}

func (a *action) run() int {
	probs := ghsink.CheckFileCommands(a.getenv)
	for name, err := range probs {
		a.gha.Warningf("%v: the %s will not be written", err, map[string]string{
			"GITHUB_OUTPUT": "step outputs", "GITHUB_STEP_SUMMARY": "job summary"}[name])
	}
	a.outputs, a.summary = probs["GITHUB_OUTPUT"] == nil, probs["GITHUB_STEP_SUMMARY"] == nil

	token := a.input("github-token")
	ghsink.Mask(a.gha, token)
	a.docPath, a.docShown = documentPath(a.getenv, a.input("check-name"))

	if err := a.checkInputs(); err != nil {
		return a.startupFailure(report.StartupError(report.ErrBadInput, err.Error(),
			"Check the step's with: block against the inputs documented in action.yml."))
	}
	ev, err := a.event()
	if err != nil {
		return a.startupFailure(report.StartupError(report.ErrBadInput, err.Error(),
			"Run goalrun action inside a GitHub Actions job, where GITHUB_EVENT_NAME, GITHUB_EVENT_PATH and GITHUB_REPOSITORY are set."))
	}
	a.ev = ev
	if token != "" {
		c, err := ghsink.NewClient(a.getenv("GITHUB_API_URL"), token, nil)
		if err != nil {
			return a.startupFailure(report.StartupError(report.ErrBadInput, err.Error()))
		}
		a.client = c
	} else {
		a.warn("github-token is empty: no check run, comment or pull request will be made")
	}

	// Comment commands: /goalrun from someone with write access, or nothing.
	prompt := a.input("prompt")
	if ev.Comment != nil {
		d := ghsink.Trigger{Phrase: a.input("trigger-phrase"), AllowedBots: splitItems(a.input("allowed-bots"))}.Decide(ev)
		if !d.Triggered {
			a.gha.Noticef("goalrun did not start: %s", d.Reason)
			a.writeSkipped()
			return exitMet
		}
		if !d.Allowed {
			a.refuse(d)
			return exitMet
		}
		if d.Prompt != "" {
			prompt = d.Prompt
		}
	}
	if ev.HeadSHA == "" && ev.IsPullRequest && a.client != nil {
		ev.HeadSHA = a.pullHeadSHA(ev.Number)
	}

	cfgArgs, err := a.runArgs(prompt)
	if err != nil {
		return a.startupFailure(report.StartupError(report.ErrBadInput, err.Error()))
	}
	cfg, err := parseRunArgs(cfgArgs, a.env, func() (string, error) { return a.workspaceRoot(), nil })
	if errors.Is(err, flag.ErrHelp) {
		err = badInput("an input asked for help")
	}
	if err != nil {
		se := asStartupError(err)
		return a.startupFailure(report.StartupError(se.code, se.message, se.suggestions...))
	}
	if bad := prConfigKeys(ev.IsPullRequest, cfg.fileKeys); len(bad) > 0 {
		return a.startupFailure(report.StartupError(report.ErrBadInput,
			fmt.Sprintf("the config file %s sets %s on a pull request event: the checkout is the pull request author's, so on these events a config file may set only %s",
				cfg.configFile, strings.Join(bad, ", "), strings.Join(prConfigAllowed, ", ")),
			"Set these as inputs of the goalrun step in the workflow, or do not name a config file for pull request events."))
	}
	if err := checkInsideWorkspace(a.workspaceRoot(), cfg.dir, cfg.configFile); err != nil {
		return a.startupFailure(report.StartupError(report.ErrBadInput, err.Error(),
			"Keep working-directory, config and the config file's workdir inside the repository checkout, without symbolic links that lead out of it."))
	}
	ghsink.Mask(a.gha, secretValues(cfg.secrets)...)
	if se := actionImageProblem(cfg, a.getenv("PATH"), isExecutableFile); se != nil {
		return a.startupFailure(report.StartupError(se.code, se.message, se.suggestions...))
	}

	check := a.checkRun(cfg.maxIterations)
	if check != nil {
		defer func() {
			// Interrupted (SIGINT/SIGTERM): never leave the run in_progress.
			// Otherwise publish completed it, or tried to and warned; a
			// failed completion is left alone (GitHub may have applied it),
			// never turned into "cancelled".
			if a.ctx.Err() == nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), publishGrace)
			defer cancel()
			if err := check.Cancel(ctx); err != nil {
				a.gha.Warningf("%v", err)
			}
		}()
	}
	eng := defaultEngine()
	sinks := []report.Sink{report.NewProgressSinkSince(a.log.Untrusted(), eng.now())}
	if check != nil {
		sinks = append(sinks, check)
	}
	eng.warn = a.log.Untrusted()
	doc, code := execute(a.ctx, cfg, eng, sinks...)
	a.publish(doc, check)
	return code
}

// refuse answers a /goalrun comment whose author may not start a run: a
// new comment (never the sticky report's, whose marker it does not carry),
// or with comment: off only a notice in the log and the job summary.
func (a *action) refuse(d ghsink.Decision) {
	a.gha.Noticef("goalrun did not start: %s", d.Reason)
	mode := firstNonEmpty(a.input("comment"), ghsink.CommentSticky)
	switch {
	case mode == ghsink.CommentOff:
		if a.summary {
			s := &ghsink.StepSummary{Path: a.getenv("GITHUB_STEP_SUMMARY")}
			if err := s.Notice("goalrun did not start: " + d.Reason + " (comment: off, so no reply was posted)"); err != nil {
				a.gha.Warningf("%v", err)
			}
		}
	case a.client != nil && a.ev.Number != 0:
		if err := a.comment(ghsink.CommentNew).Say(a.publishContext(), ghsink.RefusalMessage(d, a.ev.Comment.Login)); err != nil {
			a.gha.Warningf("could not reply to the comment: %v", err)
		}
	}
	a.writeSkipped()
}

// checkInputs refuses INPUT_* variables action.yml does not declare and
// malformed values of the action's own inputs.
func (a *action) checkInputs() error {
	known := map[string]bool{}
	for _, in := range actionInputs {
		known["INPUT_"+strings.ToUpper(in.name)] = true
	}
	var unknown []string
	for _, kv := range actionEnviron() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "INPUT_") && !known[k] {
			if _, ok := a.env(k); ok {
				unknown = append(unknown, strings.ToLower(strings.TrimPrefix(k, "INPUT_")))
			}
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unknown input(s): %s (goalrun's inputs are listed in action.yml)", strings.Join(unknown, ", "))
	}
	switch c := a.input("comment"); c {
	case "", ghsink.CommentOff, ghsink.CommentSticky, ghsink.CommentNew:
	default:
		return fmt.Errorf("input comment: %q is not off, sticky or new", c)
	}
	if v := a.input("open-pr"); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("input open-pr: %q is not true or false", v)
		}
	}
	if v := a.input("pr-branch-prefix"); v != "" {
		if why := refNameProblem(v); why != "" {
			return fmt.Errorf("input pr-branch-prefix: %q cannot start a branch name: %s (git check-ref-format's rules); use letters, digits, '-', '_', '.' and '/' between parts, e.g. goalrun or bots/goalrun", v, why)
		}
	}
	return nil
}

// refNameProblem says why prefix cannot be the start of a branch name
// "<prefix>/<slug>" under git check-ref-format's rules (and GitHub's, which
// are git's), or "" when it can.
func refNameProblem(prefix string) string {
	for _, r := range prefix {
		switch {
		case r < 0x20 || r == 0x7f:
			return "it holds a control character"
		case r == ' ':
			return "it holds a space"
		case strings.ContainsRune("~^:?*[\\", r):
			return fmt.Sprintf("it holds %q", r)
		}
	}
	switch {
	case strings.HasPrefix(prefix, "refs/"):
		return `it starts with "refs/" (goalrun adds refs/heads/ itself)`
	case strings.HasPrefix(prefix, "-"):
		return `it starts with "-"`
	case strings.HasPrefix(prefix, "/"):
		return `it starts with "/"`
	case strings.HasSuffix(prefix, "/"):
		return `it ends with "/" (goalrun adds the "/" before the slug)`
	case strings.Contains(prefix, ".."):
		return `it holds ".."`
	case strings.Contains(prefix, "@{"):
		return `it holds "@{"`
	case strings.Contains(prefix, "//"):
		return `it holds "//"`
	case prefix == "@":
		return `it is "@"`
	}
	for _, part := range strings.Split(prefix, "/") {
		switch {
		case strings.HasPrefix(part, "."):
			return fmt.Sprintf("its part %q starts with \".\"", part)
		case strings.HasSuffix(part, ".lock"):
			return fmt.Sprintf("its part %q ends with \".lock\"", part)
		}
	}
	return ""
}

// event reads the workflow's event.
func (a *action) event() (*ghsink.Event, error) {
	name := a.getenv("GITHUB_EVENT_NAME")
	if name == "" {
		return nil, errors.New("GITHUB_EVENT_NAME is not set: goalrun action must run in a GitHub Actions job")
	}
	var payload []byte
	if p := a.getenv("GITHUB_EVENT_PATH"); p != "" {
		b, err := readCapped(p, 25<<20) // GitHub caps webhook payloads at 25 MB
		if err != nil {
			return nil, fmt.Errorf("reading the event payload GITHUB_EVENT_PATH=%s: %v", p, err)
		}
		payload = b
	}
	return ghsink.ParseEvent(name, payload, a.getenv("GITHUB_REPOSITORY"), a.getenv("GITHUB_SHA"))
}

// pullHeadSHA looks up a pull request's head commit (issue_comment payloads
// do not carry it); "" when it cannot.
func (a *action) pullHeadSHA(n int) string {
	var pr *gh.PullRequest
	err := ghsink.Retry{}.Do(a.ctx, func(ctx context.Context) error {
		var err error
		pr, _, err = a.client.PullRequests.Get(ctx, a.ev.Owner, a.ev.Repo, n)
		return err
	})
	if err != nil {
		a.warn("could not read pull request #%d to find its head commit (the check run needs \"pull-requests: read\"): %v", n, err)
		return ""
	}
	return pr.GetHead().GetSHA()
}

// workspaceRoot is GITHUB_WORKSPACE, else the current directory.
func (a *action) workspaceRoot() string {
	if w := a.getenv("GITHUB_WORKSPACE"); w != "" {
		return w
	}
	wd, _ := os.Getwd()
	return wd
}

// runArgs maps the inputs to `goalrun run` flags. Empty inputs are not
// passed, so the config file the config input names and run's defaults
// apply; without that input no config file is read (--no-config), not even
// a .goalrun.yml in the checkout.
func (a *action) runArgs(prompt string) ([]string, error) {
	root := a.workspaceRoot()
	var args []string
	for _, in := range actionInputs {
		v := a.input(in.name)
		if in.name == "prompt" {
			v = strings.TrimSpace(prompt)
		}
		if v == "" {
			continue
		}
		switch in.how {
		case asIs:
			args = append(args, "--"+in.flag+"="+v)
		case perLine:
			for _, l := range strings.Split(v, "\n") {
				if l = strings.TrimSpace(l); l != "" {
					args = append(args, "--"+in.flag+"="+l)
				}
			}
		case perItem:
			for _, it := range splitItems(v) {
				args = append(args, "--"+in.flag+"="+it)
			}
		case minutes:
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("input %s: %q is not a positive whole number of minutes", in.name, v)
			}
			args = append(args, fmt.Sprintf("--%s=%dm", in.flag, n))
		case workspace:
			dir, err := inWorkspace(in.name, root, v)
			if err != nil {
				return nil, err
			}
			args = append(args, "--"+in.flag+"="+dir)
		}
	}
	if a.input("config") == "" {
		// The checkout is often not the workflow author's words (a pull
		// request's head carries its own .goalrun.yml, which could ask
		// for sandbox: local or another image): only a config file the
		// workflow names is read.
		args = append(args, "--no-config")
	}
	return append(args, "--output="+a.docPath), nil
}

// inWorkspace returns the path v of input name, relative to the workspace
// root, after checking that it stays inside the workspace (insideFolder).
func inWorkspace(name, root, v string) (string, error) {
	return insideFolder("input "+name, "the workspace", root, v)
}

// insideFolder returns the path v (relative to root) of what (named in the
// error: "input config", "config file F line 3: output"; root is called
// place there: "the workspace"), after checking
// that it stays inside root — textually and after resolving symbolic links,
// of root as well as of every element of v (the sandbox and the config
// loader follow links, so a link in the tree must not lead them out). The
// error names what, the link and where it points. When v passes through a
// link that stays inside, the resolved path is returned, so nothing can
// swap the link between this check and its use; a path that does not exist
// yet is returned as written (goalrun run reports it).
func insideFolder(what, place, root, v string) (string, error) {
	place += " " + root
	dir := filepath.Join(root, v)
	rel, err := filepath.Rel(root, dir)
	if err != nil || escapes(rel) {
		return "", fmt.Errorf("%s: %q leaves %s", what, v, place)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return dir, nil // no folder to resolve against: goalrun run reports it
	}
	cur, linked := root, false
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." || part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			break // the rest does not exist: no link to follow
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		linked = true
		target, _ := os.Readlink(cur)
		real, err := filepath.EvalSymlinks(cur)
		if err != nil {
			return "", fmt.Errorf("%s: %q passes through the symbolic link %s, which points to %s and cannot be resolved (%v); give a path inside %s without links",
				what, v, cur, target, err, place)
		}
		if r, err := filepath.Rel(realRoot, real); err != nil || escapes(r) {
			if real != target {
				target += " (" + real + ")"
			}
			return "", fmt.Errorf("%s: %q passes through the symbolic link %s, which points to %s, outside %s; goalrun refuses to follow it (give a path inside it without such links)",
				what, v, cur, target, place)
		}
	}
	if !linked {
		return dir, nil
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return dir, nil
	}
	if r, err := filepath.Rel(realRoot, real); err != nil || escapes(r) {
		return "", fmt.Errorf("%s: %q resolves to %s, outside %s", what, v, real, place)
	}
	return real, nil
}

// prConfigAllowed are the settings a config file may supply on a pull
// request event (pull_request, pull_request_target, a comment on a pull
// request), where the checkout — and so the file — is the pull request
// author's: what to do, never how it is isolated, checked or paid for.
var prConfigAllowed = []string{"prompt", "prompt-file", "workdir"}

// prConfigKeys returns the settings of keys a config file may not supply
// on a pull request event (none when pr is false).
func prConfigKeys(pr bool, keys []string) []string {
	if !pr {
		return nil
	}
	var bad []string
	for _, k := range keys {
		if !slices.Contains(prConfigAllowed, k) {
			bad = append(bad, k)
		}
	}
	return bad
}

// escapes says whether a path made by filepath.Rel leaves its base.
func escapes(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel)
}

// checkInsideWorkspace checks the final workdir and config file of a run
// (a config file's own workdir: key included) resolve inside the
// workspace.
func checkInsideWorkspace(root, dir, configFile string) error {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil
	}
	for _, p := range []struct{ what, path string }{{"the workdir", dir}, {"the config file", configFile}} {
		if p.path == "" {
			continue
		}
		real, err := filepath.EvalSymlinks(p.path)
		if err != nil {
			continue
		}
		if r, err := filepath.Rel(realRoot, real); err != nil || escapes(r) {
			from := ""
			if p.what == "the workdir" && configFile != "" {
				from = " (set by the config file " + configFile + ")"
			}
			return fmt.Errorf("%s %s%s resolves to %s, outside the workspace %s; the action only works inside GITHUB_WORKSPACE", p.what, p.path, from, real, root)
		}
	}
	return nil
}

// splitItems splits on newlines and commas, trimming and dropping empties.
func splitItems(s string) []string {
	var out []string
	for _, it := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == ',' }) {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// documentPath returns where the document is written and the path later
// steps see. In a container action the runner mounts its temp folder's
// _github_workflow at /github/workflow, so the document goes there and the
// output names the host path under RUNNER_TEMP; elsewhere it goes to
// RUNNER_TEMP (or the system temp folder).
func documentPath(getenv func(string) string, checkName string) (write, shown string) {
	name := "goalrun-" + ghsink.Slug(firstNonEmpty(checkName, "goalrun")) + ".json"
	if getenv("GITHUB_WORKSPACE") == "/github/workspace" {
		if fi, err := os.Stat("/github/workflow"); err == nil && fi.IsDir() {
			write = filepath.Join("/github/workflow", name)
			if rt := getenv("RUNNER_TEMP"); rt != "" {
				return write, filepath.Join(rt, "_github_workflow", name)
			}
			return write, write
		}
	}
	dir := firstNonEmpty(getenv("RUNNER_TEMP"), os.TempDir())
	p := filepath.Join(dir, name)
	return p, p
}

// publishContext bounds reporting after the run: its own deadline, not the
// run's (which may be cancelled).
func (a *action) publishContext() context.Context {
	wait := publishTimeout
	if a.ctx.Err() != nil {
		wait = publishGrace
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), wait)
	go func() { <-ctx.Done(); cancel() }()
	return ctx
}

// retry is the retry policy for publishing: shorter after an interruption.
func (a *action) retry() ghsink.Retry {
	if a.ctx.Err() != nil {
		return ghsink.Retry{Attempts: 2, MaxWait: time.Second}
	}
	return ghsink.Retry{}
}

// checkRun creates the live check run, or returns nil when there is no
// token or commit. A failure to create it is a warning.
func (a *action) checkRun(maxIter int) *ghsink.CheckRun {
	if a.client == nil {
		return nil
	}
	if a.ev.HeadSHA == "" {
		a.warn("no commit to attach the check run to (GITHUB_SHA is unset); the job summary carries the report")
		return nil
	}
	c := &ghsink.CheckRun{
		Client: a.client, Owner: a.ev.Owner, Repo: a.ev.Repo,
		Name: firstNonEmpty(a.input("check-name"), "goalrun"), HeadSHA: a.ev.HeadSHA,
		DetailsURL: runURL(a.getenv), MaxIterations: maxIter, Retry: a.retry(),
	}
	if err := c.Start(a.ctx); err != nil {
		a.warn("%v; the job summary carries the report instead", err)
		return nil
	}
	return c
}

// runURL is the workflow run's page, for the check run's details link.
func runURL(getenv func(string) string) string {
	server, repo, id := getenv("GITHUB_SERVER_URL"), getenv("GITHUB_REPOSITORY"), getenv("GITHUB_RUN_ID")
	if server == "" || repo == "" || id == "" {
		return ""
	}
	return fmt.Sprintf("%s/%s/actions/runs/%s", server, repo, id)
}

func (a *action) comment(mode string) *ghsink.Comment {
	return &ghsink.Comment{Client: a.client, Owner: a.ev.Owner, Repo: a.ev.Repo, Number: a.ev.Number,
		Mode: mode, Key: firstNonEmpty(a.input("check-name"), "goalrun"), Retry: a.retry()}
}

// stickyComment is the report's comment; in sticky mode it edits only a
// comment written by goalrun's own identity: the check run's app
// ("github-actions[bot]" for a GITHUB_TOKEN), else GET /user's login (a
// personal access token), else github-actions[bot].
func (a *action) stickyComment(ctx context.Context, mode string, check *ghsink.CheckRun) *ghsink.Comment {
	c := a.comment(mode)
	if mode == ghsink.CommentSticky {
		slug := ""
		if check != nil {
			slug = check.AppSlug()
		}
		c.Author = ghsink.Identity(ctx, a.client, slug, ghsink.Retry{Attempts: 2, MaxWait: 5 * time.Second})
	}
	return c
}

// publish sends doc everywhere. Failures are warnings; none changes the
// exit code.
func (a *action) publish(doc report.Document, check *ghsink.CheckRun) {
	ctx := a.publishContext()
	var pubs []ghsink.Publisher
	if check != nil {
		pubs = append(pubs, check)
	}
	mode := firstNonEmpty(a.input("comment"), ghsink.CommentSticky)
	var comment *ghsink.Comment
	if a.client != nil && a.ev.Number != 0 && mode != ghsink.CommentOff {
		comment = a.stickyComment(ctx, mode, check)
		pubs = append(pubs, comment)
	}
	var fix *ghsink.FixPR
	if open, _ := strconv.ParseBool(a.input("open-pr")); open && a.client != nil {
		name := firstNonEmpty(a.input("check-name"), "goalrun")
		fix = &ghsink.FixPR{
			Client: a.client, Owner: a.ev.Owner, Repo: a.ev.Repo,
			Workspace: a.workspaceRoot(), BaseSHA: a.ev.SHA,
			BaseBranch: firstNonEmpty(a.input("base-branch"), a.ev.DefaultBranch, a.getenv("GITHUB_REF_NAME")),
			Branch:     firstNonEmpty(a.input("pr-branch-prefix"), "goalrun") + "/" + ghsink.Slug(name),
			Title:      "goalrun: " + name + " passes again",
			Retry:      a.retry(),
		}
		pubs = append(pubs, fix)
	}
	for _, err := range ghsink.Publish(ctx, doc, pubs...) {
		a.warn("%v", err)
	}
	if comment != nil {
		for _, w := range comment.Warnings {
			a.warn("%s", w)
		}
	}
	prURL := ""
	if fix != nil {
		prURL = fix.URL
		switch {
		case fix.URL != "" && fix.Created:
			a.gha.Noticef("goalrun opened the fix pull request %s", fix.URL)
		case fix.URL != "":
			a.gha.Noticef("goalrun updated the fix pull request %s", fix.URL)
		case fix.Skipped != "":
			a.gha.Noticef("goalrun opened no pull request: %s", fix.Skipped)
		}
		if len(fix.WorkflowChanges) > 0 {
			a.warn("the agent changed workflow files, which goalrun never pushes: %s", strings.Join(fix.WorkflowChanges, ", "))
		}
	}
	if a.summary {
		s := &ghsink.StepSummary{Path: a.getenv("GITHUB_STEP_SUMMARY"), Notes: a.notes}
		if err := s.Publish(ctx, doc); err != nil {
			a.gha.Warningf("%v", err)
		}
	}
	a.writeOutputs(ghsink.OutputValues(doc, a.docShown, prURL))
	fmt.Fprintf(a.log.Untrusted(), "goalrun: %s\ndocument: %s\n", report.Headline(doc), a.docShown)
}

func (a *action) writeOutputs(values map[string]string) {
	if !a.outputs {
		return
	}
	if err := (ghsink.OutputsFile{Action: a.gha}).SetAll(values); err != nil {
		a.gha.Warningf("%v", err)
	}
}

// writeSkipped sets the outputs of a comment event that started nothing.
func (a *action) writeSkipped() {
	v := ghsink.OutputValues(report.Document{}, "", "")
	v["status"] = "skipped"
	a.writeOutputs(v)
}

// startupFailure reports a document made before any run existed (bad
// input): the document file, a completed check run when one can be made, the
// job summary, the outputs; then the exit code.
func (a *action) startupFailure(doc report.Document) int {
	a.gha.Errorf("goalrun: %s", doc.Message)
	if err := os.WriteFile(a.docPath, append(report.Encode(doc), '\n'), 0o644); err != nil {
		a.gha.Warningf("could not write the document %s: %v", a.docPath, err)
	}
	var check *ghsink.CheckRun
	if a.ev != nil && a.client != nil && a.ev.HeadSHA != "" {
		check = a.checkRun(0)
	}
	if a.ev == nil {
		a.ev = &ghsink.Event{}
	}
	a.publish(doc, check)
	return exitCodeFor(doc)
}
