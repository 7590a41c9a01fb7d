package main

import (
	"strings"

	"github.com/goalrun/goalrun/report"
)

// inputWords rewrites `goalrun run`'s flag names in text written for a
// `goalrun run` user into what an action user sets: "--max-tokens" becomes
// "input max-tokens" (the action's input for that flag), a flag the action
// has no input for but a config file may set becomes "max-turns (a config
// file setting)", and any other text is left alone — also everything inside
// double quotes or backticks (a command or value the user wrote, which may
// hold its own flags).
func inputWords(text string) string {
	if !strings.Contains(text, "--") {
		return text
	}
	inputs := map[string]string{}
	for _, in := range actionInputs {
		if in.flag != "" {
			inputs[in.flag] = in.name
		}
	}
	keys := map[string]bool{}
	for _, f := range settingTable {
		keys[f.name] = true
	}
	var b strings.Builder
	quote := byte(0) // the open quote, 0 outside quotes
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '`':
			quote = c
		case c == '-' && strings.HasPrefix(text[i:], "--") && (i == 0 || !flagByte(text[i-1])):
			j := i + 2
			for j < len(text) && flagByte(text[j]) {
				j++
			}
			name := strings.TrimRight(text[i+2:j], "-")
			j = i + 2 + len(name)
			if in, ok := inputs[name]; ok {
				b.WriteString("input " + in)
				i = j
				continue
			}
			if keys[name] {
				b.WriteString(name + " (a config file setting)")
				i = j
				continue
			}
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

// flagByte says c may be part of a flag's name.
func flagByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// actionWords is the action's rewording of a finished document: its
// message, suggestions and halt reason name the action's inputs instead of
// `goalrun run`'s flags (inputWords), so the annotation, the check run, the
// comment, the job summary and the document file all say what to change in
// the workflow.
func actionWords(doc report.Document) report.Document {
	doc.Message = inputWords(doc.Message)
	if doc.Suggestions != nil {
		s := make([]string, len(doc.Suggestions))
		for i, v := range doc.Suggestions {
			s[i] = inputWords(v)
		}
		doc.Suggestions = s
	}
	if doc.Goal != nil && doc.Goal.HaltReason != "" {
		g := *doc.Goal
		g.HaltReason = inputWords(g.HaltReason)
		doc.Goal = &g
	}
	return doc
}
