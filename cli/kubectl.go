package cli

import (
	"os"

	urfave "github.com/urfave/cli/v2"
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"

	"github.com/kelp-project/kelp/config"
)

// Kubectl is `kelp kubectl`: the real kubectl. With KUBECONFIG unset it
// uses the admin kubeconfig, as k3s does.
func Kubectl() *urfave.Command {
	return &urfave.Command{
		Name:            "kubectl",
		Usage:           "run kubectl against this cluster",
		SkipFlagParsing: true,
		Action: func(c *urfave.Context) error {
			RunKubectl(c.Args().Slice())
			return nil
		},
	}
}

// RunKubectl runs kubectl with args and exits with its status.
func RunKubectl(args []string) {
	if os.Getenv("KUBECONFIG") == "" {
		if _, err := os.Stat(config.Kubeconfig); err == nil {
			os.Setenv("KUBECONFIG", config.Kubeconfig)
		}
	}
	os.Args = append([]string{"kubectl"}, args...)
	os.Exit(cli.Run(cmd.NewDefaultKubectlCommand()))
}
