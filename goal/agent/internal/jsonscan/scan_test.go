package jsonscan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseObjectCollectsMembers(t *testing.T) {
	line := []byte(` {"type":"user","n":12,"ok":true,"nested":{"a":[1,{"b":"}"}],"c":"\"]"},"s":"x\"y","z":null} `)
	got := map[string]string{}
	if err := ParseObject(line, func(k []byte, v Value) { got[string(k)] = string(v) }); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"type":   `"user"`,
		"n":      `12`,
		"ok":     `true`,
		"nested": `{"a":[1,{"b":"}"}],"c":"\"]"}`,
		"s":      `"x\"y"`,
		"z":      `null`,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("member %q = %s, want %s", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d members, want %d", len(got), len(want))
	}
}

func TestParseObjectRejects(t *testing.T) {
	cases := []struct{ name, in string }{
		{"empty", ``},
		{"spaces", `   `},
		{"array", `[1,2]`},
		{"plain text", `Reading additional input from stdin...`},
		{"unterminated", `{"type":"user"`},
		{"unterminated string", `{"type":"us`},
		{"trailing data", `{"a":1} x`},
		{"two objects", `{"a":1}{"b":2}`},
		{"missing colon", `{"a" 1}`},
		{"missing value", `{"a":}`},
		{"bad literal", `{"a":tru}`},
		{"bad separator", `{"a":1;"b":2}`},
		{"unquoted key", `{a:1}`},
		{"escaped closing quote", `{"a":"x\"}`},
		{"unbalanced nested", `{"a":{"b":[1,2}`},
		{"lone minus", `{"a":-}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ParseObject([]byte(c.in), func([]byte, Value) {})
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("ParseObject(%q) = %v, want ErrSyntax", c.in, err)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, in := range []string{`1`, ` "x" `, `[1,[2,{"a":"]"}]]`, `{"a":{}}`, `null`, `-0.5e3`} {
		v, err := Parse([]byte(in))
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if string(v) != strings.TrimSpace(in) {
			t.Errorf("Parse(%q) = %q", in, v)
		}
	}
	if _, err := Parse([]byte(`1 2`)); !errors.Is(err, ErrSyntax) {
		t.Errorf("Parse(1 2) = %v, want ErrSyntax", err)
	}
}

func TestValueAccessors(t *testing.T) {
	obj := Value(`{"s":"a\nb\u00e9\ud83d\ude00","i":42,"f":0.25,"e":1e3,"neg":-7,"t":true,"fa":false,"n":null,"arr":[1,"two",{"x":3}],"big":123456789012345678901}`)
	if got := obj.Get("s").Text(); got != "a\nbé😀" {
		t.Errorf("s = %q", got)
	}
	if n, ok := obj.Get("i").Int(); !ok || n != 42 {
		t.Errorf("i = %d %v", n, ok)
	}
	if n, ok := obj.Get("e").Int(); !ok || n != 1000 {
		t.Errorf("e as int = %d %v", n, ok)
	}
	if n, ok := obj.Get("neg").Int(); !ok || n != -7 {
		t.Errorf("neg = %d %v", n, ok)
	}
	if _, ok := obj.Get("big").Int(); ok {
		t.Errorf("big fits in int64?")
	}
	if f, ok := obj.Get("f").Float(); !ok || f != 0.25 {
		t.Errorf("f = %v %v", f, ok)
	}
	if !obj.Get("t").True() || obj.Get("fa").True() {
		t.Errorf("booleans wrong")
	}
	if b, ok := obj.Get("fa").Bool(); !ok || b {
		t.Errorf("fa = %v %v", b, ok)
	}
	if !obj.Get("n").IsNull() || !obj.Get("missing").IsNull() || obj.Get("i").IsNull() {
		t.Errorf("IsNull wrong")
	}
	if _, ok := obj.Get("i").Str(); ok {
		t.Errorf("a number decoded as a string")
	}
	var elems []string
	if err := obj.Get("arr").Elems(func(v Value) bool { elems = append(elems, string(v)); return true }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(elems, "|") != `1|"two"|{"x":3}` {
		t.Errorf("elems = %q", elems)
	}
	kinds := map[string]Kind{"s": String, "i": Number, "t": Bool, "n": Null, "arr": Array}
	for k, want := range kinds {
		if got := obj.Get(k).Kind(); got != want {
			t.Errorf("Kind(%s) = %v, want %v", k, got, want)
		}
	}
	if err := Value(`[1,2`).Elems(func(Value) bool { return true }); !errors.Is(err, ErrSyntax) {
		t.Errorf("unterminated array: %v", err)
	}
	if err := Value(`"x"`).Each(func([]byte, Value) bool { return true }); !errors.Is(err, ErrSyntax) {
		t.Errorf("Each on a string: %v", err)
	}
}

func TestEachStopsEarly(t *testing.T) {
	n := 0
	err := Value(`{"a":1,"b":2,"c":3}`).Each(func(k []byte, v Value) bool { n++; return string(k) != "b" })
	if err != nil || n != 2 {
		t.Fatalf("n=%d err=%v", n, err)
	}
}

// FuzzStr checks that Str decodes every JSON string exactly as encoding/json
// does, including invalid UTF-8 and lone surrogates.
func FuzzStr(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b"`, `"\ud800"`, `"\ud83d\ude00"`, `"\u00e9\n\t\\/"`, "\"\xff\xfe\"", `"\ud800\u0041"`, `"\udc00\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want string
		wantErr := json.Unmarshal(b, &want)
		v, err := Parse(b)
		if wantErr != nil || err != nil || v.Kind() != String {
			return // only valid JSON strings are compared
		}
		got, ok := v.Str()
		if !ok {
			t.Fatalf("Str(%q) failed; encoding/json decoded %q", b, want)
		}
		if got != want {
			t.Fatalf("Str(%q) = %q, encoding/json = %q", b, got, want)
		}
	})
}

// FuzzParseObject checks that every object encoding/json accepts is accepted
// with the same member names, and that the scanner never panics.
func FuzzParseObject(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":{"b":[1,"]",{"c":"\"}"}]},"d":null}`, `{}`, `{"a":"x\\"}`, `{"a":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var keys []string
		err := ParseObject(b, func(k []byte, v Value) { keys = append(keys, string(k)) })
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) != nil {
			return
		}
		if err != nil {
			t.Fatalf("ParseObject(%q) = %v, encoding/json accepts it", b, err)
		}
		for _, k := range keys {
			if strings.Contains(k, `\`) || !utf8.ValidString(k) {
				return // names are passed raw (undecoded) by design
			}
			if _, ok := m[k]; !ok {
				t.Fatalf("ParseObject(%q) reported member %q that encoding/json did not", b, k)
			}
		}
		if len(m) > len(keys) {
			t.Fatalf("ParseObject(%q) reported %d members, encoding/json %d", b, len(keys), len(m))
		}
	})
}

func TestCursor(t *testing.T) {
	line := []byte(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"x\"]}","is_error":true},"plain",{"type":"text"}]},"n":[1,[2]],"tail":"t"}`)
	var c Cursor
	c.Reset(line)
	var typ, tail string
	var blocks []map[string]string
	c.Object(func(k []byte) {
		switch string(k) {
		case "type":
			typ = c.Value().Text()
		case "message":
			c.Object(func(k []byte) {
				if string(k) != "content" {
					return // left unconsumed: skipped by Object
				}
				c.Array(func() {
					if c.Peek() != '{' {
						return
					}
					b := map[string]string{}
					c.Object(func(k []byte) { b[string(k)] = string(c.Value()) })
					blocks = append(blocks, b)
				})
			})
		case "tail":
			tail = c.Value().Text()
		}
	})
	if err := c.Done(); err != nil {
		t.Fatal(err)
	}
	if typ != "user" || tail != "t" || len(blocks) != 2 || blocks[0]["content"] != `"x\"]}"` || blocks[0]["is_error"] != "true" || blocks[1]["type"] != `"text"` {
		t.Errorf("typ %q tail %q blocks %v", typ, tail, blocks)
	}

	for _, bad := range []string{`{"a":1`, `{"a":[1,2}`, `{"a" 1}`, `{"a":{"b":}}`, `{"a":1}x`, `[1]`, ``, `{"a":[1 2]}`} {
		c.Reset([]byte(bad))
		c.Object(func(k []byte) {
			if c.Peek() == '[' {
				c.Array(func() {})
			} else if c.Peek() == '{' {
				c.Object(func([]byte) {})
			}
		})
		if err := c.Done(); !errors.Is(err, ErrSyntax) {
			t.Errorf("Cursor accepted %q (err %v)", bad, err)
		}
	}
}

// FuzzCursor checks that the cursor, descending into every object and
// array, accepts every valid JSON object, accepts nothing ParseObject
// rejects (it checks more: ParseObject does not look inside the values it
// skips), and never panics.
func FuzzCursor(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":{"b":[1,"]",{"c":"\"}"}]},"d":null}`, `{}`, `{"a":[]}`, `{"a":[{},[]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Cursor
		c.Reset(b)
		var walk func()
		walk = func() {
			switch c.Peek() {
			case '{':
				c.Object(func([]byte) { walk() })
			case '[':
				c.Array(func() { walk() })
			default:
				c.Skip()
			}
		}
		if c.Peek() != '{' {
			return
		}
		walk()
		cerr := c.Done()
		perr := ParseObject(b, func([]byte, Value) {})
		if cerr == nil && perr != nil {
			t.Fatalf("%q: the cursor accepts what ParseObject rejects (%v)", b, perr)
		}
		if json.Valid(b) && cerr != nil {
			t.Fatalf("%q: valid JSON, cursor says %v", b, cerr)
		}
	})
}
