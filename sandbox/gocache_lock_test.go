package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLockWarmingWaits: a second warming of the same cache waits while the
// first holds the lock, gives up when its context ends, and takes the lock
// once the first lets go.
func TestLockWarmingWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "go-build-x.lock")
	unlock, err := lockWarming(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if u, err := lockWarming(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
		if u != nil {
			u()
		}
		t.Fatalf("second lock while the first is held: %v, want the context's end", err)
	}
	unlock()
	u, err := lockWarming(t.Context(), path)
	if err != nil {
		t.Fatalf("lock after the first let go: %v", err)
	}
	u()
}

// TestCommandEndsItsChildren: a cancelled toolchain command ends with what
// it started (the go command's compilers), not only its own process.
func TestCommandEndsItsChildren(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := command(ctx, "/bin/sh", "", nil, "-c", `sleep 60 & echo $! > `+pidFile+`; wait`)
		done <- err
	}()
	var pid int
	for i := 0; pid == 0; i++ {
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if i > 1200 {
			t.Fatal("the command never started its child")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled command reported success")
	}
	for i := 0; ; i++ {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(b), ") Z ") {
			break // gone, or a zombie waiting for init
		}
		if i > 100 {
			t.Fatalf("the command's child (pid %d) outlived its cancellation", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
