// Command kelp is a Kubernetes cluster in one binary: `kelp server` runs
// the control plane and a local node agent, `kelp agent` a node agent
// alone, and `kelp kubectl` is unmodified kubectl. The commands are in
// package cli.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sirupsen/logrus"
	urfavecli "github.com/urfave/cli/v2"

	"github.com/kelp-project/kelp/cli"
	"github.com/kelp-project/kelp/runtime/containerlog"
)

// kelpVersion is set at link time by scripts/build.sh.
var kelpVersion = "dev"

func main() {
	// Installed as a "kubectl" symlink, kelp is kubectl.
	if filepath.Base(os.Args[0]) == "kubectl" {
		cli.RunKubectl(os.Args[1:])
	}
	// The containerd shim runs kelp as each container's log writer, and
	// the agent as the node's log daemon, when kelp was started without
	// its launcher (which otherwise serves both).
	if containerlog.IsInvocation(os.Args[1:]) {
		if err := containerlog.Main(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	app := &urfavecli.App{
		Name:     "kelp",
		Version:  kelpVersion,
		Usage:    "a Kubernetes cluster in one binary",
		Flags:    cli.GlobalFlags(),
		Before:   cli.SetupLogging,
		Commands: []*urfavecli.Command{cli.Server(), cli.Agent(), cli.KillAll(), cli.Token(), cli.SecretsEncrypt(), cli.Kubeconfig(), cli.Kubectl(), cli.CheckConfig()},
	}
	if err := app.Run(os.Args); err != nil {
		logrus.Fatal(err)
	}
}
