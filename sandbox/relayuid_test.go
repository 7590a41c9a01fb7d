package sandbox

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestPickRelayUID: the relay's uid is never one in use or excluded; with
// one id left it is that one, with none an error says so.
func TestPickRelayUID(t *testing.T) {
	all := map[int]bool{}
	for id := relayUIDFirst; id <= relayUIDLast; id++ {
		all[id] = true
	}
	allBut := func(free int) map[int]bool {
		m := map[int]bool{}
		for id := range all {
			if id != free {
				m[id] = true
			}
		}
		return m
	}
	for _, tc := range []struct {
		name          string
		used, exclude map[int]bool
		want          int // 0: any free id; -1: an error
	}{
		{"nothing in use", nil, nil, 0},
		{"one id left", allBut(60600), nil, 60600},
		{"the last id excluded", allBut(60600), map[int]bool{60600: true}, -1},
		{"all in use", all, nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 {
				got, err := pickRelayUID(tc.used, tc.exclude)
				switch {
				case tc.want == -1:
					if err == nil {
						t.Fatalf("picked %d, want an error", got)
					}
					return
				case err != nil:
					t.Fatal(err)
				case tc.want != 0 && got != tc.want, got < relayUIDFirst || got > relayUIDLast, tc.used[got], tc.exclude[got]:
					t.Fatalf("picked %d", got)
				}
			}
		})
	}
}

// TestRelayIDsInUse: a process running as an id in the relay range (real
// uid, or only its group) makes that id used.
func TestRelayIDsInUse(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test starts processes as other users: run it as root (CI does)")
	}
	for _, tc := range []struct {
		name     string
		uid, gid uint32
		want     int
	}{
		{"uid", 60601, 0, 60601},
		{"gid", 0, 60602, 60602},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "30")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tc.uid, Gid: tc.gid}}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			time.Sleep(50 * time.Millisecond) // past exec: status shows the new ids
			if used := relayIDsInUse(); !used[tc.want] {
				t.Errorf("id %d of a running process is not in use: %v", tc.want, used)
			}
		})
	}
}
