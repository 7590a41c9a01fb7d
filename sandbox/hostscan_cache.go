package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/goalrun/goalrun/internal/safefile"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// scanCache remembers what scanHost found in the host folders together with
// the identity and change time (ctime) of every folder it read and every
// configuration file it opened, so that a later run whose folders did not
// change takes the answer after one lstat of each instead of reading them
// all again (docs/benchmarks.md, "The default sandbox's host folders").
//
// Every change the scan could see changes a ctime it recorded: an entry
// added, removed or renamed changes its folder's ctime; a file written
// changes its own; a file system mounted over a folder, or a folder
// replaced, changes the device or inode. No program can set a ctime back
// (utimes sets it to now, see stat(2)). An answer in which something
// changed less than scanRacyWindow before the scan began is not kept: a
// change in the same clock tick as the scan's own stat could leave the
// same ctime behind.
type scanCache struct {
	// dir holds the cache files (made 0700 when missing).
	dir string
	// now is the clock the racy window is measured on.
	now func() time.Time
	// early is the newest cache file, checked ahead (nil: none).
	early *HostScanAhead
}

// newScanCache returns a cache in dir, or nil (no cache) for "".
func newScanCache(dir string) *scanCache {
	if dir == "" {
		return nil
	}
	return &scanCache{dir: dir, now: time.Now}
}

// HostScanAhead is the host-folder scan's newest cache file, read and
// checked (one lstat of each path it recorded) in the background from the
// moment a run starts. HostTools takes its answer when its key is the one
// the run needs — at once, before the check ends: the start goes on
// (nothing is started in a container) while the check finishes, and the
// caller confirms it (HostToolchain.Confirm) before the sandbox is used.
type HostScanAhead struct {
	loaded chan struct{} // key and hits are read
	done   chan struct{} // ok is known
	key    string
	hits   []LeftOut
	ok     bool // the file was read and every path in it is unchanged
}

// CheckHostScanAhead starts checking the newest cache file in cacheDir
// (the one the last run used: loading touches it); nil for "".
func CheckHostScanAhead(cacheDir string) *HostScanAhead {
	if cacheDir == "" {
		return nil
	}
	a := &HostScanAhead{loaded: make(chan struct{}), done: make(chan struct{})}
	go func() {
		loaded := false
		defer func() {
			if !loaded {
				close(a.loaded)
			}
			close(a.done)
		}()
		c := newScanCache(cacheDir)
		ents, err := os.ReadDir(cacheDir)
		if err != nil {
			return
		}
		newest, at := "", time.Time{}
		for _, e := range ents {
			if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), "hostscan-") {
				continue
			}
			if fi, err := e.Info(); err == nil && fi.ModTime().After(at) {
				newest, at = filepath.Join(cacheDir, e.Name()), fi.ModTime()
			}
		}
		if newest == "" {
			return
		}
		key, hits, marks, err := c.loadFile(newest)
		if err != nil || newest != c.file(key) {
			return
		}
		a.key, a.hits = key, hits
		loaded = true
		close(a.loaded)
		// Two at a time: more would take the CPU the Engine needs for
		// its answers meanwhile.
		a.ok = marksUnchanged(marks, 2)
	}()
	return a
}

// answer returns the remembered answer for key once the file is read, and
// confirm, which waits for the check of its paths and reports whether
// they are all unchanged; ok is false when the file is not key's.
func (a *HostScanAhead) answer(key string) (hits []LeftOut, confirm func(context.Context) bool, ok bool) {
	if a == nil {
		return nil, nil, false
	}
	<-a.loaded
	if a.key != key {
		return nil, nil, false
	}
	return a.hits, func(ctx context.Context) bool {
		select {
		case <-a.done:
			return a.ok
		case <-ctx.Done():
			return false
		}
	}, true
}

const (
	// scanCacheMagic begins a cache file; its number changes with the
	// file's layout.
	scanCacheMagic = "goalrun-hostscan 1\n"
	// scanRacyWindow: a ctime this close to the scan's start makes the
	// answer not kept. Linux stamps ctimes from a clock that advances a
	// tick (1–10 ms) at a time; two seconds also cover a clock that is
	// set back a little meanwhile.
	scanRacyWindow = 2 * time.Second
	// scanCacheMaxAge: cache files of other keys (another workspace in a
	// scanned folder, an older goalrun) not used for this long are removed
	// when a new one is written.
	scanCacheMaxAge = 7 * 24 * time.Hour
	// scanCacheMax bounds what is read of a cache file.
	scanCacheMax = 256 << 20
)

// statMark is what the cache compares of one path: the file's identity,
// its change time in nanoseconds, its size and its type bits.
type statMark struct {
	Path  string
	Dev   uint64
	Ino   uint64
	Ctime int64
	Size  int64
	Mode  uint32
}

// scanKey names what a scan's answer depends on besides the folders'
// content: this goalrun executable (its rules), the user it runs as (what
// it can read), the roots as their links resolve, and the folders it
// skips or goes into although left out, where they lie in the roots. ok is
// false when the executable cannot be identified (no cache then).
func scanKey(roots []string, skip map[string]bool, allow []string) (key string, ok bool) {
	exe, err := os.Executable()
	if err != nil {
		return "", false
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return "", false
	}
	m, ok := statMarkOf(exe, fi)
	if !ok {
		return "", false
	}
	in := func(p string) bool {
		return slices.ContainsFunc(roots, func(r string) bool { return p == r || isUnder(p, r) })
	}
	var sk, al []string
	for p, on := range skip {
		if on && in(p) {
			sk = append(sk, p)
		}
	}
	for _, p := range allow {
		if in(p) {
			al = append(al, p)
		}
	}
	slices.Sort(sk)
	slices.Sort(al)
	b, err := json.Marshal(struct {
		Magic    string
		Exe      statMark
		ExeMtime int64
		UID, GID int
		Roots    []string
		Skip     []string
		Allow    []string
	}{scanCacheMagic, m, fi.ModTime().UnixNano(), os.Geteuid(), os.Getegid(), roots, sk, slices.Compact(al)})
	if err != nil {
		return "", false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), true
}

// file is the cache file of key.
func (c *scanCache) file(key string) string {
	return filepath.Join(c.dir, "hostscan-"+key[:32]+".bin")
}

// scan returns scanHost's answer for roots, skip and allow: the remembered
// one when every path it recorded is unchanged, else a fresh scan, kept
// for the next run when nothing changed just before it. cached says which.
// confirm is not nil when the answer is the one checked ahead (c.early)
// and its check may not be over: it reports whether the paths held.
func (c *scanCache) scan(roots []string, skip map[string]bool, allow []string) (hits []LeftOut, cached bool, confirm func(context.Context) bool) {
	if c == nil {
		hits, _, _ = scanHostMarked(roots, skip, allow, false)
		return hits, false, nil
	}
	key, keyed := scanKey(walkRoots(roots), skip, allow)
	if keyed {
		if hits, confirm, ok := c.early.answer(key); ok {
			return hits, true, confirm
		}
		if hits, marks, err := c.load(key); err == nil && marksUnchanged(marks, hostScanConcurrency) {
			return hits, true, nil
		}
	}
	start := c.now()
	hits, marks, complete := scanHostMarked(roots, skip, allow, true)
	if keyed && complete && !racy(marks, start) {
		_ = c.save(key, hits, marks) // a cache that cannot be written only costs the next run a scan
	}
	return hits, false, nil
}

// racy reports whether a mark changed less than scanRacyWindow before
// start (or after it).
func racy(marks []statMark, start time.Time) bool {
	limit := start.Add(-scanRacyWindow).UnixNano()
	return slices.ContainsFunc(marks, func(m statMark) bool { return m.Ctime > limit })
}

// marksUnchanged lstats every mark's path (workers at once) and reports
// whether all are as recorded.
func marksUnchanged(marks []statMark, workers int) bool {
	var changed atomic.Bool
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(marks) && !changed.Load(); i += workers {
				if now, ok := lstatMark(marks[i].Path); !ok || now != marks[i] {
					changed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return !changed.Load()
}

// The cache file: scanCacheMagic, the key and a newline, the hits as JSON
// after their length (uvarint), the number of marks (uvarint), then each
// mark: its path's length and bytes, device, inode, ctime, size and type
// (varints).

// save writes the answer for key (atomically, 0600) and removes cache
// files of other keys unused for scanCacheMaxAge.
func (c *scanCache) save(key string, hits []LeftOut, marks []statMark) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString(scanCacheMagic + key + "\n")
	hj, err := json.Marshal(hits)
	if err != nil {
		return err
	}
	b.Write(binary.AppendUvarint(nil, uint64(len(hj))))
	b.Write(hj)
	buf := binary.AppendUvarint(nil, uint64(len(marks)))
	for _, m := range marks {
		buf = binary.AppendUvarint(buf, uint64(len(m.Path)))
		buf = append(buf, m.Path...)
		buf = binary.AppendUvarint(buf, m.Dev)
		buf = binary.AppendUvarint(buf, m.Ino)
		buf = binary.AppendVarint(buf, m.Ctime)
		buf = binary.AppendVarint(buf, m.Size)
		buf = binary.AppendUvarint(buf, uint64(m.Mode))
	}
	b.Write(buf)
	f, err := os.CreateTemp(c.dir, ".hostscan-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), c.file(key)); err != nil {
		return err
	}
	c.prune(c.file(key))
	return nil
}

// prune removes the cache files other than keep that were not used for
// scanCacheMaxAge (load touches the file it uses).
func (c *scanCache) prune(keep string) {
	ents, _ := os.ReadDir(c.dir)
	for _, e := range ents {
		p := filepath.Join(c.dir, e.Name())
		if p == keep || !strings.HasPrefix(e.Name(), "hostscan-") && !strings.HasPrefix(e.Name(), ".hostscan-") {
			continue
		}
		if fi, err := e.Info(); err == nil && c.now().Sub(fi.ModTime()) > scanCacheMaxAge {
			os.Remove(p)
		}
	}
}

// errScanCache is a cache file that is not one, or not for this key.
var errScanCache = errors.New("not a host scan cache file for this key")

// load reads the answer kept for key.
func (c *scanCache) load(key string) ([]LeftOut, []statMark, error) {
	k, hits, marks, err := c.loadFile(c.file(key))
	if err == nil && k != key {
		return nil, nil, errScanCache
	}
	return hits, marks, err
}

// loadFile reads the cache file p: its key and answer. The file is read
// whole and its paths are parts of one string (a few allocations for tens
// of thousands of marks: this runs at every start).
func (c *scanCache) loadFile(p string) (key string, hits []LeftOut, marks []statMark, err error) {
	b, err := safefile.ReadOwn(p, scanCacheMax)
	if err != nil {
		return "", nil, nil, err
	}
	data := string(b)
	rest, ok := strings.CutPrefix(data, scanCacheMagic)
	if !ok {
		return "", nil, nil, errScanCache
	}
	key, rest, ok = strings.Cut(rest, "\n")
	if !ok || len(key) < 32 || len(key) > 1024 {
		return "", nil, nil, errScanCache
	}
	hits, marks, err = readScanAnswer(rest)
	if err != nil {
		return "", nil, nil, err
	}
	now := c.now()
	_ = os.Chtimes(p, now, now) // in use: prune keeps it
	return key, hits, marks, nil
}

// readScanAnswer reads a cache file's hits and marks, after its key, to
// its end (see save).
func readScanAnswer(s string) ([]LeftOut, []statMark, error) {
	b := []byte(s) // read-only view for encoding/binary; paths stay parts of s
	i := 0
	uvarint := func() (uint64, bool) {
		x, n := binary.Uvarint(b[i:])
		if n <= 0 {
			return 0, false
		}
		i += n
		return x, true
	}
	varint := func() (int64, bool) {
		x, n := binary.Varint(b[i:])
		if n <= 0 {
			return 0, false
		}
		i += n
		return x, true
	}
	n, ok := uvarint()
	if !ok || n > uint64(len(s)-i) {
		return nil, nil, errScanCache
	}
	var hits []LeftOut
	if err := json.Unmarshal([]byte(s[i:i+int(n)]), &hits); err != nil {
		return nil, nil, errScanCache
	}
	i += int(n)
	count, ok := uvarint()
	if !ok || count > uint64(len(s)-i)/6 { // a mark takes 6 bytes at least
		return nil, nil, errScanCache
	}
	marks := make([]statMark, count)
	for k := range marks {
		m := &marks[k]
		l, ok := uvarint()
		if !ok || l > 1<<16 || l > uint64(len(s)-i) {
			return nil, nil, errScanCache
		}
		m.Path = s[i : i+int(l)]
		i += int(l)
		var okDev, okIno, okCtime, okSize, okMode bool
		m.Dev, okDev = uvarint()
		m.Ino, okIno = uvarint()
		m.Ctime, okCtime = varint()
		m.Size, okSize = varint()
		mode, okMode := uvarint()
		if !okDev || !okIno || !okCtime || !okSize || !okMode || mode > 0xffffffff {
			return nil, nil, errScanCache
		}
		m.Mode = uint32(mode)
	}
	if i != len(s) {
		return nil, nil, fmt.Errorf("%w: trailing bytes", errScanCache)
	}
	return hits, marks, nil
}
