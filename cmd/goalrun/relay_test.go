package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goalrun/goalrun/sandbox/egress"
)

func TestRelayCmd(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "help", args: []string{"--help"}, wantCode: exitMet, wantStdout: "usage: goalrun __relay"},
		{name: "no equals sign", args: []string{"127.0.0.1:3128"}, wantCode: exitBadInput, wantStderr: `relay mapping "127.0.0.1:3128": want LISTEN=SOCKET`},
		{name: "not loopback", args: []string{"0.0.0.0:3128=/goalrun/egress/proxy.sock"}, wantCode: exitBadInput, wantStderr: "is not loopback"},
		{name: "host name", args: []string{"localhost:3128=/goalrun/egress/proxy.sock"}, wantCode: exitBadInput, wantStderr: "loopback IP literal"},
		{name: "relative socket", args: []string{"127.0.0.1:3128=proxy.sock"}, wantCode: exitBadInput, wantStderr: "must be an absolute path"},
		{name: "bad second mapping", args: []string{"127.0.0.1:3128=/a.sock", "127.0.0.1:x=/b.sock"}, wantCode: exitBadInput, wantStderr: `relay mapping "127.0.0.1:x=/b.sock"`},
		{name: "port in use", args: []string{busy.Addr().String() + "=/goalrun/egress/proxy.sock"}, wantCode: exitRunFailed, wantStderr: "address already in use"},
		{name: "no mappings, already signalled", args: nil, wantCode: exitMet, wantStdout: "goalrun relay: ready\n"},
		{name: "a mapping, already signalled", args: []string{"127.0.0.1:0=/x.sock"}, wantCode: exitBadInput, wantStderr: "listen port must be 1..65535"},
		{name: "lifetime", args: []string{"--lifetime", "40m"}, wantCode: exitMet, wantStdout: "goalrun relay: ready\n"},
		{name: "lifetime with equals", args: []string{"--lifetime=1h"}, wantCode: exitMet, wantStdout: "goalrun relay: ready\n"},
		{name: "lifetime without value", args: []string{"--lifetime"}, wantCode: exitBadInput, wantStderr: "--lifetime needs a duration"},
		{name: "lifetime not a duration", args: []string{"--lifetime", "soon"}, wantCode: exitBadInput, wantStderr: `--lifetime "soon": want a positive duration`},
		{name: "lifetime zero", args: []string{"--lifetime=0s"}, wantCode: exitBadInput, wantStderr: "want a positive duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // as if SIGTERM had arrived: a relay that starts returns at once
			var stdout, stderr bytes.Buffer
			code := run(ctx, append([]string{relayCommand}, tt.args...), func(string) (string, bool) { return "", false }, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.wantStdout)
			}
			if tt.wantCode != exitMet && strings.Contains(stdout.String(), "ready") {
				t.Errorf("a failed relay said it was ready: %q", stdout.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// TestRelayStaticBinary builds goalrun as CI and the sandbox image do
// (CGO_ENABLED=0), checks that it needs no dynamic loader or shared library
// (so it runs in a container with nothing but a kernel), then runs
// `goalrun __relay`, carries a connection to a Unix socket through it and
// stops it with SIGTERM, which must exit 0.
func TestRelayStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the goalrun binary; skipped with -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the relay runs inside Linux containers; GOOS is " + runtime.GOOS)
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	dir, err := os.MkdirTemp("", "relay")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "goalrun")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader (PT_INTERP): it would not start in an empty container")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %q", libs)
	}
	f.Close()

	// A Unix-socket echo stands in for goalrun's proxy.
	sock := filepath.Join(dir, "proxy.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	go func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := tl.Addr().String()
	tl.Close()

	var stderr bytes.Buffer
	cmd := exec.Command(bin, relayCommand, addr+"="+sock)
	cmd.Stderr = &stderr
	cmd.Env = []string{} // the relay needs no environment
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The ready line comes once the listener is bound: connecting right
	// after it must work without retries.
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != egress.RelayReadyLine+"\n" {
		t.Fatalf("relay stdout %q, %v; want the ready line (stderr %q)", line, err, stderr.String())
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("the relay said ready but does not listen on %s: %v", addr, err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "through the relay")
	buf := make([]byte, len("through the relay"))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "through the relay" {
		t.Fatalf("echo %q, %v", buf, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			t.Fatalf("relay exited with %v after SIGTERM, want 0 (stderr %q)", err, stderr.String())
		}
	case <-time.After(20 * time.Second): // liveness guard
		t.Fatal("relay did not exit after SIGTERM")
	}
	if _, err := c.Read(buf); err == nil {
		t.Error("relayed connection still open after the relay exited")
	}
	c.Close()
}

// A relay whose goalrun is gone (killed outright, no SIGTERM ever comes)
// ends by itself when its lifetime has passed.
func TestRelayLifetimeEnds(t *testing.T) {
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{relayCommand, "--lifetime", "300ms"}, func(string) (string, bool) { return "", false }, &stdout, &stderr)
	}()
	select {
	case code := <-done:
		if code != exitMet {
			t.Errorf("exit %d, want %d; stderr: %s", code, exitMet, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the relay outlived its lifetime")
	}
}
