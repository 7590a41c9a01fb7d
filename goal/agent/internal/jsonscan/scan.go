// Package jsonscan reads the few fields goalrun needs out of an agent CLI's
// JSON lines without decoding the rest.
//
// Agent streams are dominated by tool results that carry whole files and
// command outputs; goalrun needs a handful of short fields (type, ids,
// is_error, usage) per line. A Value is a slice of the input line: iterating
// an object skips the members it is not asked about with a byte search for
// the closing quote, so the cost of a line is one pass over its bytes and no
// allocation except for the strings actually extracted. encoding/json decodes
// such lines at under 100 MB/s; this runs at several hundred (see
// docs/benchmarks.md, section "agents").
//
// The scanner checks structure (quotes, brackets, separators, literals) but
// not everything encoding/json would reject inside skipped values (control
// characters in strings, invalid escapes, leading zeros). Strings it does
// decode are decoded exactly as encoding/json decodes them, invalid UTF-8
// and lone surrogates included (fuzz-tested).
package jsonscan

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Value is one raw JSON value: a slice of the input, not a copy. It is only
// valid as long as the input is.
type Value []byte

// Kind is the JSON type of a Value, judged by its first byte.
type Kind int

// The kinds.
const (
	Invalid Kind = iota
	Null
	Bool
	Number
	String
	Object
	Array
)

// ErrSyntax is wrapped by every error the scanner returns.
var ErrSyntax = errors.New("jsonscan: malformed JSON")

func syntaxErr(what string, off int) error {
	return &SyntaxError{What: what, Offset: off}
}

// SyntaxError says what was malformed and at which byte offset of the
// scanned value.
type SyntaxError struct {
	What   string
	Offset int
}

// Error says what was malformed and where.
func (e *SyntaxError) Error() string {
	return "jsonscan: malformed JSON: " + e.What + " at byte " + strconv.Itoa(e.Offset)
}

// Unwrap makes errors.Is(err, ErrSyntax) true.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// Parse trims surrounding whitespace from line and checks that it holds
// exactly one JSON value, scanning it once. It returns ErrSyntax (wrapped)
// when it does not.
func Parse(line []byte) (Value, error) {
	i := skipWS(line, 0)
	if i >= len(line) {
		return nil, syntaxErr("empty input", i)
	}
	end, err := skip(line, i)
	if err != nil {
		return nil, err
	}
	if j := skipWS(line, end); j != len(line) {
		return nil, syntaxErr("data after the value", j)
	}
	return Value(line[i:end]), nil
}

// ParseObject is Parse for a line that must hold one JSON object. It is
// cheaper than Parse followed by Each: it scans the members once, calling fn
// for each, and checks what follows the object. fn's values are only valid
// during the call unless the caller keeps line alive. When the line is not a
// well-formed object the error is returned and fn may already have been
// called for the members before the fault; callers collect first and act
// only on success.
func ParseObject(line []byte, fn func(key []byte, val Value)) error {
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return syntaxErr("not an object", i)
	}
	end, err := eachMember(line, i, true, func(k []byte, v Value) bool { fn(k, v); return true })
	if err != nil {
		return err
	}
	if j := skipWS(line, end); j != len(line) {
		return syntaxErr("data after the object", j)
	}
	return nil
}

// Kind returns v's JSON type, Invalid for an empty or unrecognised value.
func (v Value) Kind() Kind {
	if len(v) == 0 {
		return Invalid
	}
	switch c := v[0]; {
	case c == 'n':
		return Null
	case c == 't' || c == 'f':
		return Bool
	case c == '"':
		return String
	case c == '{':
		return Object
	case c == '[':
		return Array
	case c == '-' || (c >= '0' && c <= '9'):
		return Number
	}
	return Invalid
}

// IsNull reports whether v is absent (empty) or the literal null.
func (v Value) IsNull() bool { return len(v) == 0 || string(v) == "null" }

// Each calls fn for each member of the object v in order, until fn returns
// false. key is the member name as it appears between the quotes (escape
// sequences are not decoded; agent CLIs do not escape their key names). It
// returns ErrSyntax (wrapped) when v is not an object or is malformed.
func (v Value) Each(fn func(key []byte, val Value) bool) error {
	if len(v) == 0 || v[0] != '{' {
		return syntaxErr("not an object", 0)
	}
	_, err := eachMember(v, 0, false, fn)
	return err
}

// Elems calls fn for each element of the array v in order, until fn returns
// false. It returns ErrSyntax (wrapped) when v is not an array or is
// malformed.
func (v Value) Elems(fn func(val Value) bool) error {
	if len(v) == 0 || v[0] != '[' {
		return syntaxErr("not an array", 0)
	}
	b := []byte(v)
	i := skipWS(b, 1)
	if i < len(b) && b[i] == ']' {
		return nil
	}
	for {
		if i >= len(b) {
			return syntaxErr("unterminated array", i)
		}
		end, err := skip(b, i)
		if err != nil {
			return err
		}
		if !fn(Value(b[i:end])) {
			return nil
		}
		i = skipWS(b, end)
		if i >= len(b) {
			return syntaxErr("unterminated array", i)
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return nil
		default:
			return syntaxErr("expected , or ]", i)
		}
	}
}

// Get returns the first member of the object v named key, or nil when v is
// not an object or has no such member.
func (v Value) Get(key string) Value {
	var out Value
	_ = v.Each(func(k []byte, val Value) bool {
		if string(k) == key {
			out = val
			return false
		}
		return true
	})
	return out
}

// Str decodes the JSON string v. ok is false when v is not a string.
// Invalid UTF-8 and lone surrogates become U+FFFD, as with encoding/json.
func (v Value) Str() (s string, ok bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), true
	}
	return unquote(body)
}

// Text is Str that returns "" for anything that is not a string.
func (v Value) Text() string {
	s, _ := v.Str()
	return s
}

// Bool returns the boolean v; ok is false when v is not true or false.
func (v Value) Bool() (b, ok bool) {
	switch string(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// True reports whether v is the literal true.
func (v Value) True() bool { return string(v) == "true" }

// Int returns the number v as an int64, truncating a fraction or exponent
// form towards zero. ok is false when v is not a number or does not fit.
func (v Value) Int() (int64, bool) {
	if v.Kind() != Number {
		return 0, false
	}
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f > 9.2e18 || f < -9.2e18 {
		return 0, false
	}
	return int64(f), true
}

// Float returns the number v as a float64; ok is false when v is not a
// number.
func (v Value) Float() (float64, bool) {
	if v.Kind() != Number {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return f, err == nil
}

// eachMember walks the object at b[i] == '{'. With full it scans to the
// end even after fn returned false, and returns the offset past the '}';
// without, it returns as soon as fn returns false.
func eachMember(b []byte, i int, full bool, fn func(key []byte, val Value) bool) (end int, err error) {
	start := i
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	stopped := false
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, syntaxErr("expected a member name", i-start)
		}
		kEnd, err := skipString(b, i)
		if err != nil {
			return 0, err
		}
		key := b[i+1 : kEnd-1]
		i = skipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return 0, syntaxErr("expected :", i-start)
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return 0, syntaxErr("missing value", i-start)
		}
		vEnd, err := skip(b, i)
		if err != nil {
			return 0, err
		}
		if !stopped && !fn(key, Value(b[i:vEnd])) {
			if !full {
				return vEnd, nil
			}
			stopped = true
		}
		i = skipWS(b, vEnd)
		if i >= len(b) {
			return 0, syntaxErr("unterminated object", i-start)
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return 0, syntaxErr("expected , or }", i-start)
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skip returns the offset just past the value starting at b[i].
func skip(b []byte, i int) (int, error) {
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		return skipContainer(b, i)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	}
	return 0, syntaxErr("unexpected character "+strconv.QuoteRune(rune(b[i])), i)
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, syntaxErr("bad literal", i)
	}
	return i + len(lit), nil
}

func skipNumber(b []byte, i int) (int, error) {
	j := i
	if b[j] == '-' {
		j++
	}
	digits := 0
	for j < len(b) {
		c := b[j]
		if (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' {
			if c >= '0' && c <= '9' {
				digits++
			}
			j++
			continue
		}
		break
	}
	if digits == 0 {
		return 0, syntaxErr("bad number", i)
	}
	return j, nil
}

// skipString returns the offset just past the closing quote of the string
// starting at b[i] == '"'. It finds quotes with a byte search and counts the
// backslashes before each to tell an escaped quote from the closing one.
func skipString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, syntaxErr("unterminated string", i)
		}
		j += k
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, nil
		}
		j++
	}
}

// skipContainer returns the offset just past the object or array starting at
// b[i]. It tracks nesting depth and skips strings whole; it checks that the
// brackets balance but not that their kinds match or that separators sit
// where they should (values it skips are not validated in depth).
func skipContainer(b []byte, i int) (int, error) {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			e, err := skipString(b, j)
			if err != nil {
				return 0, err
			}
			j = e - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, syntaxErr("unterminated container", i)
}

// unquote decodes a JSON string body (between the quotes) the way
// encoding/json does.
func unquote(s []byte) (string, bool) {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return "", false
			}
			switch s[i+1] {
			case '"', '\\', '/':
				out = append(out, s[i+1])
				i += 2
			case 'b':
				out = append(out, '\b')
				i += 2
			case 'f':
				out = append(out, '\f')
				i += 2
			case 'n':
				out = append(out, '\n')
				i += 2
			case 'r':
				out = append(out, '\r')
				i += 2
			case 't':
				out = append(out, '\t')
				i += 2
			case 'u':
				r := hex4(s[i+2:])
				if r < 0 {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
						if r2 := hex4(s[i+2:]); r2 >= 0 {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								out = utf8.AppendRune(out, dec)
								i += 6
								continue
							}
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, s[i:i+size]...)
			}
			i += size
		}
	}
	return string(out), true
}

func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// Cursor walks one JSON text in a single pass, descending only into the
// members the caller asks for: every byte is looked at once, however deep
// the fields it needs are. (Value's methods re-scan a member each time one
// descends into it.) The zero Cursor is ready after Reset.
//
//	var c jsonscan.Cursor
//	c.Reset(line)
//	c.Object(func(key []byte) {
//		switch string(key) {
//		case "type":
//			typ = c.Value()
//		case "message":
//			c.Object(func(key []byte) { … })
//		} // members not consumed are skipped
//	})
//	if err := c.Done(); err != nil { … }
type Cursor struct {
	b   []byte
	i   int
	err error
}

// Reset points the cursor at the start of b and clears its error.
func (c *Cursor) Reset(b []byte) { c.b, c.i, c.err = b, 0, nil }

// Err returns the first syntax error met (wrapping ErrSyntax), or nil.
func (c *Cursor) Err() error { return c.err }

func (c *Cursor) fail(err error) {
	if c.err == nil {
		c.err = err
	}
	c.i = len(c.b)
}

func (c *Cursor) ws() { c.i = skipWS(c.b, c.i) }

// Peek returns the first byte of the next value ('{', '[', '"', 't', 'f',
// 'n', a digit or '-'), or 0 at the end or after an error.
func (c *Cursor) Peek() byte {
	c.ws()
	if c.err != nil || c.i >= len(c.b) {
		return 0
	}
	return c.b[c.i]
}

// Value consumes the next value and returns it raw (nil after an error).
func (c *Cursor) Value() Value {
	c.ws()
	if c.err != nil || c.i >= len(c.b) {
		c.fail(syntaxErr("missing value", c.i))
		return nil
	}
	start := c.i
	end, err := skip(c.b, c.i)
	if err != nil {
		c.fail(err)
		return nil
	}
	c.i = end
	return Value(c.b[start:end])
}

// Skip consumes the next value.
func (c *Cursor) Skip() { c.Value() }

// Object consumes the next value, which must be an object, calling fn for
// each member with the cursor at the member's value. fn consumes that value
// (Value, Skip, Object or Array) or leaves it, and then Object skips it;
// fn must not consume more than the one value. It returns false on a
// syntax error (see Err).
func (c *Cursor) Object(fn func(key []byte)) bool {
	if c.Peek() != '{' {
		c.fail(syntaxErr("expected an object", c.i))
		return false
	}
	c.i++
	c.ws()
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		return true
	}
	for {
		if c.i >= len(c.b) || c.b[c.i] != '"' {
			c.fail(syntaxErr("expected a member name", c.i))
			return false
		}
		end, err := skipString(c.b, c.i)
		if err != nil {
			c.fail(err)
			return false
		}
		key := c.b[c.i+1 : end-1]
		c.i = skipWS(c.b, end)
		if c.i >= len(c.b) || c.b[c.i] != ':' {
			c.fail(syntaxErr("expected :", c.i))
			return false
		}
		c.i = skipWS(c.b, c.i+1)
		if !c.member(func() { fn(key) }) {
			return false
		}
		if done, ok := c.separator('}', "object"); !ok || done {
			return ok
		}
	}
}

// Array consumes the next value, which must be an array, calling fn for
// each element with the cursor at it; fn consumes it or leaves it to be
// skipped, as with Object. It returns false on a syntax error.
func (c *Cursor) Array(fn func()) bool {
	if c.Peek() != '[' {
		c.fail(syntaxErr("expected an array", c.i))
		return false
	}
	c.i = skipWS(c.b, c.i+1)
	if c.i < len(c.b) && c.b[c.i] == ']' {
		c.i++
		return true
	}
	for {
		if c.i >= len(c.b) {
			c.fail(syntaxErr("unterminated array", c.i))
			return false
		}
		if !c.member(fn) {
			return false
		}
		if done, ok := c.separator(']', "array"); !ok || done {
			return ok
		}
	}
}

// member runs fn with the cursor at an object member's value or an array
// element and skips the value when fn left it. It returns false on a
// syntax error.
func (c *Cursor) member(fn func()) bool {
	start := c.i
	fn()
	if c.err != nil {
		return false
	}
	if c.i == start {
		c.Skip()
	}
	return c.err == nil
}

// separator consumes what follows a member of an object or array (what
// names it in errors): a comma (done false) or the closing byte closer
// (done true). ok is false on a syntax error.
func (c *Cursor) separator(closer byte, what string) (done, ok bool) {
	c.ws()
	if c.i >= len(c.b) {
		c.fail(syntaxErr("unterminated "+what, c.i))
		return false, false
	}
	switch c.b[c.i] {
	case ',':
		c.i = skipWS(c.b, c.i+1)
		return false, true
	case closer:
		c.i++
		return true, true
	default:
		c.fail(syntaxErr("expected , or "+string(closer), c.i))
		return false, false
	}
}

// Done checks that nothing but whitespace follows and returns the first
// error met while walking.
func (c *Cursor) Done() error {
	if c.err != nil {
		return c.err
	}
	if j := skipWS(c.b, c.i); j != len(c.b) {
		c.fail(syntaxErr("data after the value", j))
	}
	return c.err
}
