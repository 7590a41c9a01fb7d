// Package markdown reads the block structure of CommonMark text with
// github.com/yuin/goldmark's parser: which lines a reader of the rendered
// text sees as code or as a quotation rather than as the author's prose.
// It is the one fence rule of goalrun's claims analysis (grounding) and
// comment triggers (report/ghreport).
package markdown

import (
	"strings"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// blockParser parses blocks only: inline markup cannot change which lines
// are code or quoted (CommonMark 0.31.2, "Blocks and inlines",
// https://spec.commonmark.org/0.31.2/#blocks-and-inlines).
var blockParser = parser.NewParser(parser.WithBlockParsers(parser.DefaultBlockParsers()...))

// CodeOrQuoteLines reports, for each line of text (text split on "\n"),
// whether it belongs to a fenced code block (its fences included; one left
// open runs to the end of its container), an indented code block or a
// block quote (lazy continuation lines included). Blank lines that follow
// such a block are not part of it.
func CodeOrQuoteLines(src string) []bool {
	source := flattenDeepNesting([]byte(src))
	lineStart := []int{0} // byte offset of each line's start
	for i := 0; i < len(source); i++ {
		if source[i] == '\n' {
			lineStart = append(lineStart, i+1)
		}
	}
	lineOf := func(off int) int { // the line holding byte off
		lo, hi := 0, len(lineStart)-1
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if lineStart[mid] <= off {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return lo
	}
	lines := strings.Split(src, "\n")
	out := make([]bool, len(lines))
	doc := blockParser.Parse(text.NewReader(source))
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n.Kind() {
		case ast.KindFencedCodeBlock, ast.KindCodeBlock, ast.KindBlockquote:
		default:
			return ast.WalkContinue, nil
		}
		start := n.Pos()
		if start < 0 {
			return ast.WalkSkipChildren, nil
		}
		first := lineOf(start)
		last := len(lines) - 1 // up to the line before the next block
		if next := nextBlockPos(n); next >= 0 {
			last = lineOf(next) - 1
		}
		for last > first && strings.TrimSpace(lines[last]) == "" {
			last--
		}
		for i := first; i <= last; i++ {
			out[i] = true
		}
		return ast.WalkSkipChildren, nil
	})
	return out
}

// nextBlockPos returns the byte offset where the block after n (in
// document order, outside n) starts, or -1 at the end of the document.
func nextBlockPos(n ast.Node) int {
	for m := n; m != nil; m = m.Parent() {
		for s := m.NextSibling(); s != nil; s = s.NextSibling() {
			if p := firstPos(s); p >= 0 {
				return p
			}
		}
	}
	return -1
}

// firstPos returns the start of n or, when n has none, of its first
// descendant that has one; -1 when none has.
func firstPos(n ast.Node) int {
	if p := n.Pos(); p >= 0 {
		return p
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if p := firstPos(c); p >= 0 {
			return p
		}
	}
	return -1
}

// maxContainerPrefix bounds the run of container markers (block quote and
// list markers, the spaces between them) the parser is given at the start
// of a line, in bytes. goldmark's time grows with the square of a line's
// nesting: a 64 KiB line of ">" took 7 s and one of "- " 12 s; 64 KiB of
// lines nested to this bound take tens of milliseconds
// (BenchmarkCodeOrQuoteLines).
const maxContainerPrefix = 64

// flattenDeepNesting returns src (changed in place) with the part of any
// line's leading run of marker bytes past maxContainerPrefix turned into
// text ("x"), so that nesting that deep is read as a paragraph's words.
// Lengths and line breaks are kept: the byte offsets of the parse are
// those of src.
func flattenDeepNesting(src []byte) []byte {
	start := 0
	for i := 0; i <= len(src); i++ {
		if i < len(src) && src[i] != '\n' {
			continue
		}
		j := start
		for j < i && isContainerByte(src[j]) {
			j++
		}
		for k := start + maxContainerPrefix; k < j; k++ {
			src[k] = 'x'
		}
		start = i + 1
	}
	return src
}

// isContainerByte reports whether b can be part of the markers that open
// or continue a block quote or a list item (CommonMark 0.31.2, "Container
// blocks", https://spec.commonmark.org/0.31.2/#container-blocks).
func isContainerByte(b byte) bool {
	switch b {
	case ' ', '\t', '>', '-', '+', '*', '.', ')':
		return true
	}
	return '0' <= b && b <= '9'
}
