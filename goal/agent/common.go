package agent

import (
	"path"
	"strconv"
	"strings"

	"github.com/goalrun/goalrun/internal/lazyre"
	"github.com/goalrun/goalrun/sandbox/egress"
)

// MaxPendingCalls bounds the tool calls a parser keeps waiting for their
// results: 4096. Beyond it the oldest waiting call is reported failed at
// once, so a stream of calls that never get results costs bounded memory.
const MaxPendingCalls = 4096

// turnState is what every parser tracks: the result being built, the tool
// calls waiting for their results, the model seen last and the auth-retry
// streak.
type turnState struct {
	res      TurnResult
	terminal bool // the CLI's terminal event was seen

	pending  map[string]*Tool
	order    []string // call ids in the order they were made (may hold resolved ids)
	model    string   // last model announced with KindModel
	authRun  int      // consecutive auth-failure retries
	authStop bool     // Stop was emitted
	// stormLimit (0: none) ends the turn after that many consecutive
	// transient retries (stormRun: 429, 5xx, failed connections) with no
	// model answer in between.
	stormLimit, stormRun int
	lastError            string // the CLI's last error words, for a failure without a result
}

func newTurnState() turnState {
	return turnState{pending: map[string]*Tool{}}
}

// session records the latest session id and emits KindSession when it
// changes.
func (s *turnState) session(id string, emit func(Event)) {
	if id == "" || id == s.res.SessionID {
		return
	}
	s.res.SessionID = id
	emit(Event{Kind: KindSession, SessionID: id})
}

// seeModel records the model that answered and emits KindModel when it
// changes.
func (s *turnState) seeModel(m string, emit func(Event)) {
	if m == "" {
		return
	}
	s.res.Model = m
	if m != s.model {
		s.model = m
		emit(Event{Kind: KindModel, Model: m})
	}
}

// call records a tool call and emits KindToolCall. A call whose id is
// already waiting is not announced twice.
func (s *turnState) call(t *Tool, emit func(Event)) {
	if t.ID != "" {
		if _, dup := s.pending[t.ID]; dup {
			return
		}
		if len(s.pending) >= MaxPendingCalls {
			s.evictOldest(emit)
		}
		s.pending[t.ID] = t
		s.order = append(s.order, t.ID)
		s.compactOrder()
	}
	emit(Event{Kind: KindToolCall, Tool: t})
}

// result resolves a waiting call and emits KindToolResult. A result for a
// call that is not waiting (its call was before a resume, or evicted) is
// ignored and reported false.
func (s *turnState) result(id string, ok bool, emit func(Event)) bool {
	return s.resultOutcome(id, ok, false, emit)
}

// resultOutcome is result for a call whose outcome may be unknown (see
// Tool.Unknown; an unknown outcome is never ok).
func (s *turnState) resultOutcome(id string, ok, unknown bool, emit func(Event)) bool {
	t, found := s.pending[id]
	if !found {
		return false
	}
	delete(s.pending, id)
	r := *t
	r.OK, r.Unknown = ok && !unknown, unknown
	emit(Event{Kind: KindToolResult, Tool: &r})
	return true
}

// answered notes that the model answered (text or a tool call): a retry
// storm is over.
func (s *turnState) answered() { s.stormRun = 0 }

// waiting returns the waiting call with id, or nil.
func (s *turnState) waiting(id string) *Tool { return s.pending[id] }

func (s *turnState) evictOldest(emit func(Event)) {
	for len(s.order) > 0 {
		id := s.order[0]
		s.order = s.order[1:]
		if _, ok := s.pending[id]; ok {
			s.result(id, false, emit)
			return
		}
	}
}

// compactOrder drops resolved ids from order once it is mostly stale, so
// order stays O(waiting calls).
func (s *turnState) compactOrder() {
	if len(s.order) < 64 || len(s.order) < 4*len(s.pending) {
		return
	}
	kept := s.order[:0]
	for _, id := range s.order {
		if _, ok := s.pending[id]; ok {
			kept = append(kept, id)
		}
	}
	s.order = kept
}

// failWaiting reports every call still waiting for its result as failed, in
// the order the calls were made: the process ended (or was stopped) before
// they were answered, so nothing shows they succeeded.
func (s *turnState) failWaiting(emit func(Event)) {
	for _, id := range s.order {
		if _, ok := s.pending[id]; ok {
			s.result(id, false, emit)
		}
	}
	s.order = s.order[:0]
}

// retry emits KindRetry and tracks the streak of auth failures; after
// AuthRetryLimit consecutive 401/403 retries it marks the turn
// auth_required and emits the Stop event (once).
func (s *turnState) retry(r Retry, emit func(Event)) {
	s.res.Retries++
	emit(Event{Kind: KindRetry, Retry: &r})
	s.lastError = "model API retry " + strconv.Itoa(r.Attempt)
	if r.Status != 0 {
		s.lastError += ", HTTP " + strconv.Itoa(r.Status)
	}
	if r.Message != "" {
		s.lastError += " (" + r.Message + ")"
	}
	if isTransientStatus(r.Status) && !egressRefusal(r.Message) {
		s.stormRun++
		if s.stormLimit > 0 && s.stormRun >= s.stormLimit && !s.authStop {
			s.stopStorm(r, emit)
		}
	} else {
		s.stormRun = 0
	}
	if !isAuthStatus(r.Status) || egressRefusal(r.Message) {
		s.authRun = 0
		return
	}
	s.authRun++
	if s.authRun >= AuthRetryLimit && !s.authStop {
		msg := "the model API refused the credentials: HTTP " + strconv.Itoa(r.Status)
		if r.Message != "" {
			msg += " (" + r.Message + ")"
		}
		msg += " on " + strconv.Itoa(s.authRun) + " consecutive attempts"
		s.stopAuth(authReason(r.Status, r.Message), msg, emit)
	}
}

// isTransientStatus reports whether a retry's HTTP status is one the model
// API may recover from: 429, 5xx, or 0 (no answer: the connection failed).
func isTransientStatus(code int) bool {
	return code == 0 || code == 429 || (code >= 500 && code <= 599)
}

// stopStorm ends the turn after a storm of transient retries (stormLimit in
// a row, the last one r) and asks the runner to kill the process now.
func (s *turnState) stopStorm(r Retry, emit func(Event)) {
	msg := "the model API failed " + strconv.Itoa(s.stormRun) + " times in a row"
	if r.Status != 0 {
		msg += ", last with HTTP " + strconv.Itoa(r.Status)
	}
	if r.Message != "" {
		msg += " (" + r.Message + ")"
	}
	msg += "; the turn was stopped instead of letting the agent retry for minutes"
	s.res.Status, s.res.Cause, s.res.Message = StatusFailed, CauseRetryStorm, msg
	s.authStop = true // one Stop per turn
	emit(Event{Kind: KindError, Error: &Error{Message: msg, Fatal: true}, Stop: true})
}

// stopAuth marks the turn auth_required and, the first time, emits a fatal
// auth error with Stop set so the runner kills the process now.
func (s *turnState) stopAuth(reason, msg string, emit func(Event)) {
	s.markAuth(reason, msg)
	if !s.authStop {
		s.authStop = true
		emit(Event{Kind: KindError, Error: &Error{Message: msg, Fatal: true, Auth: s.res.Status == StatusAuthRequired}, Stop: true})
	}
}

// markAuth records an auth failure as the turn's outcome. A refusal that
// goalrun's own egress proxy wrote (egressRefusal) is not one: the model API
// never saw the key, so the turn fails with CauseEgressRefused instead.
func (s *turnState) markAuth(reason, msg string) {
	if egressRefusal(msg) {
		s.res.Status = StatusFailed
		s.res.Cause = CauseEgressRefused
		s.res.AuthReason = ""
		s.res.Message = msg
		return
	}
	s.res.Status = StatusAuthRequired
	s.res.Cause = CauseAuthRequired
	s.res.AuthReason = reason
	s.res.Message = msg
}

// finish fills the status of a turn whose parser saw no terminal event and
// fails the calls still waiting; a failure whose message quotes goalrun's
// egress proxy gets CauseEgressRefused. It is the common tail of every End.
func (s *turnState) finish(emit func(Event)) TurnResult {
	s.failWaiting(emit)
	switch {
	case s.res.Status == StatusAuthRequired, s.res.Cause == CauseRetryStorm:
	case !s.terminal:
		s.res.Status = StatusFailed
		s.res.Cause = CauseNoResultEvent
		if s.res.Message == "" {
			s.res.Message = "the agent's output ended without its final result event"
			if s.lastError != "" {
				s.res.Message += "; its last error: " + s.lastError
			}
		}
	case s.res.Status == "":
		s.res.Status = StatusSuccess
	}
	if s.res.Status == StatusFailed && s.res.Cause != CauseMaxTurns && egressRefusal(s.res.Message) {
		// The CLI quotes goalrun's egress proxy (a 403 refusal or a 502
		// "cannot reach"): a network cause, whatever the CLI called it.
		s.res.Cause = CauseEgressRefused
	}
	return s.res
}

// lineStats counts a line the parser could not use.
func (s *turnState) skipped(oversize bool) {
	if oversize {
		s.res.OversizeLines++
		return
	}
	s.res.SkippedLines++
}

func isAuthStatus(code int) bool { return code == 401 || code == 403 }

// egressMark is how every answer of goalrun's egress proxy begins
// (egress.BodyPrefix without its space); a CLI quotes it in its error
// message ("API Error: 403 goalrun egress: refused api.anthropic.com:443: …").
var egressMark = strings.TrimSpace(egress.BodyPrefix)

// egressRefusal reports whether a CLI's error message quotes goalrun's own
// egress proxy: the request never reached the model API, so a 401/403 in
// it says nothing about the key.
func egressRefusal(msg string) bool { return strings.Contains(msg, egressMark) }

var (
	authStatusRe = lazyre.New(`\b(401|403)\b`)
	authWordsRe  = lazyre.New(`(?i)unauthori[sz]ed|forbidden|invalid[ _-]?(x-)?api[ _-]?key|incorrect api key|api key not valid|authentication[ _]?(error|failed)|invalid bearer token|permission_error|oauth token (has )?expired|missing (environment variable|api key)|no api key|not logged in|please run /login`)
	missingKeyRe = lazyre.New(`(?i)missing (environment variable|api key)|no api key|api key (is )?(not set|required)|not logged in|could not resolve authentication|missing bearer|missing authentication|no auth(entication)? credentials`)
	expiredRe    = lazyre.New(`(?i)expired`)
)

// authFailure reports whether a CLI's error message says the model API
// refused the credentials (HTTP 401/403 or the words providers use for it),
// and which reason it is.
func authFailure(msg string) (reason string, ok bool) {
	if msg == "" || egressRefusal(msg) {
		return "", false
	}
	if !authStatusRe.MatchString(msg) && !authWordsRe.MatchString(msg) {
		return "", false
	}
	// A 401/403 number alone could be anything ("403 files"); require it
	// next to HTTP words, or the provider's auth words.
	if !authWordsRe.MatchString(msg) && !strings.Contains(strings.ToLower(msg), "status") && !strings.Contains(msg, "HTTP") {
		return "", false
	}
	return authReason(0, msg), true
}

// authReason classifies an auth failure: missing_key, expired or
// invalid_key (the default).
func authReason(status int, msg string) string {
	switch {
	case missingKeyRe.MatchString(msg):
		return AuthMissingKey
	case expiredRe.MatchString(msg):
		return AuthExpired
	}
	return AuthInvalidKey
}

// relPath makes p relative to root when it lies inside root (the agent's
// working directory), so receipts name workspace paths; other paths are
// returned cleaned.
func relPath(root, p string) string {
	if p == "" {
		return ""
	}
	p = path.Clean(p)
	if root == "" || !path.IsAbs(p) {
		return p
	}
	root = path.Clean(root)
	if p == root {
		return "."
	}
	if rest, ok := strings.CutPrefix(p, strings.TrimSuffix(root, "/")+"/"); ok {
		return rest
	}
	return p
}
