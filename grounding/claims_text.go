package grounding

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/goalrun/goalrun/internal/lazyre"
	"github.com/goalrun/goalrun/internal/markdown"
)

// This file finds operational claims in an agent's final prose. It is a
// small, deterministic rule system, explainable line by line:
//
//  1. Markdown structure: code blocks (fenced or indented) and blockquotes
//     are skipped, as CommonMark reads them (internal/markdown);
//     headings and lead-in lines ending in ":" set a context for what
//     follows — advice ("Next steps", "I recommend:") is skipped, change
//     reports ("## Changes", "Here's what I did:") let commit-style
//     imperatives ("- Fix race in cache.go") count; list markers, check
//     boxes and ✅/❌ marks are read; table rows become "cell: cell".
//  2. Inline code spans and double-quoted text become opaque tokens (their
//     content is still used to recognise file names and test commands).
//  3. Each sentence is tokenized; questions are skipped. Each trigger word
//     (ran, committed, pushed, edited, created, deleted, installed, deployed,
//     pass/passed/green…) is checked against the words before it in its
//     clause for negation, hedges and modals, intent, conditionals,
//     attempts and other actors ("CI ran the tests"), and for tests_pass
//     also partial results ("3 of 4 tests pass") and failures nearby.
//  4. File claims take the file named as the verb's object ("deleted
//     old.go") or as its container ("removed prints from worker.py" is an
//     edit of worker.py), following lists of files.

// rawClaim is one claim found in the text, before it is judged.
type rawClaim struct {
	kind    string
	file    string // the named file as written ("" when none)
	excerpt string // the sentence, code spans and quotes restored
	pos     int    // order in the text
}

// Contexts of a line.
const (
	ctxNeutral = iota
	ctxAdvice
	ctxChanges
)

var (
	reHeading     = lazyre.New(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	reListItem    = lazyre.New(`^\s*(?:[-*+•]|\d{1,3}[.)])\s+(.*)$`)
	reBoldHeading = lazyre.New(`^\s*(?:\*\*|__)([^*_]{1,80}?):?(?:\*\*|__):?\s*$`)
	rePRLink      = lazyre.New(`(?i)^\s*(pr|pull request|merge request|mr)\s*[:=]\s*(https?://\S+/(pull|pulls|merge_requests)/\d+|#\d+)\b`)
	reTableSep    = lazyre.New(`^\s*\|?[\s:|-]+\|[\s:|-]*$`)
	reCheckbox    = lazyre.New(`^\[([ xX✓✔])\]\s*`)
	reAdviceCtx   = lazyre.New(`(?i)\b(next( steps?)?|todo|to[ -]do|remaining|follow[ -]?ups?|recommend\w*|suggest\w*|you (can|should|may|might|need|could|will|must)|you'll|to verify|verify|how to|manual\w*|not (yet )?done|open questions?|plan|planned|before merging|what's left|left to do|outstanding|pending|future|known issues?|limitations?|caveats?|to test|steps to|would|could|should|consider|optional|ideas?)\b`)
	reChangeCtx   = lazyre.New(`(?i)\b(changes?|changed|summary|what i did|what i changed|done|fix(es|ed)?|changelog|modifications?|files?|work|completed|results?|verification|testing|tests|here's what|here is what|i did|what was done)\b`)
	reKV          = lazyre.New(`(?i)^\s*(?:the\s+)?(unit\s+|all\s+|integration\s+|e2e\s+)?(tests?|test suite|suite|specs?|commit(?:ted)?|push(?:ed)?|pr|pull request|deploy(?:ment|ed)?|install(?:ation|ed)?)\s*[:=]\s*(pass(?:ed|ing)?|ok|okay|done|yes|green|success(?:ful)?|succeeded|created|opened|complete(?:d)?|✅|✔️?|☑️?)\s*[.!]?\s*$`)
)

// unitText is one line of prose to analyse, with its context.
type unitText struct {
	text string
	ctx  int
	item bool
}

// claimsTextMax bounds the prose analysed: the last 64 KiB of a final
// message (where an agent states its outcome), so a hostile or runaway
// message costs bounded time.
const claimsTextMax = 64 << 10

// sentenceTokensMax bounds one sentence's tokens; a longer run of words
// without a full stop is analysed in pieces of this size.
const sentenceTokensMax = 256

// extractClaims returns the claims of text in order.
func extractClaims(text string) []rawClaim {
	if len(text) > claimsTextMax {
		cut := len(text) - claimsTextMax
		for cut < len(text) && !utf8.RuneStart(text[cut]) {
			cut++
		}
		text = text[cut:]
	}
	var out []rawClaim
	pos := 0
	for _, u := range splitUnits(text) {
		if u.ctx == ctxAdvice {
			continue
		}
		out = append(out, analyseUnit(u, &pos)...)
	}
	return out
}

// splitUnits walks the markdown structure of text (step 1).
func splitUnits(text string) []unitText {
	text = strings.NewReplacer("\r\n", "\n", "\r", "\n", "’", "'", "‘", "'").Replace(text)
	var units []unitText
	hidden := markdown.CodeOrQuoteLines(text) // code, or someone else's words
	heading, lead := ctxNeutral, -1           // lead: context set by a lead-in line, -1 = none
	blank := false
	for i, line := range strings.Split(text, "\n") {
		if hidden[i] {
			continue
		}
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			blank = true
			continue
		}
		if m := reHeading.FindStringSubmatch(line); m != nil {
			heading, lead, blank = classifyCtx(m[1]), -1, false
			units = append(units, unitText{text: m[1], ctx: heading})
			continue
		}
		if m := reBoldHeading.FindStringSubmatch(line); m != nil { // "**Testing**" on its own line
			heading, lead, blank = classifyCtx(m[1]), -1, false
			continue
		}
		item, body := false, trimmed
		if m := reListItem.FindStringSubmatch(line); m != nil {
			item, body = true, m[1]
		} else if strings.HasPrefix(trimmed, "|") {
			if reTableSep.MatchString(trimmed) {
				continue
			}
			item, body = true, tableRow(trimmed)
		} else if startsWithMark(trimmed) {
			item = true
		}
		if blank && !item && !strings.HasPrefix(line, "   ") {
			lead = -1 // a new paragraph ends a lead-in's list
		}
		blank = false
		done := hasDoneMark(body)
		body, skip := stripMarks(body)
		if skip {
			continue
		}
		if done {
			if m := reBareCode.FindStringSubmatch(body); m != nil && isTestCommand(m[1]) {
				body = "Ran `" + m[1] + "`: tests pass." // "✅ `pytest -q`"
			}
		}
		ctx := heading
		if item && lead >= 0 {
			ctx = lead
		}
		if strings.HasSuffix(strings.TrimSpace(body), ":") {
			if c := classifyCtx(body); c != ctxNeutral || !item {
				lead = c
			}
		}
		if ctx == ctxAdvice && lead == ctxAdvice && !item {
			ctx = heading // the lead-in line itself is judged by its heading
		}
		units = append(units, unitText{text: body, ctx: ctx, item: item})
	}
	return units
}

// classifyCtx says whether a heading or lead-in announces advice or changes.
func classifyCtx(s string) int {
	switch {
	case reAdviceCtx.MatchString(s):
		return ctxAdvice
	case reChangeCtx.MatchString(s):
		return ctxChanges
	}
	return ctxNeutral
}

// tableRow turns "| a | b | c |" into "a: b, c".
func tableRow(s string) string {
	s = strings.Trim(s, "| ")
	cells := strings.Split(s, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	if len(cells) == 1 {
		return cells[0]
	}
	return cells[0] + ": " + strings.Join(cells[1:], ", ")
}

var (
	doneMarks = []string{"✅", "✔️", "✔", "☑️", "☑", "✓", "🟢"}
	failMarks = []string{"❌", "✗", "✘", "⛔", "🚫", "⚠️", "⚠", "🔴", "❗", "⏳", "🚧"}
)

var reBareCode = lazyre.New("^`([^`]+)`\\s*(?:\\((?:pass|passed|ok|green)\\))?\\.?$")

// hasDoneMark reports whether an item starts with a done mark or a checked box.
func hasDoneMark(s string) bool {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[x]") || strings.HasPrefix(s, "[X]") {
		return true
	}
	for _, m := range doneMarks {
		if strings.HasPrefix(s, m) {
			return true
		}
	}
	return false
}

func startsWithMark(s string) bool {
	for _, m := range append(doneMarks, failMarks...) {
		if strings.HasPrefix(s, m) {
			return true
		}
	}
	return false
}

// stripMarks removes check boxes and done/fail marks; skip is true for an
// unchecked box or a fail mark (the item says it was not done).
func stripMarks(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if m := reCheckbox.FindStringSubmatch(s); m != nil {
		if m[1] == " " {
			return "", true
		}
		s = strings.TrimSpace(s[len(m[0]):])
	}
	for _, m := range failMarks {
		if strings.HasPrefix(s, m) {
			return "", true
		}
	}
	for _, m := range doneMarks {
		if strings.HasPrefix(s, m) {
			s = strings.TrimSpace(strings.TrimPrefix(s, m))
		}
	}
	return s, false
}

// Placeholders for masked spans: \uE000 c|q N \uE001.
const (
	phOpen  = '\uE000'
	phClose = '\uE001'
)

// masked is a unit with code spans and quotes replaced by placeholders.
type masked struct {
	text  string
	codes []string
	quots []string
}

var reQuote = lazyre.New(`"[^"\n]{1,200}"|“[^”\n]{1,200}”`)

// mask replaces `code` and "quoted" spans (step 2).
func mask(s string) masked {
	var m masked
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '`' {
			b.WriteByte(s[i])
			i++
			continue
		}
		n := 0
		for i+n < len(s) && s[i+n] == '`' {
			n++
		}
		ticks := s[i : i+n]
		end := strings.Index(s[i+n:], ticks)
		if end < 0 {
			b.WriteString(ticks)
			i += n
			continue
		}
		m.codes = append(m.codes, strings.TrimSpace(s[i+n:i+n+end]))
		b.WriteString(" " + string(phOpen) + "c" + strconv.Itoa(len(m.codes)-1) + string(phClose) + " ")
		i += n + end + n
	}
	m.text = reQuote.ReplaceAllStringFunc(b.String(), func(q string) string {
		m.quots = append(m.quots, q)
		return " " + string(phOpen) + "q" + strconv.Itoa(len(m.quots)-1) + string(phClose) + " "
	})
	return m
}

// restore puts the masked spans of one sentence back for the excerpt,
// dropping the one space mask put on each side of a placeholder.
func (m masked) restore(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == ' ' && strings.HasPrefix(s[i+1:], string(phOpen)) {
			i++ // padding before a placeholder
			continue
		}
		if r != phOpen {
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		end := strings.IndexRune(s[i:], phClose)
		if end < 0 {
			i += size
			continue
		}
		tag := s[i+size : i+end]
		i += end + utf8.RuneLen(phClose)
		if i < len(s) && s[i] == ' ' {
			i++ // padding after it
		}
		if len(tag) < 2 {
			continue
		}
		n, _ := strconv.Atoi(tag[1:])
		switch {
		case tag[0] == 'c' && n < len(m.codes):
			b.WriteString("`" + m.codes[n] + "`")
		case tag[0] == 'q' && n < len(m.quots):
			b.WriteString(m.quots[n])
		}
	}
	return strings.TrimSpace(b.String())
}

// token is one word or punctuation mark of a sentence.
type token struct {
	w     string // lower-cased word, or the punctuation mark
	orig  string // as written
	code  string // content of an inline code span
	kind  byte   // 'w' word, 'p' punctuation, 'c' code, 'q' quote
	isNum bool
}

// splitSentences splits masked text at . ! ? followed by space or end.
func splitSentences(s string) (sentences []string, questions []bool) {
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '.' && c != '!' && c != '?' {
			continue
		}
		j := i
		for j+1 < len(s) && (s[j+1] == '.' || s[j+1] == '!' || s[j+1] == '?') {
			j++
		}
		if j+1 < len(s) && s[j+1] != ' ' && s[j+1] != '\t' && s[j+1] != ')' && s[j+1] != '"' {
			i = j
			continue
		}
		if c == '.' && abbreviation(s[start:i]) {
			i = j
			continue
		}
		sentences = append(sentences, s[start:j+1])
		questions = append(questions, strings.Contains(s[i:j+1], "?"))
		start = j + 1
		i = j
	}
	if strings.TrimSpace(s[start:]) != "" {
		sentences = append(sentences, s[start:])
		questions = append(questions, false)
	}
	return sentences, questions
}

// abbreviation reports whether the text before a period ends in "e.g",
// "i.e", "etc", "vs" or a single letter.
func abbreviation(before string) bool {
	f := strings.Fields(before)
	if len(f) == 0 {
		return false
	}
	w := strings.ToLower(f[len(f)-1])
	switch w {
	case "e.g", "i.e", "etc", "vs", "cf", "approx", "incl":
		return true
	}
	return false
}

// tokenize splits one masked sentence into tokens.
func tokenize(s string) []token {
	var toks []token
	var cur strings.Builder
	flush := func() {
		if cur.Len() == 0 {
			return
		}
		w := cur.String()
		cur.Reset()
		// peel trailing sentence punctuation off words like "calc.go." or "done!"
		for len(w) > 0 && strings.ContainsRune(".!?'", rune(w[len(w)-1])) {
			w = w[:len(w)-1]
		}
		for len(w) > 0 && (w[0] == '\'' || w[0] == '*' || w[0] == '~') { // quotes, **bold**, *italic*, ~~strike~~
			w = w[1:]
		}
		for len(w) > 0 && (w[len(w)-1] == '*' || w[len(w)-1] == '~') {
			w = w[:len(w)-1]
		}
		for len(w) > 0 && strings.ContainsRune(".!?'", rune(w[len(w)-1])) {
			w = w[:len(w)-1]
		}
		if w == "" {
			return
		}
		_, err := strconv.Atoi(strings.TrimLeft(w, "+−-"))
		toks = append(toks, token{w: strings.ToLower(w), orig: w, kind: 'w', isNum: err == nil})
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == phOpen:
			flush()
			end := strings.IndexRune(s[i:], phClose)
			if end < 0 {
				i += size
				continue
			}
			tag := s[i+size : i+end]
			t := token{w: "\x00" + tag, orig: tag}
			if strings.HasPrefix(tag, "c") {
				t.kind = 'c'
			} else {
				t.kind = 'q'
			}
			toks = append(toks, t)
			i += end + utf8.RuneLen(phClose)
			continue
		case unicode.IsSpace(r):
			flush()
		case strings.ContainsRune(",;:()[]{}!?—–…", r):
			flush()
			toks = append(toks, token{w: string(r), orig: string(r), kind: 'p'})
		case r == '-' && cur.Len() == 0 && (i+1 >= len(s) || s[i+1] == ' '):
			toks = append(toks, token{w: "-", orig: "-", kind: 'p'})
		case unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_-./@+~#=<>*'$%&", r):
			cur.WriteRune(r)
		default: // emoji, arrows, other symbols
			flush()
		}
		i += size
	}
	flush()
	return toks
}

// setOf builds a word set.
func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

var (
	negWords = setOf("not", "no", "never", "none", "nothing", "neither", "nor", "without", "cannot", "unable",
		"nobody", "nowhere", "hardly", "barely")
	hedgeWords = setOf("should", "would", "could", "might", "may", "can", "will", "shall", "must", "need", "needs",
		"going", "gonna", "want", "wants", "plan", "planning", "intend", "intends", "recommend", "recommended", "suggest",
		"suggested", "consider", "please", "try", "trying", "tried", "attempt", "attempted", "attempting", "let", "let's",
		"lets", "ensure", "remember", "hopefully", "probably", "maybe", "perhaps", "likely", "unlikely", "expect",
		"expected", "believe", "think", "assume", "hope", "i'll", "we'll", "you'll", "it'll", "they'll", "i'd", "we'd",
		"you'd", "soon", "todo", "eventually", "supposed", "seems", "seem", "appears", "ideally",
		"once", "whenever", "until", "unless", "if", "provided", "assuming")
	condPairs   = [][2]string{{"when", "you"}, {"after", "you"}, {"in", "case"}, {"as", "soon"}, {"make", "sure"}, {"so", "that"}, {"in", "order"}}
	otherActors = setOf("ci", "pipeline", "user", "users", "you", "someone", "somebody", "he", "she", "github", "jenkins",
		"bot", "reviewer", "reviewers", "maintainer", "maintainers", "team", "upstream", "workflow", "author", "travis",
		"circleci", "actions", "they", "others", "colleague")
	partialWords = setOf("some", "most", "several", "few", "only", "except", "half", "partially", "mostly", "many", "remaining")
	pastState    = setOf("before", "previously", "originally", "used", "earlier", "initially")
	failWords    = setOf("fail", "fails", "failed", "failing", "failure", "failures", "broken", "red", "errors", "erroring", "panics", "panicked")
	zeroWords    = setOf("0", "no", "zero", "nothing", "without", "none")
	auxWords     = setOf("have", "has", "had", "i've", "we've", "been", "was", "were", "is", "are", "got", "get", "be", "being")
	boundaryW    = setOf(";", ":", "(", ")", "—", "–", "-", "[", "]", "{", "}", "but", "however", "although", "though",
		"whereas", "because", "since", "while", "!")
	afterComma = setOf("and", "so", "then", "but", "while", "which", "because", "since", "although", "though", "however", "yet")
	testNouns  = setOf("test", "tests", "suite", "testsuite", "specs", "spec", "unittests", "unittest", "pytest", "jest",
		"vitest", "mocha", "rspec", "testcases", "tox", "ctest", "phpunit")
	prNouns   = setOf("pr", "prs", "pull", "pull-request", "mr", "merge", "pull-requests")
	fileNouns = setOf("file", "files")
	preps     = setOf("in", "into", "from", "inside", "within", "of", "under", "to", "across")
	listJoins = setOf(",", "and", "&", "or", "plus", "also")
	spanStops = setOf("because", "since", "so", "which", "that", "where", "while", "when", "as", "but", "although",
		"though", "if", "unless", "until", "after", "before", "by", "for", "via", "using", "instead", ";", ":", "(",
		")", "—", "–", "-")
)

// Trigger classes.
const (
	tEdit = iota + 1
	tCreate
	tDelete
	tRun
	tCommit
	tPush
	tPR
	tInstall
	tDeploy
	tPass
)

// Trigger words: past forms (claims of work done), and participles that
// need an auxiliary (need bit set).
var triggers = map[string]int{
	"edited": tEdit, "modified": tEdit, "updated": tEdit, "changed": tEdit, "fixed": tEdit, "patched": tEdit,
	"refactored": tEdit, "rewrote": tEdit, "rewritten": tEdit, "replaced": tEdit, "adjusted": tEdit,
	"corrected": tEdit, "tweaked": tEdit, "reworked": tEdit, "amended": tEdit, "altered": tEdit, "renamed": tEdit,
	"reformatted": tEdit, "formatted": tEdit, "regenerated": tEdit, "migrated": tEdit, "converted": tEdit,
	"increased": tEdit, "decreased": tEdit, "bumped": tEdit, "extracted": tEdit, "inlined": tEdit,
	"simplified": tEdit, "cleaned": tEdit, "implemented": tEdit, "applied": tEdit, "moved": tEdit,
	"restructured": tEdit, "reorganized": tEdit, "reorganised": tEdit, "optimized": tEdit, "optimised": tEdit,
	"hardened": tEdit, "guarded": tEdit, "unified": tEdit, "deduplicated": tEdit, "commented": tEdit,
	"created": tCreate, "added": tCreate, "wrote": tCreate, "written": tCreate, "generated": tCreate,
	"introduced": tCreate, "scaffolded": tCreate, "made": tCreate, "make": tCreate,
	"deleted": tDelete, "removed": tDelete,
	"ran": tRun, "re-ran": tRun, "reran": tRun, "rerun": tRun, "re-run": tRun, "run": tRun, "executed": tRun,
	"re-executed": tRun, "tested": tRun, "running": tRun, "verified": tRun, "validated": tRun, "confirmed": tRun,
	"committed": tCommit, "recommitted": tCommit,
	"pushed": tPush, "force-pushed": tPush, "re-pushed": tPush, "repushed": tPush,
	"opened": tPR, "submitted": tPR, "raised": tPR, "filed": tPR, "sent": tPR,
	"installed": tInstall, "reinstalled": tInstall, "re-installed": tInstall, "pip-installed": tInstall,
	"deployed": tDeploy, "redeployed": tDeploy, "re-deployed": tDeploy, "shipped": tDeploy, "released": tDeploy,
	"published": tDeploy,
	"pass":      tPass, "passes": tPass, "passed": tPass, "passing": tPass, "green": tPass, "succeed": tPass,
	"succeeds": tPass, "succeeded": tPass,
}

// runsVerbs before "successfully" make it a pass word.
var runsVerbs = setOf("runs", "run", "ran", "completes", "completed", "executes", "executed", "finishes", "finished", "passes", "passed")

// needAux are participle-only or base forms that are claims only after an
// auxiliary ("have run", "was written").
var needAux = setOf("run", "rerun", "re-run", "written", "rewritten", "make")

// imperatives map commit-style base verbs to trigger classes; they count as
// claims only at the start of an item in a change report.
var imperatives = map[string]int{
	"fix": tEdit, "update": tEdit, "edit": tEdit, "modify": tEdit, "change": tEdit, "refactor": tEdit,
	"rename": tEdit, "replace": tEdit, "rewrite": tEdit, "bump": tEdit, "implement": tEdit, "clean": tEdit,
	"move": tEdit, "simplify": tEdit, "guard": tEdit, "handle": tEdit, "use": tEdit, "make": tEdit,
	"add": tCreate, "create": tCreate, "write": tCreate, "introduce": tCreate, "generate": tCreate,
	"remove": tDelete, "delete": tDelete, "drop": tDelete,
	"commit": tCommit, "push": tPush, "install": tInstall, "deploy": tDeploy,
}

// adviceStarts are base verbs that, first in a clause outside a change
// report, make it an instruction to the reader.
var adviceStarts = setOf("run", "rerun", "re-run", "verify", "check", "confirm", "ensure", "make", "test", "try",
	"commit", "push", "open", "install", "deploy", "review", "merge", "add", "update", "fix", "consider", "see",
	"use", "note", "remember", "create", "delete", "remove", "edit", "write", "execute", "build", "wait", "let",
	"do", "keep", "rebuild", "re-run", "rebase", "restart", "set", "pass", "be")

// analyseUnit finds the claims of one line (steps 2 to 4).
func analyseUnit(u unitText, pos *int) []rawClaim {
	m := mask(u.text)
	var out []rawClaim
	if rePRLink.MatchString(m.text) {
		*pos++
		return []rawClaim{{kind: ClaimOpenedPR, excerpt: m.restore(m.text), pos: *pos}}
	}
	if mt := reKV.FindStringSubmatch(m.text); mt != nil {
		*pos++
		if k := kvKind(strings.ToLower(mt[2])); k != "" {
			out = append(out, rawClaim{kind: k, excerpt: m.restore(m.text), pos: *pos})
		}
		return out
	}
	sentences, questions := splitSentences(m.text)
	for si, s := range sentences {
		*pos++
		if questions[si] {
			continue
		}
		toks := tokenize(s)
		excerpt := ""
		for part := 0; len(toks) > 0; part++ {
			chunk := toks[:min(len(toks), sentenceTokensMax)]
			toks = toks[len(chunk):]
			a := &analysis{toks: chunk, m: m, unit: u, first: si == 0 && part == 0}
			a.keyFile()
			for _, c := range a.claims() {
				if excerpt == "" {
					excerpt = m.restore(s) // once per sentence, shared by its claims
				}
				c.excerpt = excerpt
				c.pos = *pos
				out = append(out, c)
			}
		}
	}
	return out
}

func kvKind(key string) string {
	switch {
	case strings.HasPrefix(key, "commit"):
		return ClaimCommitted
	case strings.HasPrefix(key, "push"):
		return ClaimPushed
	case key == "pr" || key == "pull request":
		return ClaimOpenedPR
	case strings.HasPrefix(key, "deploy"):
		return ClaimDeployed
	case strings.HasPrefix(key, "install"):
		return ClaimInstalled
	}
	return ClaimTestsPass
}

// analysis holds one sentence being analysed.
type analysis struct {
	toks  []token
	m     masked
	unit  unitText
	first bool   // first sentence of its line
	key   string // "FILE: …" or a table row's file cell
	start int    // index of the first token after the key
}

// keyFile recognises "FILE: text" (a list item or table row about a file).
func (a *analysis) keyFile() {
	if !a.first || len(a.toks) < 3 {
		return
	}
	if f := a.fileOf(a.toks[0]); f != "" && (a.toks[1].w == ":" || a.toks[1].w == "—" || a.toks[1].w == "-" || a.toks[1].w == "–") {
		a.key, a.start = f, 2
	}
}

// fileOf returns the file a token names, or "".
func (a *analysis) fileOf(t token) string {
	switch t.kind {
	case 'c':
		n, _ := strconv.Atoi(t.orig[1:])
		if n < len(a.m.codes) && fileLike(a.m.codes[n]) {
			return strings.TrimPrefix(a.m.codes[n], "./")
		}
	case 'w':
		if fileLike(t.orig) {
			return strings.TrimPrefix(t.orig, "./")
		}
	}
	return ""
}

// codeText returns a code token's content ("" for other tokens).
func (a *analysis) codeText(t token) string {
	if t.kind != 'c' {
		return ""
	}
	n, _ := strconv.Atoi(t.orig[1:])
	if n < len(a.m.codes) {
		return a.m.codes[n]
	}
	return ""
}

// boundary reports whether token i starts a new clause.
func (a *analysis) boundary(i int) bool {
	t := a.toks[i]
	if boundaryW[t.w] {
		return true
	}
	if t.w == "," && i+1 < len(a.toks) && afterComma[a.toks[i+1].w] {
		return true
	}
	return false
}

// clauseStart returns the index of the first token of i's clause.
func (a *analysis) clauseStart(i int) int {
	for j := i - 1; j >= a.start; j-- {
		if a.boundary(j) {
			return j + 1
		}
	}
	return a.start
}

// blocked reports whether the words before trigger i in its clause negate
// it, hedge it, make it conditional or intent, or (actor) give it another
// actor.
func (a *analysis) blocked(i int, actor bool) bool {
	cs := a.clauseStart(i)
	for j := cs; j < i; j++ {
		w := a.toks[j].w
		if negWords[w] || hedgeWords[w] || strings.HasSuffix(w, "n't") {
			return true
		}
		if (w == "failed" || w == "fail" || w == "forgot" || w == "neglected") && j+1 < len(a.toks) && a.toks[j+1].w == "to" {
			return true
		}
		if (w == "have" || w == "has" || w == "had") && j+1 < len(a.toks) && a.toks[j+1].w == "to" {
			return true
		}
		if j+1 < i {
			for _, p := range condPairs {
				if w == p[0] && a.toks[j+1].w == p[1] {
					return true
				}
			}
		}
		if actor && otherActors[w] {
			return true
		}
	}
	// "to" right before the verb: an infinitive ("to commit", "to make … pass")
	if i-1 >= cs && a.toks[i-1].w == "to" {
		return true
	}
	// an instruction: the clause starts with a base verb (outside change reports)
	if cs < i && a.unit.ctx != ctxChanges {
		first := cs
		for first < i && (a.toks[first].w == "then" || a.toks[first].w == "also" || a.toks[first].w == "just" || a.toks[first].w == "and" || a.toks[first].w == ",") {
			first++
		}
		if first < i && adviceStarts[a.toks[first].w] && (first == 0 || a.toks[first-1].kind == 'p' || a.toks[first-1].w == "and" || a.toks[first-1].w == "then") {
			return true
		}
	}
	return false
}

// passiveAux reports whether a passive auxiliary (been, was, were, is,
// are) directly precedes token i.
func (a *analysis) passiveAux(i int) bool {
	if i-1 < a.start {
		return false
	}
	switch a.toks[i-1].w {
	case "been", "was", "were", "is", "are":
		return true
	}
	return false
}

// hasAux reports whether an auxiliary precedes token i within 3 words.
func (a *analysis) hasAux(i int) bool {
	for j := i - 1; j >= max(a.start, i-3); j-- {
		if auxWords[a.toks[j].w] {
			return true
		}
		if a.boundary(j) {
			return false
		}
	}
	return false
}

// claims runs the triggers over the sentence.
func (a *analysis) claims() []rawClaim {
	var out []rawClaim
	toks := a.toks
	// triggers in order; the span of one ends where the next begins
	type trig struct{ i, class int }
	var trs []trig
	for i := a.start; i < len(toks); i++ {
		t := toks[i]
		if t.kind != 'w' {
			continue
		}
		class, ok := triggers[t.w]
		if ok && needAux[t.w] && !a.hasAux(i) {
			ok = false
		}
		if t.w == "successfully" && i > a.start && runsVerbs[toks[i-1].w] {
			class, ok = tPass, true // "the test suite runs successfully"
		}
		if t.w == "running" && !(i > 0 && (toks[i-1].w == "by" || toks[i-1].w == "after")) {
			ok = false
		}
		if (t.w == "made" || t.w == "make") && ok && !a.madeWork(i+1) {
			ok = false // "made it executable", "make sure": not a claim of work
		}
		if !ok && i == a.firstWord() && a.unit.ctx == ctxChanges && a.unit.item {
			class, ok = imperatives[t.w]
		}
		if ok {
			trs = append(trs, trig{i, class})
		}
	}
	for k, tr := range trs {
		end := len(toks)
		if k+1 < len(trs) {
			end = trs[k+1].i
		}
		out = append(out, a.claimAt(tr.i, tr.class, end)...)
	}
	out = append(out, a.noFailures()...)
	out = append(out, a.prState()...)
	if a.key != "" && a.unit.ctx == ctxChanges && !namesFile(out, a.key) {
		// "`docs/api.md` — documented the endpoint" in a change report
		kind := ClaimEditedFile
		if fw := a.firstWord(); fw >= 0 && (a.toks[fw].w == "new" || a.toks[fw].w == "added" || a.toks[fw].w == "created") {
			kind = ClaimCreatedFile
		}
		out = append(out, rawClaim{kind: kind, file: a.key})
	}
	out = append(out, a.testRun()...)
	return out
}

// madeWork reports whether "made"/"make" at from-1 has work as its object
// within 3 tokens: a commit, a change, an edit, a fix ("made a commit",
// "have make the change in utils.py").
func (a *analysis) madeWork(from int) bool {
	for j := from; j < min(len(a.toks), from+3); j++ {
		switch a.toks[j].w {
		case "commit", "commits", "change", "changes", "edit", "edits", "fix", "fixes", "modification", "modifications", "correction", "corrections", "new":
			return true
		}
		if a.boundary(j) {
			return false
		}
	}
	return false
}

// namesFile reports whether a claim names file f.
func namesFile(cs []rawClaim, f string) bool {
	for _, c := range cs {
		if c.file == f {
			return true
		}
	}
	return false
}

// firstWord returns the index of the first word token after the key.
func (a *analysis) firstWord() int {
	for i := a.start; i < len(a.toks); i++ {
		if a.toks[i].kind == 'w' {
			return i
		}
	}
	return -1
}

// claimAt turns trigger i (class) into claims, if its context allows.
func (a *analysis) claimAt(i, class, end int) []rawClaim {
	switch class {
	case tPass:
		if a.passClaim(i) {
			return []rawClaim{{kind: ClaimTestsPass}}
		}
		return nil
	case tRun:
		if a.blocked(i, true) {
			return nil
		}
		if a.testObject(i+1, min(end+4, i+10)) || (a.passiveAux(i) && a.testSubject(i)) { // "ran the tests", "the tests have been run"
			return []rawClaim{{kind: ClaimRanTests}}
		}
		return nil
	}
	if a.blocked(i, true) {
		return nil
	}
	switch class {
	case tCommit:
		return []rawClaim{{kind: ClaimCommitted}}
	case tPush:
		return []rawClaim{{kind: ClaimPushed}}
	case tInstall:
		return []rawClaim{{kind: ClaimInstalled}}
	case tDeploy:
		if w := a.toks[i].w; w == "shipped" || w == "released" || w == "published" {
			if !a.deployTarget(i + 1) {
				return nil
			}
		}
		return []rawClaim{{kind: ClaimDeployed}}
	case tPR:
		if a.prObject(i + 1) {
			return []rawClaim{{kind: ClaimOpenedPR}}
		}
		return nil
	}
	// file classes
	if class == tCreate {
		switch {
		case a.prObject(i + 1):
			return []rawClaim{{kind: ClaimOpenedPR}}
		case a.nounAhead(i+1, "commit"):
			return []rawClaim{{kind: ClaimCommitted}}
		}
	}
	files, container, object := a.filesAfter(i+1, end)
	if len(files) == 0 && a.key != "" {
		files = []string{a.key}
		container = object // "FILE: added a case" edits FILE; "FILE: added" creates it
		object = !object
	}
	kind := ClaimEditedFile
	if len(files) > 0 && !container {
		switch class {
		case tCreate:
			kind = ClaimCreatedFile
		case tDelete:
			kind = ClaimDeletedFile
		}
	}
	if len(files) == 0 {
		if class != tEdit && a.nounAheadSet(i+1, end, fileNouns) {
			if class == tCreate {
				kind = ClaimCreatedFile
			} else {
				kind = ClaimDeletedFile
			}
		}
		return []rawClaim{{kind: kind}}
	}
	out := make([]rawClaim, 0, len(files))
	for _, f := range files {
		out = append(out, rawClaim{kind: kind, file: f})
	}
	return out
}

// filesAfter finds the files trigger-span [from, end) names: the first as
// object (right after the verb) or container (after in/to/from…), then any
// joined to it by commas and "and". object reports whether the verb had a
// non-file object before the span ended.
func (a *analysis) filesAfter(from, end int) (files []string, container, object bool) {
	end = min(end, from+14)
	prevPrep := false
	for j := from; j < end && j < len(a.toks); j++ {
		t := a.toks[j]
		if f := a.fileOf(t); f != "" {
			if len(files) == 0 {
				container = prevPrep
			}
			files = append(files, f)
			// follow a list of files
			for j+2 <= end && j+1 < len(a.toks) && listJoins[a.toks[j+1].w] {
				k := j + 1
				for k < len(a.toks) && listJoins[a.toks[k].w] {
					k++
				}
				if k >= len(a.toks) {
					break
				}
				g := a.fileOf(a.toks[k])
				if g == "" {
					break
				}
				files = append(files, g)
				j = k
			}
			// a coordinated object later in the span: "created a.go with … and b.go with …"
			for k := j + 1; k+1 < end && k+1 < len(a.toks); k++ {
				if a.boundary(k) || a.toks[k].w == "," && k+1 < len(a.toks) && afterComma[a.toks[k+1].w] {
					break
				}
				if a.toks[k].w != "and" {
					continue
				}
				n := k + 1
				for n < end && n < len(a.toks) && determiners[a.toks[n].w] {
					n++
				}
				if n < len(a.toks) {
					if g := a.fileOf(a.toks[n]); g != "" {
						files = append(files, g)
						k = n
					}
				}
			}
			return files, container, object
		}
		if t.w == "to" && j+1 < len(a.toks) {
			n := a.toks[j+1]
			if n.kind == 'w' && !n.isNum && !determiners[n.w] && a.fileOf(n) == "" {
				return files, container, object // "to validate": an infinitive ends the object
			}
		}
		if spanStops[t.w] && t.w != "to" {
			return files, container, object
		}
		if preps[t.w] {
			prevPrep = true
			continue
		}
		if t.kind != 'p' && !determiners[t.w] {
			object = true
		}
		if !determiners[t.w] && !adjectives[t.w] {
			prevPrep = prevPrep && t.kind == 'p'
		}
	}
	return files, container, object
}

var (
	determiners = setOf("the", "a", "an", "this", "that", "these", "those", "its", "their", "our", "my", "your", "all",
		"both", "each", "every", "some", "any", "two", "three", "several")
	adjectives = setOf("new", "old", "obsolete", "unused", "empty", "missing", "existing", "legacy", "stale", "dead",
		"file", "files", "whole", "entire", "relevant", "corresponding", "generated", "temporary", "extra", "duplicate")
)

// nounAhead reports whether word w appears within 4 tokens after from.
func (a *analysis) nounAhead(from int, w string) bool {
	for j := from; j < min(len(a.toks), from+4); j++ {
		if a.toks[j].w == w {
			return true
		}
		if a.boundary(j) {
			return false
		}
	}
	return false
}

func (a *analysis) nounAheadSet(from, end int, set map[string]bool) bool {
	for j := from; j < min(len(a.toks), end, from+6); j++ {
		if set[a.toks[j].w] {
			return true
		}
		if a.boundary(j) {
			return false
		}
	}
	return false
}

// prObject reports whether a pull/merge request follows within 4 tokens.
func (a *analysis) prObject(from int) bool {
	for j := from; j < min(len(a.toks), from+4); j++ {
		w := a.toks[j].w
		if prNouns[w] || strings.HasPrefix(w, "pr#") {
			if w == "merge" && !(j+1 < len(a.toks) && a.toks[j+1].w == "request") {
				return false
			}
			if w == "pull" && !(j+1 < len(a.toks) && strings.HasPrefix(a.toks[j+1].w, "request")) {
				return false
			}
			return true
		}
		if a.boundary(j) {
			return false
		}
	}
	return false
}

// deployTarget reports whether "shipped/released/published" goes somewhere
// that is a deployment (to production, to staging, to npm…).
func (a *analysis) deployTarget(from int) bool {
	for j := from; j < min(len(a.toks), from+6); j++ {
		switch a.toks[j].w {
		case "prod", "production", "staging", "live", "cluster", "server", "servers", "npm", "pypi", "registry",
			"heroku", "vercel", "netlify", "fly", "k8s", "kubernetes", "crates.io":
			return true
		}
	}
	return false
}

// testObject reports whether a test suite or test command is named in
// [from, end): a test noun, a code span that runs tests, or words that
// spell a test command ("cargo test", "pytest").
func (a *analysis) testObject(from, end int) bool {
	var words []string
	for j := from; j < min(end, len(a.toks)); j++ {
		t := a.toks[j]
		if t.w == ";" || t.w == "(" {
			break
		}
		if testNouns[t.w] || (strings.HasPrefix(t.w, "test") && strings.HasSuffix(t.w, "s") && len(t.w) <= 6) {
			if j+1 < len(a.toks) && testThings[a.toks[j+1].w] {
				continue // "the test file", "test data": not a test run
			}
			return true
		}
		if c := a.codeText(t); c != "" && isTestCommand(c) {
			return true
		}
		words = append(words, t.orig)
	}
	return isTestCommand(strings.Join(words, " "))
}

// testThings after "test" make it a thing, not a run.
var testThings = setOf("file", "files", "data", "fixture", "fixtures", "helper", "helpers", "utilities", "utils",
	"directory", "folder", "dir", "case", "cases", "name", "names", "plan", "coverage")

// testSubject reports whether a test subject precedes pass word i within
// 6 tokens (crossing dashes and colons, not semicolons).
func (a *analysis) testSubject(i int) bool {
	for j := i - 1; j >= max(a.start, i-6); j-- {
		t := a.toks[j]
		if t.w == ";" {
			return false
		}
		if testNouns[t.w] || t.w == "everything" || (t.w == "all" && (j == i-1 || (j == i-2 && (a.toks[i-1].w == "is" || a.toks[i-1].w == "are")))) {
			return true
		}
		if c := a.codeText(t); c != "" && isTestCommand(c) {
			return true
		}
		if j+1 < len(a.toks) && isTestCommand(t.orig+" "+a.toks[j+1].orig) {
			return true
		}
	}
	return false
}

// passClaim decides whether pass word i claims the tests pass.
func (a *analysis) passClaim(i int) bool {
	toks := a.toks
	w := toks[i].w
	subject := a.testSubject(i)
	if !subject && i > a.start && toks[i-1].isNum && (w == "passed" || w == "passing") {
		subject = true // "23 passed"
	}
	if !subject && w != "green" {
		for j := i + 1; j < min(len(toks), i+4); j++ { // "passes all tests"
			if testNouns[toks[j].w] {
				subject = true
				break
			}
		}
	}
	if !subject {
		return false
	}
	if a.blocked(i, false) {
		return false
	}
	cs := a.clauseStart(i)
	ce := len(toks)
	for j := i + 1; j < len(toks); j++ {
		if toks[j].w == ";" {
			ce = j
			break
		}
	}
	for j := cs; j < ce; j++ {
		t := toks[j].w
		if failWords[t] && !(j > 0 && zeroWords[toks[j-1].w]) {
			return false
		}
		if j < i && (partialWords[t] || pastState[t]) {
			return false
		}
		if j < i && t == "of" && j > 0 && toks[j-1].isNum {
			return false // "3 of 4 tests pass"
		}
		if t == "but" && j+1 < len(toks) && toks[j+1].w == "not" {
			return false
		}
	}
	return true
}

// noFailures finds "0 failures", "no failing tests", "no test failures".
func (a *analysis) noFailures() []rawClaim {
	for i := a.start + 1; i < len(a.toks); i++ {
		w := a.toks[i].w
		if w != "failures" && w != "failing" && w != "failed" && w != "fails" {
			continue
		}
		p := a.toks[i-1].w
		if p == "test" && i >= 2 {
			p = a.toks[i-2].w
		}
		if p != "0" && p != "zero" && p != "no" {
			continue
		}
		if a.blocked(i-1, false) {
			continue
		}
		if p == "no" && !a.testSubject(i) && !(i+1 < len(a.toks) && testNouns[a.toks[i+1].w]) && w != "failures" {
			continue
		}
		return []rawClaim{{kind: ClaimTestsPass}}
	}
	return nil
}

// prState finds a pull request stated as existing: "the PR is open",
// "PR #12 is up", "pull request has been created".
func (a *analysis) prState() []rawClaim {
	for i := a.start; i < len(a.toks); i++ {
		w := a.toks[i].w
		if !(w == "pr" || w == "mr" || (w == "request" && i > 0 && (a.toks[i-1].w == "pull" || a.toks[i-1].w == "merge"))) {
			continue
		}
		j := i + 1
		if j < len(a.toks) && strings.HasPrefix(a.toks[j].w, "#") {
			j++
		}
		for j < len(a.toks) && auxWords[a.toks[j].w] {
			j++
		}
		if j >= len(a.toks) {
			continue
		}
		w2 := a.toks[j].w
		if j == i+1 && w2 != "opened" && w2 != "created" && w2 != "submitted" && w2 != "raised" {
			continue // "PR open" without a verb is too vague; "PR opened" is a telegraphic past
		}
		switch w2 {
		case "open", "up", "opened", "created", "submitted", "ready", "live", "raised":
			if !a.blocked(i, true) && !a.blocked(j, true) {
				return []rawClaim{{kind: ClaimOpenedPR}}
			}
		}
	}
	return nil
}

// testRun finds "test run finished/completed".
func (a *analysis) testRun() []rawClaim {
	for i := a.start; i+2 < len(a.toks); i++ {
		if a.toks[i].w == "test" && a.toks[i+1].w == "run" {
			switch a.toks[i+2].w {
			case "finished", "completed", "complete", "done", ":", "succeeded", "passed":
				if !a.blocked(i, true) {
					return []rawClaim{{kind: ClaimRanTests}}
				}
			}
		}
	}
	return nil
}

// knownExt are file extensions that make a word a file name.
var knownExt = setOf("go", "mod", "sum", "py", "pyi", "js", "mjs", "cjs", "jsx", "ts", "tsx", "rb", "rs", "java", "kt",
	"kts", "scala", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "cs", "fs", "swift", "m", "mm", "php", "sh", "bash",
	"zsh", "fish", "ps1", "bat", "yaml", "yml", "json", "jsonc", "json5", "toml", "ini", "cfg", "conf", "md", "mdx",
	"txt", "rst", "adoc", "sql", "html", "htm", "css", "scss", "sass", "less", "lock", "xml", "gradle", "properties",
	"env", "tf", "tfvars", "hcl", "proto", "graphql", "gql", "vue", "svelte", "ex", "exs", "erl", "hrl", "hs", "ml",
	"mli", "lua", "pl", "pm", "r", "jl", "dart", "clj", "cljs", "edn", "ipynb", "csv", "tsv", "db", "sqlite", "png",
	"jpg", "jpeg", "gif", "svg", "ico", "mk", "cmake", "bzl", "bazel", "nix", "dockerfile", "tmpl", "tpl", "j2",
	"jinja", "erb", "haml", "pug", "snap", "golden", "out", "log", "patch", "diff", "el", "vim", "zig", "nim", "pem",
	"crt", "pub", "plist", "sln", "csproj", "fsproj", "props", "targets", "service", "lockb", "cfm", "asm", "s", "wasm")

// knownNames are file names without an extension.
var knownNames = setOf("makefile", "gnumakefile", "dockerfile", "containerfile", "gemfile", "rakefile", "procfile",
	"jenkinsfile", "vagrantfile", "brewfile", "justfile", "license", "readme", "changelog", "codeowners", "taskfile",
	"pipfile", "podfile", "fastfile", "berksfile", "guardfile", "capfile", "snakefile", "notice", "authors")

var reFileChars = lazyre.New(`^[\w./@+~-]+$`)

// fileLike reports whether s names a file: one word of path characters
// whose base name has a known extension, is a known extension-less name
// (Makefile), or is a dotfile (.gitignore).
func fileLike(s string) bool {
	s = strings.TrimRight(s, ".,:;")
	if s == "" || len(s) > 300 || !reFileChars.MatchString(s) || strings.Contains(s, "://") || strings.HasSuffix(s, "/") {
		return false
	}
	base := s[strings.LastIndex(s, "/")+1:]
	lb := strings.ToLower(base)
	if knownNames[lb] {
		return true
	}
	if strings.HasPrefix(base, ".") {
		return len(base) > 1 && base != ".." && unicode.IsLetter(rune(base[1]))
	}
	dot := strings.LastIndex(base, ".")
	if dot <= 0 || dot == len(base)-1 {
		return false
	}
	return knownExt[strings.ToLower(base[dot+1:])]
}
