package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/goalrun/goalrun/internal/textcap"
)

const secret = "sk-ant-api03-Zx9QwErTy1234567890"

func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"no secrets", nil, "key " + secret, "key " + secret},
		{"replaced", []string{secret}, "key=" + secret + " done", "key=*** done"},
		{"every occurrence", []string{secret}, secret + secret + " " + secret, "****** ***"},
		{"empty and short secrets are ignored", []string{"", "a", "abc"}, "a abc b", "a abc b"},
		{"four bytes is enough", []string{"pa5s"}, "user pa5s", "user ***"},
		{"trimmed variant", []string{secret + "\n"}, "k=" + secret + ".", "k=***."},
		{"multi-line secret line by line", []string{"-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END KEY-----"}, "leaked MIIEvQIBADANBgkqhkiG9w0BAQEFAASC here", "leaked *** here"},
		{"longer secret wins an overlap", []string{"token-abcd", "token-abcdefgh"}, "x token-abcdefgh y token-abcd", "x *** y ***"},
		{"fragment at the start (a cut tail)", []string{secret}, secret[10:] + " rest of output", "*** rest of output"},
		{"fragment at the end (a cut head)", []string{secret}, "Authorization: " + secret[:12], "Authorization: ***"},
		{"short fragments stay", []string{secret}, "sk-ant begins many words", "sk-ant begins many words"},
		{"fragment before a Cap marker", []string{secret}, "key " + secret[:15] + "…[truncated: 19 of 100 bytes shown; 81 elided]…", "key ***…[truncated: 7 of 88 bytes shown; 81 elided]…"},
		{"marker numbers fixed after redaction", []string{secret}, secret + "…[truncated: 32 of 100 bytes shown; 68 elided]…", "***…[truncated: 3 of 71 bytes shown; 68 elided]…"},
		{"tail marker numbers fixed", []string{secret}, "…[truncated: 36 of 5000 bytes shown; 4964 elided]…end " + secret, "…[truncated: 7 of 4971 bytes shown; 4964 elided]…end ***"},
		{"digits of a marker are not a secret", []string{"1000"}, "x…[truncated: 1 of 1000 bytes shown; 999 elided]…", "x…[truncated: 1 of 1000 bytes shown; 999 elided]…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(tc.secrets...)
			if got := r.Redact(tc.in); got != tc.want {
				t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestRedactNil(t *testing.T) {
	var r *Redactor
	if got := r.Redact(secret); got != secret {
		t.Errorf("nil Redactor changed the text: %q", got)
	}
	r.Add("x") // no panic
	if r.Len() != 0 {
		t.Error("nil Redactor has secrets")
	}
}

// TestRedactBeforeCap: a secret that straddles the cut of a capped text is
// replaced whole, never left half-visible.
func TestRedactBeforeCap(t *testing.T) {
	r := New(secret)
	for cut := 0; cut < 80; cut++ {
		text := strings.Repeat("a", cut) + secret + strings.Repeat("b", 200)
		for _, n := range []int{cut + 1, cut + 5, cut + 20} {
			got := textcap.Cap(r.Redact(text), n)
			if strings.Contains(got, secret[:8]) {
				t.Fatalf("cut %d cap %d: part of the secret is visible: %q", cut, n, got)
			}
		}
	}
}

func TestRedactValue(t *testing.T) {
	r := New(secret)
	type custom struct {
		Token string `json:"token"`
		N     int    `json:"n"`
	}
	in := map[string]any{
		"s":      "x " + secret,
		"list":   []string{secret},
		"any":    []any{secret, 1, true, nil},
		"nested": map[string]any{"k": secret, secret: "key"},
		"strmap": map[string]string{"k": secret},
		"err":    errors.New("dial " + secret),
		"struct": custom{Token: secret, N: 3},
		"nan":    math.NaN(),
		"inf32":  float32(math.Inf(1)),
		"dur":    2 * time.Second,
		"time":   time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC),
		"chan":   make(chan int),
	}
	out := r.RedactValue(in)
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatalf("redacted value does not marshal: %v", err)
	}
	if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("Zx9QwErTy")) {
		t.Errorf("secret survived: %s", b)
	}
	m := out.(map[string]any)
	if m["nan"] != nil || m["inf32"] != nil || m["chan"] != nil {
		t.Errorf("non-JSON values kept: nan=%v inf=%v chan=%v", m["nan"], m["inf32"], m["chan"])
	}
	if m["dur"] != "2s" {
		t.Errorf("duration = %v, want its String", m["dur"])
	}
	if s, ok := m["struct"].(map[string]any); !ok || s["n"] != float64(3) || s["token"] != Redacted {
		t.Errorf("struct = %#v, want a JSON object with its token redacted", m["struct"])
	}
	if m["time"] != "2026-11-02T09:30:00Z" {
		t.Errorf("time = %v, want its JSON form", m["time"])
	}
}

func TestRedactorConcurrentAdd(t *testing.T) {
	r := New()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			r.Add(strings.Repeat("k", 4+i%50))
		}
	}()
	for i := 0; i < 200; i++ {
		_ = r.Redact("kkkkkkkk text")
	}
	<-done
	if got := r.Redact("kkkk"); got != Redacted {
		t.Errorf("Redact = %q", got)
	}
}
