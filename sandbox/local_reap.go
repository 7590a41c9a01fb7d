package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of the sweep that ends what a local step left running.
const (
	// strayDeadline bounds one sweep: 5 s of rounds (SIGKILL is delivered
	// at once; only a process in uninterruptible sleep takes longer).
	strayDeadline = 5 * time.Second
	// strayPause is the pause between two rounds while something remains.
	strayPause = 10 * time.Millisecond
)

// ErrStrayProcess says a process a local step started could not be ended
// (it stayed alive through the sweep's deadline): the run cannot say the
// agent's code stopped running, so the step fails.
var ErrStrayProcess = errors.New("sandbox: local: a process the step started survived it")

// keptProcesses are goalrun's own children that a sweep never ends (the
// janitor a run starts on purpose), by pid.
var keptProcesses sync.Map

// KeepProcess marks pid, a child goalrun started on purpose and that must
// outlive the local sandbox's steps (the run's janitor), so that the sweep
// after each local step (see Local) leaves it alone.
func KeepProcess(pid int) { keptProcesses.Store(pid, true) }

// StartKeptProcess starts cmd and keeps it (KeepProcess) between two of a
// sweep's rounds, so that a process started while a local step runs is
// never seen by a sweep before it is kept.
func StartKeptProcess(cmd *exec.Cmd) error {
	stepsMu.Lock()
	defer stepsMu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	KeepProcess(cmd.Process.Pid)
	return nil
}

// becomeSubreaper makes this process a child subreaper (prctl
// PR_SET_CHILD_SUBREAPER, Linux 3.4+): a process a step starts whose parent
// exits — a setsid daemon, a double fork — is reparented to goalrun instead
// of init, so it stays goalrun's descendant and the sweep finds it.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: local: cannot make goalrun a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so processes the agent starts could outlive its steps: %w", err)
	}
	return nil
}

// liveSteps holds the session id of every local step running in this
// process, whichever Local started it: a sweep never ends what runs in a
// live step's session (that step's own sweep does, when it ends).
var liveSteps sync.Map

// stepsMu orders a step's start (and its entry in liveSteps) with a sweep's
// rounds, so that no sweep sees a step's leader before its session is live.
var stepsMu sync.Mutex

// procStat is what /proc/PID/stat says of a process that the sweep needs.
type procStat struct {
	ppid    int
	state   byte
	session int    // field 6, session
	start   uint64 // clock ticks after boot (field 22, starttime)
}

// readProcStat reads /proc/PID/stat (proc(5)); the command name may hold
// blanks and parentheses, so the fields are counted after its last ')'.
func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 { // state is field 3, starttime field 22
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	sid, err2 := strconv.Atoi(string(f[3]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || len(f[0]) != 1 {
		return procStat{}, false
	}
	return procStat{ppid: ppid, state: f[0][0], session: sid, start: start}, true
}

// processTable reads every process's stat from /proc.
func processTable() (map[int]procStat, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	table := make(map[int]procStat, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok {
			table[pid] = st
		}
	}
	return table, nil
}

// endStrays ends every process that descends from this one and was started
// at or after since (clock ticks after boot: the first step's start), except
// the kept ones (keep) and what descends from them: SIGKILL to each, again
// and again until none is left, reaping those reparented to this process
// (zombies). With goalrun a child subreaper, that is everything the steps
// started that outlived them, however it detached. It returns
// ErrStrayProcess naming what is left after strayDeadline.
//
// Spared too, with what descends from them: a child in goalrun's own
// session (goalrun's own code started it: every step runs in a session of
// its own, and setsid(2) and setpgid(2) give no way back into another
// session) and a child in the session of a step still running (liveSteps:
// another Local's step, as when tests run side by side in one process).
func endStrays(since uint64, keep func(pid int) bool) error {
	self := os.Getpid()
	ownSession, err := unix.Getsid(0)
	if err != nil {
		return fmt.Errorf("sandbox: local: reading goalrun's own session id to end what the step left running: %w", err)
	}
	spared := func(pid int, st procStat) bool {
		if keep(pid) || st.session == ownSession {
			return true
		}
		_, live := liveSteps.Load(st.session)
		return live
	}
	deadline := time.Now().Add(strayDeadline)
	for {
		victims, alive, err := sweepRound(self, since, spared)
		if err != nil {
			return fmt.Errorf("sandbox: local: reading /proc to end what the step left running: %w", err)
		}
		if len(victims) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %d process(es) still alive after %s (pids %v)", ErrStrayProcess, alive, strayDeadline, victims)
		}
		time.Sleep(strayPause)
	}
}

// sweepRound is one round of endStrays, under stepsMu: it reads the process
// table, sends SIGKILL to every live victim and reaps the dead ones that
// are this process's children. It returns the victims and how many of them
// were still alive.
func sweepRound(self int, since uint64, spared func(int, procStat) bool) (victims []int, alive int, err error) {
	stepsMu.Lock()
	defer stepsMu.Unlock()
	table, err := processTable()
	if err != nil {
		return nil, 0, err
	}
	children := map[int][]int{}
	for pid, st := range table {
		children[st.ppid] = append(children[st.ppid], pid)
	}
	var stack []int
	for _, c := range children[self] {
		if st := table[c]; st.start >= since && !spared(c, st) {
			stack = append(stack, c)
		}
	}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		victims = append(victims, p)
		stack = append(stack, children[p]...)
	}
	for _, p := range victims {
		st := table[p]
		if st.state != 'Z' && st.state != 'X' {
			alive++
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if st.ppid == self {
			// Reparented to goalrun (or left by a step): reap it once it
			// is dead, without waiting for it.
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(p, &ws, syscall.WNOHANG, nil)
		}
	}
	return victims, alive, nil
}

// stepStart is the start time (clock ticks after boot) of the process pid,
// which must be this process's child not yet reaped; the sweep ends what
// started at or after it. When it cannot be read, the time now (from
// /proc/uptime, in the kernel's USER_HZ of 100 ticks a second) stands in.
func stepStart(pid int) uint64 {
	if st, ok := readProcStat(pid); ok {
		return st.start
	}
	b, err := os.ReadFile("/proc/uptime")
	if err == nil {
		if f := bytes.Fields(b); len(f) > 0 {
			if up, err := strconv.ParseFloat(string(f[0]), 64); err == nil && up > 1 {
				return uint64(up*100) - 1
			}
		}
	}
	return ^uint64(0) // unknown: end nothing rather than goalrun's own children
}
