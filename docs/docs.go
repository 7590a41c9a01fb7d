// Package docs embeds the project's machine-readable documents: the JSON
// Schema of the goalrun/1 run document (draft 2020-12).
package docs

import _ "embed"

// GoalrunSchemaFile is the schema's file name, also the last segment of its
// $id.
const GoalrunSchemaFile = "goalrun-1.schema.json"

// GoalrunSchema is the JSON Schema of goalrun/1 (goalrun-1.schema.json):
// the result, failure and startup-error shapes, one of which every document
// matches. Treat it as read-only.
//
//go:embed goalrun-1.schema.json
var GoalrunSchema []byte
