package manifests

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"
)

// The add-ons kelp ships as manifests, so a user sees them in the
// directory and can skip, disable or replace them as on k3s. Their
// placeholders, %{NAME}%, are filled from the server's settings (k3s's
// template variables).
//
//go:embed packaged/*.yaml
var packagedFS embed.FS

var placeholder = regexp.MustCompile(`%\{[A-Z0-9_]+\}%`)

// Packaged lists the names of the packaged manifests, as --disable takes
// them: the file name without .yaml.
func Packaged() []string {
	entries, _ := fs.ReadDir(packagedFS, "packaged")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// IsPackaged tells whether file (a name in the directory) is one kelp
// writes.
func IsPackaged(file string) bool {
	_, err := fs.Stat(packagedFS, "packaged/"+file)
	return err == nil
}

// renderPackaged is a packaged manifest with its placeholders filled in.
// A placeholder without a value is an error, never a manifest applied
// with `%{...}%` in it.
func renderPackaged(name string, vars map[string]string) ([]byte, error) {
	data, err := packagedFS.ReadFile("packaged/" + name + ".yaml")
	if err != nil {
		return nil, err
	}
	var missing []string
	out := placeholder.ReplaceAllFunc(data, func(p []byte) []byte {
		v, ok := vars[string(p[2:len(p)-2])]
		if !ok {
			missing = append(missing, string(p))
			return p
		}
		return []byte(v)
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("packaged manifest %s: no value for %s", name, strings.Join(missing, ", "))
	}
	return out, nil
}

// WritePackaged writes the packaged manifests into dir, as k3s stages its
// own at each start: a copy edited by hand is overwritten (the way to keep
// one's own is a .skip file, or another file name), a copy with a .skip
// file beside it is left as it is, and a disabled one is not written and
// a copy written before is removed, which deletes what it applied. It
// returns the names in disabled that are no packaged manifest (k3s's
// --disable also names components kelp has not, as traefik).
func WritePackaged(dir string, disabled []string, vars map[string]string) (unknown []string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	off := map[string]bool{}
	for _, d := range disabled {
		off[d] = true
	}
	for _, name := range Packaged() {
		delete(off, name)
		file := name + ".yaml"
		path := filepath.Join(dir, file)
		if disabledName(disabled, name) {
			if err := os.Remove(path); err == nil {
				logrus.Infof("manifests: %s disabled: removed %s", name, path)
			} else if !os.IsNotExist(err) {
				return nil, err
			}
			continue
		}
		if skipped(dir, file) {
			logrus.Infof("manifests: %s has a .skip file: not written, not applied", path)
			continue
		}
		data, err := renderPackaged(name, vars)
		if err != nil {
			return nil, err
		}
		// Unchanged content is not rewritten: no write to the disk, and
		// the file keeps its time.
		if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
			continue
		}
		if err := writeFile(path, data); err != nil {
			return nil, err
		}
		logrus.Infof("manifests: wrote %s", path)
	}
	for d := range off {
		unknown = append(unknown, d)
	}
	sort.Strings(unknown)
	return unknown, nil
}

func disabledName(disabled []string, name string) bool {
	for _, d := range disabled {
		if d == name {
			return true
		}
	}
	return false
}

// writeFile replaces path with data through a rename, so a watcher never
// reads it half written.
func writeFile(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
