// Package reporttest helps tests that produce goalrun/1 documents: Validate
// checks a document against the contract (size, UTF-8, JSON Schema).
package reporttest

import (
	"testing"

	"github.com/goalrun/goalrun/report"
)

// Validate fails t unless doc is a valid goalrun/1 document: at most
// report.DocumentBytes bytes, valid UTF-8, one JSON value that matches
// docs/goalrun-1.schema.json (see report.ValidateJSON). On failure it logs
// the start of the document to help find the broken field.
func Validate(t testing.TB, doc []byte) {
	t.Helper()
	if err := report.ValidateJSON(doc); err != nil {
		const show = 2048
		shown := doc
		if len(shown) > show {
			shown = shown[:show]
		}
		t.Fatalf("invalid goalrun/1 document: %v\ndocument (%d bytes, first %d shown):\n%s", err, len(doc), len(shown), shown)
	}
}
