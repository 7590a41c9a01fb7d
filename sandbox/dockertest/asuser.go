package dockertest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes a test binary act as a helper instead of running its
// tests (HelperMain): "dial" connects to the Unix socket named by the last
// argument and sends a model API request through it, "kill" sends SIGKILL
// to the pid in the last argument. The helper prints what happened on one
// line.
const helperEnv = "GOALRUN_TEST_HELPER"

// HelperMain runs the helper and exits when the test binary was started as
// one by AsUser; call it first in TestMain.
func HelperMain() {
	what := os.Getenv(helperEnv)
	if what == "" {
		return
	}
	arg := os.Args[len(os.Args)-1]
	switch what {
	case "dial":
		c, err := net.DialTimeout("unix", arg, 5*time.Second)
		if err != nil {
			fmt.Println("refused:", err)
			os.Exit(0)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /v1/messages HTTP/1.1\r\nHost: api\r\nx-api-key: dummy\r\nConnection: close\r\n\r\n")
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil && line == "" {
			fmt.Println("no answer:", err)
			os.Exit(0)
		}
		fmt.Println("answered:", strings.TrimSpace(line))
	case "kill":
		pid, _ := strconv.Atoi(arg)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			fmt.Println("refused:", err)
		} else {
			fmt.Println("killed")
		}
	default:
		fmt.Println("unknown helper", what)
	}
	os.Exit(0)
}

// AsUser runs the test binary (whose TestMain calls HelperMain) as uid:gid
// — a host user other than the test's — doing what (see HelperMain) on arg,
// and returns its line. The binary is copied where that user can run it.
// It needs root: the test fails under GOALRUN_REQUIRE_DOCKER=1 without it,
// else skips.
func AsUser(t testing.TB, uid, gid int, what, arg string) string {
	t.Helper()
	if os.Getuid() != 0 {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("acting as another host user needs root (%s=1)", RequireEnv)
		}
		t.Skip("acting as another host user needs root")
	}
	bin := copyForAll(t)
	cmd := exec.Command(bin, arg)
	cmd.Env = []string{helperEnv + "=" + what}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper as uid %d: %v\n%s", uid, err, out)
	}
	return strings.TrimSpace(string(out))
}

// copyForAll copies the running test binary to a folder every user can
// read, removed when the test ends.
func copyForAll(t testing.TB) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "helper-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "helper")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}
