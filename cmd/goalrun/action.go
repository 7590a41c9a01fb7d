package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v75/github"
	"github.com/sethvargo/go-githubactions"

	"github.com/goalrun/goalrun/goal/workspace"
	"github.com/goalrun/goalrun/report"
	"github.com/goalrun/goalrun/report/ghreport"
	"github.com/goalrun/goalrun/sandbox"
)

// actionInput is one input of action.yml. flag is the `goalrun run` flag it
// maps to ("" for inputs only the action uses); how says how the value
// becomes flags. The inputs of settings are declared in settingTable.
type actionInput struct {
	name string
	flag string
	how  inputKind
}

type inputKind int

const (
	asIs           inputKind = iota // one flag with the value
	perLine                         // one flag per non-empty line
	perItem                         // one flag per item, split on newlines and commas
	minutes                         // a whole number of minutes → --timeout=Nm
	workspaceInput                  // a path inside GITHUB_WORKSPACE (links resolved) → --<flag>
	actionOnly                      // read by the action itself
)

// actionInputs lists every input of action.yml, in its order: the inputs
// of settingTable's settings, then config, then the inputs only the action
// reads. TestActionMetadataInSync keeps it, action.yml and README.md's
// table identical.
var actionInputs = func() []actionInput {
	var ins []actionInput
	for _, st := range settingTable {
		if st.input != "" {
			ins = append(ins, actionInput{name: st.input, flag: st.name, how: st.how})
		}
	}
	ins = append(ins, actionInput{name: "config", flag: "config", how: workspaceInput})
	for _, name := range actionOnlyInputs {
		ins = append(ins, actionInput{name: name, how: actionOnly})
	}
	return ins
}()

// actionOnlyInputs are the inputs the action reads itself: how it reports,
// and who may start it.
var actionOnlyInputs = []string{"github-token", "check-name", "comment", "open-pr", "pr-branch-prefix", "base-branch", "trigger-phrase", "allowed-bots"}

// publishTimeout bounds reporting to GitHub after the run; publishGrace
// does after an interruption (the document must be out within seconds).
const (
	publishTimeout = 2 * time.Minute
	publishGrace   = 4 * time.Second
	// interruptFallbackWait bounds each fallback step of a refused check
	// run completion after an interruption (CheckRun.FallbackWait): the
	// whole publish must end by sandbox.PhasePublish's deadline.
	interruptFallbackWait = 300 * time.Millisecond
)

// actionEnviron lists the process environment, to find INPUT_* variables
// action.yml does not declare (a lookupEnv cannot enumerate).
var actionEnviron = os.Environ

// actionCmd is `goalrun action`, the GitHub Action's entry point on the
// runner (action/launch.sh starts it): it reads the inputs (GOALRUN_INPUTS,
// else INPUT_*) and the workflow context (GITHUB_*, the event payload), maps the inputs to the same validated configuration as `goalrun
// run`, runs the same engine with a live check run, and then publishes the
// document: check run, pull request comment, fix pull request, job summary,
// step outputs. A failing GitHub destination is a warning; the exit code is
// decided by the run alone (0 met, 1 not met, 2 bad input, 3 failed, 130
// interrupted). Comment events that do not trigger a run exit 0.
func actionCmd(ctx context.Context, args []string, env lookupEnv, stdout, stderr io.Writer) int {
	env, names, inputsErr := compositeInputs(env)
	getenv := func(k string) string { v, _ := env(k); return v }
	log := ghreport.NewLog(stdout)
	defer log.Close()
	a := githubactions.New(githubactions.WithGetenv(getenv), githubactions.WithWriter(log.Commands()))
	act := &action{ctx: ctx, env: env, getenv: getenv, log: log, gha: a, inputNames: names}
	if len(args) > 0 && args[0] != "" {
		a.Errorf("goalrun action takes no arguments (got %q); it reads the action's inputs from %s or INPUT_* variables", args[0], compositeInputsEnv)
		return exitBadInput
	}
	if inputsErr != nil {
		a.Errorf("%v", inputsErr)
		return exitBadInput
	}
	return act.run()
}

// compositeInputsEnv carries the composite action's inputs as one JSON
// object (action.yml passes ${{ toJSON(inputs) }}): the runner gives
// composite actions no INPUT_* variables, and input names hold "-", which
// not every shell passes on in a variable's name.
const compositeInputsEnv = "GOALRUN_INPUTS"

// compositeInputs returns env with the inputs of GOALRUN_INPUTS visible as
// INPUT_<NAME> (the names go-githubactions reads, taking precedence over the
// environment's), and the INPUT_* names it holds; when GOALRUN_INPUTS is
// unset, env itself and nil (the inputs are then INPUT_* variables, as the
// runner sets them for other kinds of action). An object that is not JSON
// of string values is an error.
func compositeInputs(env lookupEnv) (lookupEnv, []string, error) {
	raw, ok := env(compositeInputsEnv)
	if !ok || strings.TrimSpace(raw) == "" {
		return env, nil, nil
	}
	var in map[string]any
	if err := json.Unmarshal([]byte(raw), &in); err != nil {
		return env, nil, fmt.Errorf("%s is not a JSON object of the action's inputs: %v", compositeInputsEnv, err)
	}
	vals := map[string]string{}
	names := []string{}
	for k, v := range in {
		name := "INPUT_" + strings.ToUpper(strings.ReplaceAll(k, " ", "_"))
		switch v := v.(type) {
		case string:
			vals[name] = v
		case nil:
			vals[name] = ""
		case bool, float64:
			vals[name] = fmt.Sprint(v)
		default:
			return env, nil, fmt.Errorf("%s: input %s is not a string", compositeInputsEnv, k)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return func(k string) (string, bool) {
		if v, ok := vals[k]; ok {
			return v, true
		}
		if strings.HasPrefix(k, "INPUT_") {
			return "", false // only the action's inputs, never a stray INPUT_* of the job
		}
		return env(k)
	}, names, nil
}

// action is one `goalrun action` invocation.
type action struct {
	ctx    context.Context
	env    lookupEnv
	getenv func(string) string
	log    *ghreport.Log
	gha    *githubactions.Action

	// inputNames are the INPUT_* names of a composite action's inputs
	// (compositeInputs); nil when the inputs are INPUT_* variables.
	inputNames []string

	ev *ghreport.Event
	// client makes the writes (check run, comments, fix pull request); nil
	// when there is no token or it is read-only (a fork's pull request).
	// reader is the same client for reads, kept in the read-only case.
	client, reader *gh.Client
	notes          []string // failures shown above the report in the job summary
	stuck          bool     // the check run was left in_progress
	// diff is the run's changes in detail, its paths relative to diffRoot
	// (nil when no run computed them).
	diff     *workspace.Diff
	diffRoot string
	// requester is who asked by comment, and what; ackID the "working on
	// it" reply that becomes the report (0 when none).
	requester *ghreport.Requester
	ackID     int64
	// notices are shown above the report in the job summary as notes.
	notices []string
	// headProblem says why the pull request's head commit is unknown ("" when
	// it is known, or GITHUB_SHA is simply unset).
	headProblem string
	// tested is the commit the workspace holds (readTested); checkSHA the
	// commit the check run goes on, "" for none, and noCheck why not
	// (placeCheck).
	tested   tested
	checkSHA string
	noCheck  string
	outputs  bool   // GITHUB_OUTPUT is usable
	summary  bool   // GITHUB_STEP_SUMMARY is usable
	docPath  string // where the document is written
	docShown string // the document path as later steps see it
}

func (a *action) input(name string) string { return a.gha.GetInput(name) }

// defaultCheckName is the check run's name when the check-name input is
// empty. It holds a space, so it can never be a job's id, whose check a job
// without a name: gets (the README's minimal workflow's job is "goalrun"):
// branch protection can require exactly goalrun's check.
const defaultCheckName = "goalrun verdict"

// checkName is the check-name input, else defaultCheckName.
func (a *action) checkName() string {
	return cmp.Or(a.input("check-name"), defaultCheckName)
}

// checkSlug is the check name in branch and file names: Slug, except
// "goalrun-verdict" for defaultCheckName (whose space would cost it Slug's
// hash suffix).
func checkSlug(name string) string {
	if name == "" || name == defaultCheckName {
		return "goalrun-verdict"
	}
	return ghreport.Slug(name)
}

// report issues err from a publisher as a warning, or as an error when it
// left the check run in_progress (a required check would block the merge):
// then the step fails too (see stuckExit).
func (a *action) report(err error) {
	if !errors.Is(err, ghreport.ErrLeftInProgress) {
		a.warn("%v", err)
		return
	}
	a.stuck = true
	msg := fmt.Sprintf("%v", err)
	a.gha.Errorf("%s", msg)
	a.notes = append(a.notes, msg)
}

// stuckExit is the exit code once the run's code is known: a run that
// passed still fails the step when its check run was left in_progress, so
// the stuck check is seen on the workflow run too.
func (a *action) stuckExit(code int) int {
	if a.stuck && code == exitMet {
		return exitRunFailed
	}
	return code
}

// warn issues a ::warning:: and remembers it for the job summary.
func (a *action) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	a.gha.Warningf("%s", msg)
	a.notes = append(a.notes, msg)
}

func (a *action) run() int {
	probs := ghreport.CheckFileCommands(a.getenv)
	for name, err := range probs {
		a.gha.Warningf("%v: the %s will not be written", err, map[string]string{
			"GITHUB_OUTPUT": "step outputs", "GITHUB_STEP_SUMMARY": "job summary"}[name])
	}
	a.outputs, a.summary = probs["GITHUB_OUTPUT"] == nil, probs["GITHUB_STEP_SUMMARY"] == nil

	token := a.input("github-token")
	ghreport.Mask(a.gha, token)
	a.docPath, a.docShown = documentPath(a.getenv, a.checkName())

	if job := a.getenv("GITHUB_JOB"); job != "" && a.checkName() == job {
		a.warn("check-name %q is this job's id, which is also the name of the job's own check: the commit gets two checks of that name, and branch protection cannot require goalrun's alone; give check-name another name (by default it is %q)", job, defaultCheckName)
	}
	if err := a.checkInputs(); err != nil {
		return a.startupFailure(report.StartupError(report.ErrBadInput, err.Error(),
			"Check the step's with: block against the inputs documented in action.yml."))
	}
	ev, err := a.event()
	if err != nil {
		return a.startupFailure(report.StartupError(report.ErrBadInput, err.Error(),
			"Run goalrun action inside a GitHub Actions job, where GITHUB_EVENT_NAME, GITHUB_EVENT_PATH and GITHUB_REPOSITORY are set."))
	}
	ev.Ref = a.getenv("GITHUB_REF")
	a.ev = ev
	if token != "" {
		c, err := ghreport.NewClient(a.getenv("GITHUB_API_URL"), token, nil)
		if err != nil {
			return a.startupFailure(report.StartupError(report.ErrBadInput, err.Error()))
		}
		a.client, a.reader = c, c
	} else {
		a.warn("github-token is empty: no check run, comment or pull request will be made")
	}

	if ev.ReadOnlyToken() && a.client != nil {
		msg := fmt.Sprintf("pull request #%d comes from the fork %s: GitHub gives this workflow a read-only token and no secrets, so goalrun makes no check run, comment or pull request; the report is in the job summary",
			ev.Number, cmp.Or(ev.HeadRepo, "(a deleted fork)"))
		a.gha.Noticef("%s", msg)
		a.notices = append(a.notices, msg)
		a.client = nil
	}

	// Comment commands: /goalrun from someone with write access, or nothing.
	prompt := a.input("prompt")
	if ev.Comment != nil {
		trig := ghreport.Trigger{Phrase: a.input("trigger-phrase"), AllowedBots: splitItems(a.input("allowed-bots"))}
		if a.reader != nil {
			trig.Permission = func(login string) (string, error) {
				return ghreport.CollaboratorPermission(a.ctx, a.reader, ev.Owner, ev.Repo, login, ghreport.Retry{Attempts: 3, MaxWait: 10 * time.Second})
			}
		}
		d := trig.Decide(ev)
		if d.Triggered && d.Fallback != "" && a.reader != nil {
			a.warn("%s; @%s's right to start goalrun was decided by the comment's author association (%s) instead",
				d.Fallback, ev.Comment.Login, ev.Comment.AuthorAssociation)
		}
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
		a.acknowledge(d.Prompt)
	}
	if ev.Name == ghreport.EventIssueComment && ev.IsPullRequest && a.reader != nil {
		a.readPull(ev.Number)
	}
	// Which commit the workspace holds, read before the agent runs, and so
	// where the check run goes.
	a.readTested()
	a.placeCheck()

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
	if bad := prConfigKeys(ev.PullRequestCode, cfg.fileKeys); len(bad) > 0 {
		return a.startupFailure(report.StartupError(report.ErrBadInput,
			fmt.Sprintf("the config file %s sets %s on a pull request event (%s): the checkout may be the pull request author's, so on these events a config file may set only %s",
				cfg.configFile, strings.Join(bad, ", "), ev.Name, strings.Join(prConfigAllowed, ", ")),
			"Set these as inputs of the goalrun step in the workflow, or do not name a config file for pull request events."))
	}
	if err := checkInsideWorkspace(a.workspaceRoot(), cfg.dir, cfg.configFile); err != nil {
		return a.startupFailure(report.StartupError(report.ErrBadInput, err.Error(),
			"Keep working-directory, config and the config file's workdir inside the repository checkout, without symbolic links that lead out of it."))
	}
	ghreport.Mask(a.gha, secretValues(cfg.secrets)...)
	if se := actionImageProblem(cfg, a.getenv("PATH"), isExecutableFile); se != nil {
		return a.startupFailure(report.StartupError(se.code, se.message, se.suggestions...))
	}

	check := a.checkRun(cfg.maxIterations)
	eng := defaultEngine()
	eng.patchBytes = reportPatchBytes
	eng.changes = func(d *workspace.Diff, root string) { a.diff, a.diffRoot = d, root }
	sinks := []report.Sink{report.NewProgressSinkSince(a.log.Untrusted(), eng.now())}
	if check != nil {
		sinks = append(sinks, check)
	}
	eng.warn = a.log.Untrusted()
	eng.finish = actionWords
	// The report goes out as soon as the document is final, before the
	// sandbox's teardown, so a signal or an Engine that stopped answering
	// never keeps the check run from completing.
	eng.deliver = func(doc report.Document) {
		a.publish(doc, check)
		a.cancelInterrupted(check)
	}
	_, code := execute(a.ctx, cfg, eng, sinks...)
	return a.stuckExit(code)
}

// cancelInterrupted completes the check run as cancelled when a signal
// interrupted the run and publish did not get to complete it: never left
// in_progress. Otherwise publish completed it, or tried to and warned; a
// failed completion is left alone (GitHub may have applied it), never
// turned into "cancelled".
func (a *action) cancelInterrupted(check *ghreport.CheckRun) {
	if check == nil || a.ctx.Err() == nil {
		return
	}
	check.FallbackWait = interruptFallbackWait
	if err := check.Cancel(a.publishContext()); err != nil {
		if errors.Is(err, ghreport.ErrLeftInProgress) {
			a.gha.Errorf("%v", err)
		} else {
			a.gha.Warningf("%v", err)
		}
	}
}

// refuse answers a /goalrun comment whose author may not start a run: a
// new comment (never the sticky report's, whose marker it does not carry),
// or with comment: off only a notice in the log and the job summary.
func (a *action) refuse(d ghreport.Decision) {
	a.gha.Noticef("goalrun did not start: %s", d.Reason)
	mode := cmp.Or(a.input("comment"), ghreport.CommentSticky)
	switch {
	case mode == ghreport.CommentOff:
		if a.summary {
			s := &ghreport.StepSummary{Path: a.getenv("GITHUB_STEP_SUMMARY")}
			if err := s.Notice("goalrun did not start: " + d.Reason + " (comment: off, so no reply was posted)"); err != nil {
				a.gha.Warningf("%v", err)
			}
		}
	case a.client != nil && a.ev.Number != 0:
		if err := a.comment(ghreport.CommentNew).Say(a.publishContext(), ghreport.RefusalMessage(d, a.ev.Comment.Login)); err != nil {
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
	present := a.inputNames
	if present == nil {
		for _, kv := range actionEnviron() {
			k, _, _ := strings.Cut(kv, "=")
			present = append(present, k)
		}
	}
	for _, k := range present {
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
	case "", ghreport.CommentOff, ghreport.CommentSticky, ghreport.CommentNew:
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
func (a *action) event() (*ghreport.Event, error) {
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
	return ghreport.ParseEvent(name, payload, a.getenv("GITHUB_REPOSITORY"), a.getenv("GITHUB_SHA"))
}

// readPull reads pull request n through the API (issue_comment payloads
// carry neither its head commit nor its branches); when it cannot, the
// reason is kept for the warnings that depend on it.
func (a *action) readPull(n int) {
	var pr *gh.PullRequest
	err := ghreport.Retry{}.Do(a.ctx, func(ctx context.Context) error {
		var err error
		pr, _, err = a.reader.PullRequests.Get(ctx, a.ev.Owner, a.ev.Repo, n)
		return err
	})
	if err != nil {
		a.headProblem = fmt.Sprintf("pull request #%d could not be read", n)
		a.warn("could not read pull request #%d, whose head commit the check run belongs to: %s", n, ghreport.APIErrorText(err))
		return
	}
	a.ev.SetPull(pr)
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
		case workspaceInput:
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

// prConfigAllowed are the settings a config file may supply on an event
// that may run on a pull request's code (ghreport.Event.PullRequestCode:
// pull_request*, a comment or review on a pull request, a workflow_run or
// check suite started by one, merge_group), where the checkout — and so the
// file — may be the pull request author's: what to do, never how it is
// isolated, checked or paid for. settingTable marks them (fromPR).
var prConfigAllowed = func() []string {
	var names []string
	for _, st := range settingTable {
		if st.fromPR {
			names = append(names, st.name)
		}
	}
	return names
}()

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
// steps see: RUNNER_TEMP (or the system temp folder), goalrun running on
// the runner itself (the composite action), so both are the same.
func documentPath(getenv func(string) string, checkName string) (write, shown string) {
	name := "goalrun-" + checkSlug(checkName) + ".json"
	p := filepath.Join(cmp.Or(getenv("RUNNER_TEMP"), os.TempDir()), name)
	return p, p
}

// publishContext bounds reporting after the run: its own deadline, not the
// run's (which may be cancelled).
func (a *action) publishContext() context.Context {
	wait := publishTimeout
	if a.ctx.Err() != nil {
		wait = publishGrace
	}
	ctx, cancel := sandbox.Detached(sandbox.WithPhase(a.ctx, sandbox.PhasePublish), wait)
	if in := sandbox.InterruptOf(a.ctx); in != nil {
		// A refused completion's two fallback steps (interruptFallbackWait
		// each) run on their own deadlines: leave them their room.
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, in.By(sandbox.PhasePublish).Add(-2*interruptFallbackWait))
		go func() { <-ctx.Done(); c2() }()
	}
	go func() { <-ctx.Done(); cancel() }()
	return ctx
}

// retry is the retry policy for publishing: shorter after an interruption.
func (a *action) retry() ghreport.Retry {
	if a.ctx.Err() != nil {
		return ghreport.Retry{Attempts: 2, MaxWait: time.Second}
	}
	return ghreport.Retry{}
}

// checkRun creates the live check run, or returns nil when there is no
// token or commit. A failure to create it is a warning.
func (a *action) checkRun(maxIter int) *ghreport.CheckRun {
	if a.client == nil {
		return nil
	}
	if a.checkSHA == "" {
		return nil // placeCheck said why
	}
	c := &ghreport.CheckRun{
		Client: a.client, Owner: a.ev.Owner, Repo: a.ev.Repo,
		Name: a.checkName(), HeadSHA: a.checkSHA,
		DetailsURL: runURL(a.getenv), MaxIterations: maxIter, Retry: a.retry(),
	}

	if err := c.Start(a.ctx); err != nil {
		a.warn("%v; the job summary carries the report instead", err)
		return nil
	}
	return c
}

// runURL is the workflow run's page, for the check run's details link.
// compareURL is the web page that opens a pull request from branch into
// base ("" when GITHUB_SERVER_URL is unset).
func compareURL(getenv func(string) string, ev *ghreport.Event, base, branch string) string {
	server := getenv("GITHUB_SERVER_URL")
	if server == "" || ev.Owner == "" || ev.Repo == "" {
		return ""
	}
	esc := func(ref string) string {
		parts := strings.Split(ref, "/")
		for i, p := range parts {
			parts[i] = url.PathEscape(p)
		}
		return strings.Join(parts, "/")
	}
	return fmt.Sprintf("%s/%s/%s/compare/%s...%s?expand=1", server, url.PathEscape(ev.Owner), url.PathEscape(ev.Repo), esc(base), esc(branch))
}

func runURL(getenv func(string) string) string {
	server, repo, id := getenv("GITHUB_SERVER_URL"), getenv("GITHUB_REPOSITORY"), getenv("GITHUB_RUN_ID")
	if server == "" || repo == "" || id == "" {
		return ""
	}
	return fmt.Sprintf("%s/%s/actions/runs/%s", server, repo, id)
}

func (a *action) comment(mode string) *ghreport.Comment {
	return &ghreport.Comment{Client: a.client, Owner: a.ev.Owner, Repo: a.ev.Repo, Number: a.ev.Number,
		Mode: mode, Key: a.checkName(), Retry: a.retry()}
}

// stickyComment is the report's comment; in sticky mode it edits only a
// comment written by goalrun's own identity: the check run's app
// ("github-actions[bot]" for a GITHUB_TOKEN), else GET /user's login (a
// personal access token), else github-actions[bot].
func (a *action) stickyComment(ctx context.Context, mode string, check *ghreport.CheckRun) *ghreport.Comment {
	c := a.comment(mode)
	if mode == ghreport.CommentSticky {
		slug := ""
		if check != nil {
			slug = check.AppSlug()
		}
		c.Author = ghreport.Identity(ctx, a.client, slug, ghreport.Retry{Attempts: 2, MaxWait: 5 * time.Second})
	}
	return c
}

// publish sends doc everywhere. Failures are warnings; none changes the
// exit code.
func (a *action) publish(doc report.Document, check *ghreport.CheckRun) {
	ctx := a.publishContext()
	rc := a.reportContext()
	// The fix pull request first: the other reports link it.
	var fix *ghreport.FixPR
	if open, _ := strconv.ParseBool(a.input("open-pr")); open {
		rc.OpenPR = true
		if a.client != nil {
			fix = a.fixPR()
			own := *rc
			own.InFixPR = true
			fix.Render = own.Render(ghreport.PullBodyBytes-4096, false)
			if fix.Skipped == "" {
				for _, err := range ghreport.Publish(ctx, doc, fix) {
					a.report(err)
				}
			}
			rc.FixURL, rc.FixNumber, rc.FixSkipped = fix.URL, fix.Number, fix.Skipped
			if fix.Pushed && fix.URL == "" {
				// The pull request was refused after the branch was pushed.
				rc.FixBranch, rc.FixBranchURL = fix.Branch, compareURL(a.getenv, a.ev, fix.BaseBranch, fix.Branch)
			}
			if fix.URL == "" && fix.Skipped == "" {
				rc.FixSkipped = "the fix pull request could not be made, see the warnings"
			}
		}
	}
	var pubs []ghreport.Publisher
	if check != nil {
		if a.ctx.Err() != nil {
			check.FallbackWait = interruptFallbackWait
		}
		check.Render = rc.Render(ghreport.CheckSummaryBytes, false)
		if why := a.changeNotOnCommit(doc); why != "" {
			check.ChangeNotOnCommit = why
			if doc.Conclusion == report.ConclusionSuccess || doc.Conclusion == report.ConclusionNeutral {
				a.gha.Noticef("the check run %q on %s concludes action_required: %s (the commit's own code failed the check)", a.checkName(), short(check.HeadSHA), why)
			}
		}
		pubs = append(pubs, check)
	}
	mode := cmp.Or(a.input("comment"), ghreport.CommentSticky)
	var comment *ghreport.Comment
	if a.client != nil && a.ev.Number != 0 && (mode != ghreport.CommentOff || a.ackID != 0) {
		comment = a.stickyComment(ctx, mode, check)
		comment.ID = a.ackID // a /goalrun trigger's own comment becomes its report
		comment.Render = rc.Render(ghreport.CommentBodyBytes-256, false)
		pubs = append(pubs, comment)
	}
	for _, err := range ghreport.Publish(ctx, doc, pubs...) {
		a.report(err)
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
		s := &ghreport.StepSummary{Path: a.getenv("GITHUB_STEP_SUMMARY"), Notes: a.notes, Notices: a.notices,
			Render: rc.Render(ghreport.StepSummaryBytes/2, true)}
		if err := s.Publish(ctx, doc); err != nil {
			a.gha.Warningf("%v", err)
		}
	}
	a.writeOutputs(ghreport.OutputValues(doc, a.docShown, prURL))
	fmt.Fprintf(a.log.Untrusted(), "goalrun: %s\ndocument: %s\n", report.Headline(doc), a.docShown)
}

// reportContext is what the reports say beyond the document: the job run,
// who asked (comment runs), the agent's changes in detail.
func (a *action) reportContext() *ghreport.ReportContext {
	rc := &ghreport.ReportContext{RunURL: runURL(a.getenv), Requester: a.requester, Fork: a.ev != nil && a.ev.Fork}
	if d := a.diff; d != nil {
		rel, err := filepath.Rel(a.workspaceRoot(), a.diffRoot)
		prefix := ""
		if err == nil && !escapes(rel) && rel != "." {
			prefix = filepath.ToSlash(rel) + "/"
		}
		for _, f := range d.Files {
			rc.Files = append(rc.Files, ghreport.FileStat{Path: prefix + f.Path, Status: f.Status,
				Insertions: f.Insertions, Deletions: f.Deletions, Binary: f.Binary})
		}
		rc.Patch, rc.PatchCut = d.Patch, d.PatchCut
	}
	return rc
}

// acknowledge answers an allowed /goalrun comment at once: a reaction on
// it and, unless comment is off, a "working on it" reply that names who
// asked for what and becomes the run's report (ackID). Failures are
// warnings: the run goes on.
func (a *action) acknowledge(prompt string) {
	c := a.ev.Comment
	a.requester = &ghreport.Requester{Login: c.Login, Prompt: prompt, CommentURL: c.URL}
	if a.client == nil {
		return
	}
	ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	defer cancel()
	retry := ghreport.Retry{Attempts: 3, MaxWait: 5 * time.Second}
	if err := ghreport.React(ctx, a.client, a.ev, "eyes", retry); err != nil {
		a.warn("%v", err)
	}
	if cmp.Or(a.input("comment"), ghreport.CommentSticky) == ghreport.CommentOff || a.ev.Number == 0 {
		return
	}
	what := "the workflow's task"
	if strings.TrimSpace(prompt) != "" {
		what = "“" + report.MarkdownText(report.Cap(report.Fold(prompt), 300)) + "”"
	}
	body := fmt.Sprintf("⏳ goalrun is working on @%s's request: %s.", c.Login, what)
	if u := runURL(a.getenv); u != "" {
		body += " Follow it in the [job run](" + u + ")."
	}
	body += " This comment becomes the report when the run ends."
	cm := a.comment(ghreport.CommentNew)
	cm.Retry = retry
	if err := cm.Say(ctx, body); err != nil {
		a.warn("could not post the \"working on it\" reply: %v", err)
		return
	}
	a.ackID = cm.ID
}

// reportPatchBytes is how much of the unified diff the action keeps for
// the report (the comment and check run show a capped part of it).
const reportPatchBytes = 512 << 10

// fixPR is the fix pull request for this run, based on the ref the run
// started from: on a pull request (or a comment on one), the pull
// request's head — the fix commit's parent is its head commit and the fix
// pull request is opened into its head branch, so it holds only the
// agent's change; when the workspace held another commit (the merge
// checkout, a head that moved on), FixPR.CheckoutSHA makes sure every file
// the agent changed is the same there and on the head. Otherwise the
// commit the workspace holds and its branch (HEAD's branch, else
// GITHUB_REF's when the workspace is the workflow's commit, else the
// default branch); on a /goalrun comment on a plain issue, a branch of its
// own per issue and "Fixes #N". The base-branch input names the pull
// request's base instead. Skipped is set when it cannot be made (a fork's
// head branch, the agent's changes or the tested commit unknown, a pull
// request whose code was not checked out).
func (a *action) fixPR() *ghreport.FixPR {
	name := a.checkName()
	prefix := cmp.Or(a.input("pr-branch-prefix"), "goalrun")
	ev, t := a.ev, a.tested
	fix := &ghreport.FixPR{
		Client: a.client, Owner: ev.Owner, Repo: ev.Repo,
		Workspace: a.workspaceRoot(), BaseSHA: t.sha, CheckoutSHA: t.sha,
		Branch: prefix + "/" + checkSlug(name),
		Title:  "goalrun: " + name + " passes again",
		Retry:  a.retry(),
	}
	switch {
	case t.sha == "":
		fix.Skipped = "the commit the workspace holds is not known (" + t.why + "), so the agent's change cannot be laid on it"
	case ev.IsPullRequest && ev.Fork:
		fix.Skipped = fmt.Sprintf("the pull request's head branch is in the fork %s, which this workflow's token cannot push to; the agent's change is in the report",
			cmp.Or(ev.HeadRepo, "(deleted)"))
	case ev.IsPullRequest && (ev.HeadRef == "" || ev.HeadSHA == ""):
		fix.Skipped = fmt.Sprintf("the head branch of pull request #%d is not known", ev.Number)
	case ev.IsPullRequest && t.sha != ev.HeadSHA && !t.merge && t.sha == ev.SHA:
		// pull_request_target's default checkout (the base branch), or a
		// comment bot that never checked out the pull request.
		fix.Skipped = fmt.Sprintf("the workspace holds the workflow's own commit %s (%s on %s), not pull request #%d's code, so the agent's change is not a fix for it (check out its head: actions/checkout with ref: ${{ github.event.pull_request.head.sha }}, or refs/pull/%d/head for a comment)",
			short(t.sha), cmp.Or(ev.Ref, "GITHUB_SHA"), ev.Name, ev.Number, ev.Number)
	case ev.IsPullRequest:
		fix.BaseSHA = ev.HeadSHA
		fix.BaseBranch = cmp.Or(a.input("base-branch"), ev.HeadRef)
		fix.Branch = prefix + "/pr-" + strconv.Itoa(ev.Number) + "-" + checkSlug(name)
		fix.Title = fmt.Sprintf("goalrun: %s passes again on #%d", name, ev.Number)
	default:
		fix.BaseBranch = cmp.Or(a.input("base-branch"), t.branch)
		if fix.BaseBranch == "" && t.sha == ev.SHA {
			fix.BaseBranch = cmp.Or(refBranch(ev.Ref), ev.DefaultBranch)
		}
		if fix.BaseBranch == "" {
			fix.Skipped = fmt.Sprintf("the workspace holds the detached commit %s, not the workflow's commit %s, so no branch says where a fix for it goes: set base-branch",
				short(t.sha), short(ev.SHA))
		}
		if ev.Comment != nil && ev.Number != 0 {
			// A plain issue: one branch per issue, and merging closes it.
			fix.Branch = prefix + "/issue-" + strconv.Itoa(ev.Number) + "-" + checkSlug(name)
			fix.Title = fmt.Sprintf("goalrun: fix for #%d", ev.Number)
			fix.Fixes = ev.Number
		}
	}
	if fix.Skipped == "" {
		paths, err := a.changedPaths()
		if err != nil {
			fix.Skipped = err.Error()
		}
		fix.Paths = paths
	}
	return fix
}

// refBranch is the branch of a ref ("dev" for refs/heads/dev), "" for any
// other ref (a tag, a pull request's merge ref).
func refBranch(ref string) string {
	if b, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		return b
	}
	return ""
}

// changedPaths returns the agent's changed paths relative to the
// workspace root (the fix commit's paths).
func (a *action) changedPaths() ([]ghreport.ChangedPath, error) {
	if a.diff == nil {
		return nil, errors.New("the agent's changes are not known in detail, so none are committed")
	}
	rel, err := filepath.Rel(a.workspaceRoot(), a.diffRoot)
	if err != nil || escapes(rel) {
		return nil, fmt.Errorf("the changes were tracked in %s, outside the repository checkout %s", a.diffRoot, a.workspaceRoot())
	}
	out := []ghreport.ChangedPath{}
	for _, f := range a.diff.Files {
		p := f.Path
		if rel != "." {
			p = filepath.ToSlash(rel) + "/" + p
		}
		out = append(out, ghreport.ChangedPath{Path: p, Deleted: f.Status == workspace.StatusDeleted})
	}
	return out, nil
}

func (a *action) writeOutputs(values map[string]string) {
	if !a.outputs {
		return
	}
	if err := (ghreport.OutputsFile{Action: a.gha}).SetAll(values); err != nil {
		a.gha.Warningf("%v", err)
	}
}

// writeSkipped sets the outputs of a comment event that started nothing.
func (a *action) writeSkipped() {
	v := ghreport.OutputValues(report.Document{}, "", "")
	v["status"] = "skipped"
	a.writeOutputs(v)
}

// startupFailure reports a document made before any run existed (bad
// input): the document file, a completed check run when one can be made, the
// job summary, the outputs; then the exit code.
func (a *action) startupFailure(doc report.Document) int {
	doc = actionWords(doc)
	a.gha.Errorf("goalrun: %s", doc.Message)
	if err := os.WriteFile(a.docPath, append(report.Encode(doc), '\n'), 0o644); err != nil {
		a.gha.Warningf("could not write the document %s: %v", a.docPath, err)
	}
	var check *ghreport.CheckRun
	if a.ev != nil && a.client != nil && a.checkSHA != "" {
		check = a.checkRun(0)
	}
	if a.ev == nil {
		a.ev = &ghreport.Event{}
	}
	a.publish(doc, check)
	return a.stuckExit(exitCodeFor(doc))
}
