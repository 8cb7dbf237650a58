package resident

import (
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Trim drops the executable's resident pages, and the process goes on
// working: code and read-only data fault back in as they are used.
func TestTrimDropsExecutablePages(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	written := map[uintptr]int64{}
	for _, m := range mappings(exe) {
		if m.anonymous > 0 {
			written[m.start] = m.anonymous
		}
	}
	if len(written) == 0 {
		t.Fatalf("no mapping of %s holds written pages: mappings() reads nothing (%v)", exe, mappings(exe))
	}
	fileBefore := statusBytes("RssFile")
	before, after, err := Trim()
	if err != nil {
		t.Fatal(err)
	}
	fileAfter := statusBytes("RssFile")
	// The pages the process wrote (the relocated GOT, .data) are its own.
	for _, m := range mappings(exe) {
		if want, ok := written[m.start]; ok && m.anonymous < want {
			t.Errorf("mapping %x-%x had %d bytes of written pages, now %d", m.start, m.end, want, m.anonymous)
		}
	}
	if before <= 0 || after >= before || fileAfter >= fileBefore {
		t.Errorf("RSS %d → %d, RssFile %d → %d: nothing was given back", before, after, fileBefore, fileAfter)
	}
	// Code, rodata (the strings and tables below) and the heap still work.
	var sb strings.Builder
	for i := range 1000 {
		sb.WriteString(strconv.Itoa(i))
	}
	if got := len(sb.String()); got != 2890 {
		t.Errorf("after Trim, building a string gave %d bytes, want 2890", got)
	}
	// A call into the C library (kelp is linked against it) goes through
	// relocated tables that must survive: they are pages the loader wrote.
	if u, err := user.Current(); err != nil || u.Uid != strconv.Itoa(os.Getuid()) {
		t.Errorf("after Trim, user.Current: %v %v", u, err)
	}
	// New OS threads (pthread_create, through the GOT in a cgo binary).
	done := make(chan struct{})
	for range 8 {
		go func() { runtime.LockOSThread(); time.Sleep(10 * time.Millisecond); done <- struct{}{} }()
	}
	for range 8 {
		<-done
	}
	if _, _, err := Trim(); err != nil {
		t.Errorf("a second Trim: %v", err)
	}
}

// The loader's pattern, on a file of our own: a private mapping written
// to, then made read-only (as the GOT is after relocation), next to one
// only read. Dropping pages must keep the written bytes and drop the
// clean ones.
func TestDropKeepsWrittenPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	page := os.Getpagesize()
	if err := os.WriteFile(path, make([]byte, 4*page), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	written, err := unix.Mmap(int(f.Fd()), 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(written)
	written[0], written[page] = 42, 43
	if err := unix.Mprotect(written, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	clean, err := unix.Mmap(int(f.Fd()), int64(2*page), 2*page, unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(clean)
	_ = clean[0] + clean[page] // resident
	if err := dropFilePages(path); err != nil {
		t.Fatal(err)
	}
	if written[0] != 42 || written[page] != 43 {
		t.Fatalf("the written, then protected, pages lost their bytes: %d %d", written[0], written[page])
	}
	for _, m := range mappings(path) {
		if m.start == uintptr(unsafe.Pointer(&clean[0])) && m.resident != 0 {
			t.Errorf("the clean mapping still has %d bytes resident", m.resident)
		}
	}
	if got := len(mappings(path)); got != 2 {
		t.Errorf("mappings(%s) found %d mappings, want 2", path, got)
	}
}
