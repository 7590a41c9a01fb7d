// Package reporttest helps tests that produce goalrun/1 documents: Validate
// and ValidateJSON check a document against the contract (size, UTF-8,
// JSON Schema). It imports no other package of goalrun's but docs, so
// report's own tests use it too, and it keeps the JSON Schema library out
// of the goalrun binary.
package reporttest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/goalrun/goalrun/docs"
)

// DocumentBytes is the bound on a whole encoded document: 32768 bytes,
// report.DocumentBytes (README.md, "Limits"); a test of this package checks
// that the two agree.
const DocumentBytes = 32768

// Validate fails t unless doc is a valid goalrun/1 document: at most
// DocumentBytes bytes, valid UTF-8, one JSON value that matches
// docs/goalrun-1.schema.json (see ValidateJSON). On failure it logs
// the start of the document to help find the broken field.
func Validate(t testing.TB, doc []byte) {
	t.Helper()
	if err := ValidateJSON(doc); err != nil {
		const show = 2048
		shown := doc
		if len(shown) > show {
			shown = shown[:show]
		}
		t.Fatalf("invalid goalrun/1 document: %v\ndocument (%d bytes, first %d shown):\n%s", err, len(doc), len(shown), shown)
	}
}

var (
	schemaOnce sync.Once
	schemaC    *jsonschema.Schema
	schemaErr  error
)

// compiledSchema compiles docs.GoalrunSchema once.
func compiledSchema() (*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(docs.GoalrunSchema))
		if err != nil {
			schemaErr = fmt.Errorf("reporttest: parsing docs/%s: %w", docs.GoalrunSchemaFile, err)
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource(docs.GoalrunSchemaFile, doc); err != nil {
			schemaErr = fmt.Errorf("reporttest: loading docs/%s: %w", docs.GoalrunSchemaFile, err)
			return
		}
		schemaC, schemaErr = c.Compile(docs.GoalrunSchemaFile)
		if schemaErr != nil {
			schemaErr = fmt.Errorf("reporttest: compiling docs/%s: %w", docs.GoalrunSchemaFile, schemaErr)
		}
	})
	return schemaC, schemaErr
}

// ValidateJSON checks that b is one goalrun/1 document as report.Encode
// writes it: at most DocumentBytes bytes, valid UTF-8, one JSON value (no
// trailing data), and valid against docs/goalrun-1.schema.json (which of the three
// shapes it is follows from "status"). The error says which rule failed and
// where (the schema validator's instance and keyword locations).
func ValidateJSON(b []byte) error {
	if len(b) > DocumentBytes {
		return fmt.Errorf("reporttest: document is %d bytes, over the %d-byte bound", len(b), DocumentBytes)
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("reporttest: document is not valid UTF-8")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("reporttest: document is not one JSON value: %w", err)
	}
	sch, err := compiledSchema()
	if err != nil {
		return err
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("reporttest: document does not match docs/%s: %w", docs.GoalrunSchemaFile, err)
	}
	return nil
}
