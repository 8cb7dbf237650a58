// Command launcher is the kelp that ships: a small program holding the
// full kelp ("the core", package main at the repository root),
// compressed.
//
// Every Go program runs the initialisers of every package it links
// before main, and the core links kubectl, etcd, the API server and the
// node agent: ~0.1 s and ~100 MB resident before it does anything. The
// launcher links almost nothing, so what must be cheap is served here:
//   - `kelp --version`;
//   - the container log writer the containerd shim starts for every
//     container, and the node's log daemon (package containerlog), which
//     live as long as the containers do.
//
// Everything else runs the core: extracted once per build into
// <extract dir>/<sha256 prefix>/kelp and exec'd with the same arguments
// (argv[0] kept, so a "kubectl" symlink still means kubectl; through a
// symlink of that name, so the process has it too), with
// $KELP_LAUNCHER naming this program for the core's agent to hand to
// containerd. Compressed, the core also keeps the download small (k3s
// ships its binaries the same way).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/kelp-project/kelp/runtime/containerlog"
)

// kelpVersion is set at link time by scripts/build.sh, as the core's.
var kelpVersion = "dev"

func main() {
	args := os.Args[1:]
	if containerlog.IsInvocation(args) {
		if err := containerlog.Main(args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-v") && filepath.Base(os.Args[0]) != "kubectl" {
		fmt.Printf("kelp version %s\n", kelpVersion)
		return
	}
	core, err := corePath()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kelp: %v\n", err)
		os.Exit(1)
	}
	env := os.Environ()
	if self, err := os.Executable(); err == nil {
		env = append(env, containerlog.LauncherEnv+"="+self)
	}
	core = named(core, os.Args[0])
	err = unix.Exec(core, os.Args, env)
	fmt.Fprintf(os.Stderr, "kelp: running %s: %v\n", core, err)
	os.Exit(1)
}
