package cli

import (
	"fmt"
	"io"
	"strings"

	urfave "github.com/urfave/cli/v2"

	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/hostcheck"
)

// CheckConfig is `kelp check-config`, as `k3s check-config`: one line per
// check of what this host needs to run kelp (package hostcheck), OK, WARN
// or MISSING, with what to do under each that is not OK. It exits 1 when a
// required item is missing.
func CheckConfig() *urfave.Command { return checkConfigCommand(hostcheck.Local) }

func checkConfigCommand(host func() *hostcheck.Host) *urfave.Command {
	var o hostcheck.Options
	return &urfave.Command{
		Name:  "check-config",
		Usage: "say what this host lacks to run kelp (kernel, cgroups, nftables, containerd, ports, disk)",
		Flags: []urfave.Flag{
			dataDirFlag(&o.DataDir),
			// The ports kelp will listen on; 0 skips a check (an agent needs
			// no API port). Named as the server's and agent's flags are.
			&urfave.IntFlag{Name: "https-listen-port", Value: config.HTTPSPort, Usage: "API server port to check (0: do not check)", EnvVars: env("HTTPS_LISTEN_PORT"), Destination: &o.APIPort},
			&urfave.IntFlag{Name: "kubelet-port", Value: config.KubeletPort, Usage: "kubelet port to check (0: do not check)", EnvVars: env("KUBELET_PORT"), Destination: &o.KubeletPort},
			&urfave.IntFlag{Name: "vxlan-port", Value: config.VXLANPort, Usage: "VXLAN UDP port to check (0: do not check)", EnvVars: env("VXLAN_PORT"), Destination: &o.VXLANPort},
		},
		Action: func(c *urfave.Context) error {
			rs := host().Check(o)
			printResults(c.App.Writer, rs)
			if hostcheck.AnyMissing(rs) {
				return urfave.Exit("kelp check-config: this host lacks what kelp needs (MISSING above)", 1)
			}
			return nil
		},
	}
}

// printResults writes one line per check, then each hint indented under
// it.
func printResults(w io.Writer, rs []hostcheck.Result) {
	for _, r := range rs {
		fmt.Fprintln(w, r)
		if r.Status != hostcheck.OK && r.Hint != "" {
			fmt.Fprintln(w, indent(r.Hint))
		}
	}
}

func indent(s string) string {
	const pad = "        " // under the check's name, past the status column
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}
