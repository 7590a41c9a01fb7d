package treecopy

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"regexp"
)

// TempPrefix starts the name of every file Apply writes before it is
// renamed into place.
const TempPrefix = ".goalrun-copy-"

// unknownOwner stands for an empty Options.Owner: a process on no host,
// so its temporary files are never taken for a dead local one's.
const unknownOwner = "0-0-unknown"

// TempName is a fresh temporary name next to name: TempPrefix, 12 random
// hex digits, then owner — "<pid>-<start time>-<host>", the writing
// process (TempOwner), so that what a killed copy left can be told from a
// live one's. An empty owner is written as "0-0-unknown".
func TempName(name, owner string) string {
	if owner == "" {
		owner = unknownOwner
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	return filepath.Join(filepath.Dir(name), TempPrefix+hex.EncodeToString(rnd[:])+"-"+owner)
}

// tempRe matches TempName's base names: pid, start time, host.
var tempRe = regexp.MustCompile(`^\.goalrun-copy-[0-9a-f]{12}-([0-9]+)-([0-9]+)-(.+)$`)

// IsTemp reports whether base is a name TempName makes (any process's,
// live or not).
func IsTemp(base string) bool { return tempRe.MatchString(base) }

// TempOwner returns the owner TempName wrote into base: its pid, start
// time and host, as written; ok is false when base is no such name.
func TempOwner(base string) (pid, start, host string, ok bool) {
	m := tempRe.FindStringSubmatch(base)
	if m == nil {
		return "", "", "", false
	}
	return m[1], m[2], m[3], true
}
