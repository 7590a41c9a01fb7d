package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goalrun/goalrun/internal/safefile"
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
		sf, err := c.openFile(newest)
		if err != nil {
			return
		}
		defer sf.f.Close()
		if newest != c.file(sf.key) {
			return
		}
		a.key, a.hits = sf.key, sf.hits
		loaded = true
		close(a.loaded)
		// Two at a time: more would take the CPU the Engine needs for
		// its answers meanwhile.
		a.ok = sf.unchanged(2)
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
		if sf, err := c.openFile(c.file(key)); err == nil {
			ok := sf.key == key && sf.unchanged(hostScanConcurrency)
			sf.f.Close()
			if ok {
				return sf.hits, true, nil
			}
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

// scanFile is a cache file, open: its key and hits are read, and its marks
// are checked from the same open file (unchanged). The caller closes f.
type scanFile struct {
	f       *os.File
	size    int64 // bytes, when opened
	key     string
	hits    []LeftOut
	marksAt int64  // where the first mark begins
	count   uint64 // how many marks follow
}

// scanFileBuffer is the read buffer of a cache file's reader, in bytes:
// the file (a megabyte and more) is never held whole, which costs a fresh
// process as much as reading it (docs/benchmarks.md).
const scanFileBuffer = 32 << 10

// openFile opens the cache file p (this user's regular file only,
// safefile.OpenOwn) and reads its key and hits; the marks are read by
// unchanged. Opening a file marks it in use (prune keeps it).
func (c *scanCache) openFile(p string) (*scanFile, error) {
	f, size, err := safefile.OpenOwn(p, scanCacheMax)
	if err != nil {
		return nil, err
	}
	sf, err := readScanHead(f, size)
	if err != nil {
		f.Close()
		return nil, err
	}
	now := c.now()
	_ = os.Chtimes(p, now, now)
	return sf, nil
}

// readScanHead reads f's magic, key, hits and mark count (see save).
func readScanHead(f *os.File, size int64) (*scanFile, error) {
	sr := io.NewSectionReader(f, 0, size)
	br := bufio.NewReaderSize(sr, scanFileBuffer)
	magic := make([]byte, len(scanCacheMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != scanCacheMagic {
		return nil, errScanCache
	}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, errScanCache
	}
	key := string(line[:len(line)-1])
	if len(key) < 32 || len(key) > 1024 {
		return nil, errScanCache
	}
	n, err := binary.ReadUvarint(br)
	if err != nil || n > uint64(size) {
		return nil, errScanCache
	}
	hj := make([]byte, n)
	if _, err := io.ReadFull(br, hj); err != nil {
		return nil, errScanCache
	}
	var hits []LeftOut
	if err := json.Unmarshal(hj, &hits); err != nil {
		return nil, errScanCache
	}
	count, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, errScanCache
	}
	read, _ := sr.Seek(0, io.SeekCurrent) // a SectionReader's Seek never fails
	at := read - int64(br.Buffered())
	if count > uint64(size-at)/6 { // a mark takes 6 bytes at least
		return nil, errScanCache
	}
	return &scanFile{f: f, size: size, key: key, hits: hits, marksAt: at, count: count}, nil
}

// unchanged reports whether every mark's path is as recorded (one lstat
// each, workers at once, each taking every workers-th mark) and the file
// holds nothing after the marks. A mark that cannot be read counts as a
// change.
func (sf *scanFile) unchanged(workers int) bool {
	var changed atomic.Bool
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !sf.checkMarks(uint64(w), uint64(workers), &changed) {
				changed.Store(true)
			}
		}()
	}
	wg.Wait()
	return !changed.Load()
}

// checkMarks reads every mark and lstats those whose index is w modulo
// workers, until one differs or stop is set; false means a difference or
// a file that is not a cache file. Each path is read into one buffer,
// ended by a NUL, and given to the system call from there: no allocation
// for tens of thousands of marks.
func (sf *scanFile) checkMarks(w, workers uint64, stop *atomic.Bool) bool {
	br := bufio.NewReaderSize(io.NewSectionReader(sf.f, sf.marksAt, sf.size-sf.marksAt), scanFileBuffer)
	path := make([]byte, 0, 4096)
	for i := range sf.count {
		if stop.Load() {
			return true // another worker saw a change
		}
		l, err := binary.ReadUvarint(br)
		if err != nil || l > 1<<16 {
			return false
		}
		path = slices.Grow(path[:0], int(l)+1)[:l+1]
		if _, err := io.ReadFull(br, path[:l]); err != nil {
			return false
		}
		path[l] = 0
		var want statMark
		var mode uint64
		var errs [5]error
		want.Dev, errs[0] = binary.ReadUvarint(br)
		want.Ino, errs[1] = binary.ReadUvarint(br)
		want.Ctime, errs[2] = binary.ReadVarint(br)
		want.Size, errs[3] = binary.ReadVarint(br)
		mode, errs[4] = binary.ReadUvarint(br)
		if errors.Join(errs[:]...) != nil || mode > 0xffffffff {
			return false
		}
		want.Mode = uint32(mode)
		if i%workers != w {
			continue
		}
		if bytes.IndexByte(path[:l], 0) >= 0 {
			return false // a NUL would end the path early
		}
		if now, ok := lstatMarkZ(path); !ok || now != want {
			return false
		}
	}
	_, err := br.ReadByte()
	return err == io.EOF
}
