package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// MarshalJSON writes the failure flat: "cause" first, then the
// cause-specific fields in key order. A field whose value cannot be encoded
// as JSON is left out rather than failing the document.
func (f Failure) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"cause":`)
	if err := writeJSON(&b, f.Cause); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(f.Detail))
	for k := range f.Detail {
		if k != "cause" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		var v bytes.Buffer
		if err := writeJSON(&v, f.Detail[k]); err != nil {
			continue
		}
		b.WriteByte(',')
		if err := writeJSON(&b, k); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		b.Write(v.Bytes())
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the flat form MarshalJSON writes: "cause" into Cause,
// every other key into Detail (numbers as float64).
func (f *Failure) UnmarshalJSON(data []byte) error {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("report: failure block: %w", err)
	}
	cause, ok := m["cause"].(string)
	if !ok {
		return fmt.Errorf("report: failure block: \"cause\" must be a string, got %T", m["cause"])
	}
	delete(m, "cause")
	f.Cause = cause
	f.Detail = nil
	if len(m) > 0 {
		f.Detail = m
	}
	return nil
}

// writeJSON appends the compact JSON of v to b without HTML escaping and
// without the encoder's trailing newline.
func writeJSON(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	n := b.Len()
	if err := enc.Encode(v); err != nil {
		b.Truncate(n)
		return err
	}
	b.Truncate(b.Len() - 1) // the newline Encode adds
	return nil
}
