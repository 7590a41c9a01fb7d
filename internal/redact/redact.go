// Package redact replaces secret values in text and in structured values
// (event data, failure fields) with "***". It is the one redaction of
// goalrun: every text of the goalrun/1 document and its events passes it
// before it is capped (internal/textcap), and it keeps a truncation marker
// of textcap's intact and correct.
package redact

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/goalrun/goalrun/internal/textcap"
)

// Redacted replaces every secret value.
const Redacted = "***"

// MinSecretBytes is the shortest secret a Redactor replaces: 4 bytes.
// Shorter values ("", "1", "yes") would turn ordinary words and numbers of
// every text into "***" and protect nothing: a value that short is guessed,
// not leaked. New and Add ignore them.
const MinSecretBytes = 4

// MinFragmentBytes is the shortest piece of a secret Redact replaces at the
// very start or end of a text: 8 bytes. A text cut elsewhere (a sandbox's
// output tail, a line cut by a parser) can begin with the end of a secret or
// end with its beginning; such a fragment is replaced too. Shorter fragments
// are left alone, because a text that merely ends with the first few
// characters of a secret is common and says nothing.
const MinFragmentBytes = 8

// Redactor replaces secret values with Redacted. It is safe for concurrent
// use, and a nil *Redactor redacts nothing.
//
// Every secret is registered as given, trimmed of surrounding white space,
// and, for a multi-line secret (a PEM key), line by line; values shorter than
// MinSecretBytes are ignored. Longer secrets win where two overlap. Redact
// runs before capping (internal/textcap's Cap), so a secret that straddles a cut is replaced
// whole.
type Redactor struct {
	mu      sync.RWMutex
	secrets []string // unique, longest first
	rep     *strings.Replacer
}

// New returns a Redactor for secrets (see Redactor for which values
// count).
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add registers more secrets, for example values masked later in the run.
func (r *Redactor) Add(secrets ...string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[string]bool, len(r.secrets))
	for _, s := range r.secrets {
		seen[s] = true
	}
	add := func(s string) {
		if len(s) >= MinSecretBytes && !seen[s] {
			seen[s] = true
			r.secrets = append(r.secrets, s)
		}
	}
	for _, s := range secrets {
		add(s)
		add(strings.TrimSpace(s))
		if strings.ContainsAny(s, "\r\n") {
			for _, line := range strings.FieldsFunc(s, func(c rune) bool { return c == '\n' || c == '\r' }) {
				add(line)
				add(strings.TrimSpace(line))
			}
		}
	}
	sort.SliceStable(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	pairs := make([]string, 0, 2*len(r.secrets))
	for _, s := range r.secrets {
		pairs = append(pairs, s, Redacted)
	}
	r.rep = strings.NewReplacer(pairs...)
}

// Len returns how many secret values (variants included) are registered.
func (r *Redactor) Len() int {
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.secrets)
}

// Redact returns s with every registered secret replaced by Redacted, and
// with a fragment of a secret (at least MinFragmentBytes long) at the very
// start or end of the text replaced too.
//
// A truncation marker of textcap.Cap's at the end of s (or CapTail's at its
// start) is kept out of the replacement and its numbers are corrected for
// the bytes redaction removed or added, so a text capped before it was
// redacted still carries a marker Cap and CapTail recognize; the fragment
// left against the cut is found as an edge.
func (r *Redactor) Redact(s string) string {
	if r == nil || s == "" {
		return s
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.secrets) == 0 {
		return s
	}
	content, total, marked := textcap.SplitMarker(s, false)
	tail := false
	if !marked {
		content, total, marked = textcap.SplitMarker(s, true)
		tail = marked
	}
	red := r.rep.Replace(content)
	for _, sec := range r.secrets {
		red = redactEdges(red, sec)
	}
	if !marked {
		return red
	}
	if red == content {
		return s
	}
	return textcap.WithMarker(red, total-len(content)+len(red), tail)
}

// redactEdges replaces the longest proper suffix of sec that starts t, and
// the longest proper prefix of sec that ends t, when at least
// MinFragmentBytes long.
func redactEdges(t, sec string) string {
	if len(sec) <= MinFragmentBytes || len(t) < MinFragmentBytes {
		return t
	}
	// t starts with sec[i:] for some 0 < i: find t's first bytes in sec.
	head := t[:MinFragmentBytes]
	for off := 1; off < len(sec); {
		j := strings.Index(sec[off:], head)
		if j < 0 {
			break
		}
		i := off + j
		if strings.HasPrefix(t, sec[i:]) {
			t = Redacted + t[len(sec)-i:]
			break
		}
		off = i + 1
	}
	if len(t) < MinFragmentBytes {
		return t
	}
	// t ends with sec[:k] for some k < len(sec): find t's last bytes in sec.
	tail := t[len(t)-MinFragmentBytes:]
	for end := len(sec) - 1; end >= MinFragmentBytes; {
		j := strings.LastIndex(sec[:end], tail)
		if j < 0 {
			break
		}
		k := j + MinFragmentBytes
		if strings.HasSuffix(t, sec[:k]) {
			t = t[:len(t)-k] + Redacted
			break
		}
		end = k - 1
	}
	return t
}

// RedactValue returns v with every string in it redacted, for event data and
// cause-specific failure fields. Strings, numbers, booleans, nil, []string,
// []any, map[string]string and map[string]any are walked as they are (map
// keys are redacted too); an error or fmt.Stringer becomes its redacted
// text; a NaN or infinite float becomes nil (JSON has no such numbers); any
// other value is converted through JSON into those types first, and is
// dropped (nil) when it cannot be.
func (r *Redactor) RedactValue(v any) any {
	return r.redactValue(v, 0)
}

// maxValueDepth bounds how deep RedactValue walks; deeper values are nil.
const maxValueDepth = 32

func (r *Redactor) redactValue(v any, depth int) any {
	if depth > maxValueDepth {
		return nil
	}
	switch x := v.(type) {
	case nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return x
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil
		}
		return x
	case string:
		return r.Redact(x)
	case json.Number:
		return x
	case []string:
		out := make([]string, len(x))
		for i, s := range x {
			out[i] = r.Redact(s)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.redactValue(e, depth+1)
		}
		return out
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, s := range x {
			out[r.Redact(k)] = r.Redact(s)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.Redact(k)] = r.redactValue(e, depth+1)
		}
		return out
	case json.Marshaler:
		// time.Time and friends: their JSON form, below.
	case error:
		return r.Redact(x.Error())
	case fmt.Stringer:
		return r.Redact(x.String())
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return nil
	}
	return r.redactValue(generic, depth)
}
