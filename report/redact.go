package report

import "github.com/goalrun/goalrun/internal/redact"

// Redaction is internal/redact's; these names keep it where the document's
// users find it.

// Redacted replaces every secret value: "***".
const Redacted = redact.Redacted

// MinSecretBytes is the shortest secret a Redactor replaces: 4 bytes (see
// internal/redact).
const MinSecretBytes = redact.MinSecretBytes

// MinFragmentBytes is the shortest piece of a secret Redact replaces at the
// very start or end of a text: 8 bytes (see internal/redact).
const MinFragmentBytes = redact.MinFragmentBytes

// Redactor replaces secret values with Redacted; a nil *Redactor redacts
// nothing. It is internal/redact's Redactor.
type Redactor = redact.Redactor

// NewRedactor returns a Redactor for secrets (internal/redact's New).
func NewRedactor(secrets ...string) *Redactor { return redact.New(secrets...) }
