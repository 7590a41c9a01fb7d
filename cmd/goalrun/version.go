package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// version and commit are set at build time with
// -ldflags "-X main.version=v1.2.3 -X main.commit=<sha>" (the action image's
// Dockerfile does, since its build context holds no .git); otherwise they
// come from the build information the Go toolchain stamps into the binary
// (debug.ReadBuildInfo: the main module's version and the vcs.* settings).
var (
	version = ""
	commit  = ""
)

func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return describeVersion(version, commit, bi, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
}

// describeVersion is `goalrun version`'s line: the module version, the VCS
// commit (with its time, and "with local changes" when the tree was
// modified), the Go version and the platform, e.g.
//
//	goalrun v0.0.0-20261130023102-91447964f295 (commit 91447964f295bbd3e19309d11d18e63c801cad05 of 2026-11-30T02:31:02Z; go1.26.8 linux/amd64)
//
// ldVersion and ldCommit (the -X values) win over bi; bi may be nil. When
// no commit is known the line says why: `go run`, -buildvcs=false, or a
// build outside a git clone stamp none.
func describeVersion(ldVersion, ldCommit string, bi *debug.BuildInfo, goVersion, platform string) string {
	v, rev, at, modified := ldVersion, ldCommit, "", false
	if bi != nil {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if rev == "" {
					rev = s.Value
				}
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	var c strings.Builder
	switch {
	case rev == "":
		c.WriteString("commit unknown: built without version control information (go run, -buildvcs=false, or outside a git clone)")
	default:
		c.WriteString("commit " + rev)
		if at != "" && ldCommit == "" {
			c.WriteString(" of " + at)
		}
		if modified {
			c.WriteString(", with local changes")
		}
	}
	return fmt.Sprintf("goalrun %s (%s; %s %s)", v, c.String(), goVersion, platform)
}
