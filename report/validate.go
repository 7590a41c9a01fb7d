package report

import (
	"bytes"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/goalrun/goalrun/docs"
)

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
			schemaErr = fmt.Errorf("report: parsing docs/%s: %w", docs.GoalrunSchemaFile, err)
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource(docs.GoalrunSchemaFile, doc); err != nil {
			schemaErr = fmt.Errorf("report: loading docs/%s: %w", docs.GoalrunSchemaFile, err)
			return
		}
		schemaC, schemaErr = c.Compile(docs.GoalrunSchemaFile)
		if schemaErr != nil {
			schemaErr = fmt.Errorf("report: compiling docs/%s: %w", docs.GoalrunSchemaFile, schemaErr)
		}
	})
	return schemaC, schemaErr
}

// ValidateJSON checks that b is one goalrun/1 document as Encode writes it:
// at most DocumentBytes bytes, valid UTF-8, one JSON value (no trailing
// data), and valid against docs/goalrun-1.schema.json (which of the three
// shapes it is follows from "status"). The error says which rule failed and
// where (the schema validator's instance and keyword locations).
func ValidateJSON(b []byte) error {
	if len(b) > DocumentBytes {
		return fmt.Errorf("report: document is %d bytes, over the %d-byte bound", len(b), DocumentBytes)
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("report: document is not valid UTF-8")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("report: document is not one JSON value: %w", err)
	}
	sch, err := compiledSchema()
	if err != nil {
		return err
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("report: document does not match docs/%s: %w", docs.GoalrunSchemaFile, err)
	}
	return nil
}
