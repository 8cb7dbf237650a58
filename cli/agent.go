package cli

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
	urfave "github.com/urfave/cli/v2"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/version"

	"github.com/kelp-project/kelp/agent"
	"github.com/kelp-project/kelp/config"
)

// newAgentConfig is an agent.Config before its flags are parsed.
func newAgentConfig() agent.Config {
	return agent.Config{Version: version.Get().GitVersion} // the Kubernetes version build.sh links in
}

// agentOptions are the parsed flags of `kelp agent`.
type agentOptions struct {
	debug      bool
	kubeconfig string
	agent      agent.Config
}

// Agent is `kelp agent`: the node agent alone. Joining with a token comes
// with multi-node support; for now it takes a kubeconfig with a node's
// rights.
func Agent() *urfave.Command { return agentCommand(runAgent) }

func agentCommand(run func(context.Context, *agentOptions) error) *urfave.Command {
	o := &agentOptions{agent: newAgentConfig()}
	return &urfave.Command{
		Name:  "agent",
		Usage: "run the node agent (kubelet on containerd, pod network)",
		Flags: append([]urfave.Flag{
			debugFlag(&o.debug),
			&urfave.StringFlag{Name: "kubeconfig", Usage: "kubeconfig to reach the API server", Required: true, EnvVars: env("KUBECONFIG"), Destination: &o.kubeconfig},
			dataDirFlag(&o.agent.DataDir),
			nodeNameFlag(&o.agent.NodeName),
			nodeIPFlag(&o.agent.NodeIP, "the host's first IPv4 address"),
			clusterCIDRFlag(&o.agent.ClusterCIDR),
			clusterDNSFlag(&o.agent.ClusterDNS),
			clusterDomainFlag(&o.agent.ClusterDomain),
		}, agentFlags(&o.agent)...),
		Action: func(c *urfave.Context) error { return run(c.Context, o) },
	}
}

func runAgent(ctx context.Context, o *agentOptions) error {
	if o.debug {
		logrus.SetLevel(logrus.DebugLevel)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	ac := o.agent
	if ac.NodeName, err = config.NodeName(ac.NodeName); err != nil {
		return err
	}
	if ac.NodeIP == "" {
		ac.NodeIP = config.DefaultAddress("")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return agent.Run(ctx, ac, agent.Credentials{Node: rc})
}

// KillAll is `kelp killall`: it stops what keeps running after kelp stops
// (containers, containerd, the pod network and cgroups), as k3s has
// k3s-killall.sh. It takes the agent's flags, so that it finds what an
// agent started with the same flags left behind.
func KillAll() *urfave.Command { return killallCommand(runKillAll) }

func killallCommand(run func(context.Context, agent.Config) error) *urfave.Command {
	ac := newAgentConfig()
	return &urfave.Command{
		Name:  "killall",
		Usage: "stop every container, the supervised containerd and the pod network left by kelp",
		Flags: append([]urfave.Flag{
			dataDirFlag(&ac.DataDir),
			clusterCIDRFlag(&ac.ClusterCIDR),
		}, agentFlags(&ac)...),
		Action: func(c *urfave.Context) error { return run(c.Context, ac) },
	}
}

func runKillAll(ctx context.Context, ac agent.Config) error { return agent.KillAll(ctx, ac) }
