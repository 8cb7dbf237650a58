package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

const (
	// extractDirEnv overrides where cores are extracted.
	extractDirEnv = "KELP_EXTRACT_DIR"
	// coreEnv names a core to run, for a launcher built without one.
	coreEnv = "KELP_CORE"
	// keepCores is how many extracted builds are kept; older ones go
	// once they have been unused for pruneAfter (one may be starting).
	keepCores  = 3
	pruneAfter = time.Hour
)

// corePath is the extracted core of this build, extracting it first if
// needed. Where no extract dir is writable it runs from memory instead.
func corePath() (string, error) {
	if payload == nil {
		if p := os.Getenv(coreEnv); p != "" {
			return p, nil
		}
		return "", errors.New("this launcher was built without the full kelp inside: build with scripts/build.sh (or set " + coreEnv + ")")
	}
	sum, size, err := parseSum(payloadSum)
	if err != nil {
		return "", err
	}
	root := extractRoot()
	path := filepath.Join(root, sum[:16], "kelp")
	if st, err := os.Stat(path); err == nil && st.Size() == size && st.Mode()&0o100 != 0 {
		return path, nil
	}
	if err := extract(path, sum, size); err != nil {
		fmt.Fprintf(os.Stderr, "kelp: cannot extract to %s (%v); running from memory\n", path, err)
		return extractMemory(sum, size)
	}
	prune(root, sum[:16])
	return path, nil
}

// named is the core at path under the name this program was invoked by,
// through a symlink beside it: the kernel names a process after the path
// it was exec'd through, so `ps` and `pkill` see "kubectl" or "kelp" as
// invoked, not the core's file name. path itself if no link can be made.
func named(path, argv0 string) string {
	name := filepath.Base(argv0)
	if name == "kelp" || name == "." || name == "/" || strings.HasPrefix(name, ".") || strings.HasPrefix(path, "/proc/") {
		return path
	}
	link := filepath.Join(filepath.Dir(path), name)
	if t, err := os.Readlink(link); err == nil && t == "kelp" {
		return link
	}
	tmp := fmt.Sprintf("%s.%d.tmp", link, os.Getpid())
	if os.Symlink("kelp", tmp) != nil {
		return path
	}
	if os.Rename(tmp, link) != nil {
		_ = os.Remove(tmp)
		return path
	}
	return link
}

func parseSum(s string) (sum string, size int64, err error) {
	f := strings.Fields(s)
	if len(f) == 2 {
		if size, err = strconv.ParseInt(f[1], 10, 64); err == nil && len(f[0]) == 64 {
			return f[0], size, nil
		}
	}
	return "", 0, fmt.Errorf("corrupt launcher: payload checksum %q", s)
}

// extractRoot is $KELP_EXTRACT_DIR, else /var/lib/kelp/data for root
// (kelp's default data dir) and ~/.local/share/kelp/data for others.
func extractRoot() string {
	if d := os.Getenv(extractDirEnv); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/lib/kelp/data"
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "kelp", "data")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "kelp", "data")
}

// extract writes the core to path through a temporary file renamed into
// place once its checksum is right, so a concurrent or interrupted
// extraction never leaves a partial core behind.
func extract(path, sum string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kelp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := decompress(tmp, sum, size); err != nil {
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func decompress(w io.Writer, sum string, size int64) error {
	d, err := zstd.NewReader(bytes.NewReader(payload), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
	if err != nil {
		return err
	}
	defer d.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), d)
	if err != nil {
		return fmt.Errorf("decompressing: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum || n != size {
		return fmt.Errorf("corrupt launcher: core is %d bytes with sha256 %s, want %d bytes with %s", n, got, size, sum)
	}
	return nil
}

// extractMemory puts the core in a memfd and returns its /proc path:
// slower at every start, but needs no writable directory.
func extractMemory(sum string, size int64) (string, error) {
	fd, err := unix.MemfdCreate("kelp", 0)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), "kelp")
	if err := decompress(f, sum, size); err != nil {
		return "", err
	}
	// Left open (without close-on-exec) for the exec to find it.
	return fmt.Sprintf("/proc/self/fd/%d", fd), nil
}

// prune removes extracted builds beyond the newest keepCores, once unused
// for pruneAfter; current is never removed.
func prune(root, current string) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	type build struct {
		name string
		mod  time.Time
	}
	var builds []build
	for _, e := range ents {
		if info, err := e.Info(); err == nil && e.IsDir() && e.Name() != current {
			builds = append(builds, build{e.Name(), info.ModTime()})
		}
	}
	sort.Slice(builds, func(i, j int) bool { return builds[i].mod.After(builds[j].mod) })
	for i, b := range builds {
		if i >= keepCores-1 && time.Since(b.mod) > pruneAfter {
			_ = os.RemoveAll(filepath.Join(root, b.name))
		}
	}
}
