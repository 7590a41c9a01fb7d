package githubtest

import (
	"fmt"
	"strings"
)

// ParseFileCommand parses a GITHUB_OUTPUT (or GITHUB_ENV, GITHUB_STATE)
// file the way the Actions runner does: each entry is either "name=value"
// on one line, or "name<<DELIMITER", the value's lines, and a line that is
// exactly DELIMITER. Lines are split on "\n" with a trailing "\r" removed.
// It returns the entries in file order (a name set twice keeps both; the
// runner's last one wins) and an error for a heredoc without its closing
// delimiter or a line that is neither form — errors the runner fails the
// step on.
func ParseFileCommand(data string) ([][2]string, error) {
	var out [][2]string
	lines := strings.Split(data, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSuffix(lines[i], "\r")
		if line == "" {
			continue
		}
		eq := strings.Index(line, "=")
		hd := strings.Index(line, "<<")
		switch {
		case hd > 0 && (eq < 0 || hd < eq):
			name, delim := line[:hd], line[hd+2:]
			if delim == "" {
				return nil, fmt.Errorf("line %d: empty delimiter for %q", i+1, name)
			}
			var val []string
			closed := false
			for i++; i < len(lines); i++ {
				l := strings.TrimSuffix(lines[i], "\r")
				if l == delim {
					closed = true
					break
				}
				val = append(val, l)
			}
			if !closed {
				return nil, fmt.Errorf("matching delimiter not found %q", delim)
			}
			out = append(out, [2]string{name, strings.Join(val, "\n")})
		case eq > 0:
			out = append(out, [2]string{line[:eq], line[eq+1:]})
		default:
			return nil, fmt.Errorf("line %d: invalid format %q", i+1, line)
		}
	}
	return out, nil
}
