package cli

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
	urfave "github.com/urfave/cli/v2"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/version"

	"github.com/kelp-project/kelp/agent"
	agentjoin "github.com/kelp-project/kelp/agent/join"
	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/resident"
)

// newAgentConfig is an agent.Config before its flags are parsed.
func newAgentConfig() agent.Config {
	return agent.Config{Version: version.Get().GitVersion} // the Kubernetes version build.sh links in
}

// agentOptions are the parsed flags of `kelp agent`.
type agentOptions struct {
	debug      bool
	kubeconfig string
	// server, token and tokenFile join a cluster (agent/join), unless a
	// kubeconfig is given instead.
	server, token, tokenFile string
	agent                    agent.Config
}

// Agent is `kelp agent`: the node agent alone. It joins the cluster at
// --server with --token (agent/join), or uses a kubeconfig with a node's
// rights given by hand.
func Agent() *urfave.Command { return agentCommand(runAgent) }

func agentCommand(run func(context.Context, *agentOptions) error) *urfave.Command {
	o := &agentOptions{agent: newAgentConfig()}
	return &urfave.Command{
		Name:  "agent",
		Usage: "run the node agent (kubelet on containerd, pod network)",
		Flags: append([]urfave.Flag{
			debugFlag(&o.debug),
			// k3s's --server reads K3S_URL: the one flag whose variable
			// is not named after it.
			serverURLFlag(&o.server, "", "the server to join, https://<server>:6443"),
			tokenFlag(&o.token, "token to join with: the server's node-token, token, or a bootstrap token from kelp token create"),
			tokenFileFlag(&o.tokenFile),
			&urfave.StringFlag{Name: "kubeconfig", Usage: "kubeconfig with a node's rights, instead of joining with --server and --token", EnvVars: env("KUBECONFIG"), Destination: &o.kubeconfig},
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
	if err := o.validate(); err != nil {
		return err
	}
	ac := o.agent
	var err error
	if ac.NodeName, err = config.NodeName(ac.NodeName); err != nil {
		return err
	}
	if ac.NodeIP == "" {
		ac.NodeIP = config.DefaultAddress("")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go resident.TrimAfter(ctx, config.ResidentTrimDelay)
	if o.kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			return fmt.Errorf("--kubeconfig: %w", err)
		}
		return agent.Run(ctx, ac, agent.Credentials{Node: rc})
	}
	res, err := agentjoin.Join(ctx, agentjoin.Config{Server: o.server, Token: o.token, DataDir: ac.DataDir, NodeName: ac.NodeName, NodeIP: ac.NodeIP})
	if err != nil {
		return fmt.Errorf("joining %s: %w", o.server, err)
	}
	logrus.Infof("joined %s as node %s", o.server, ac.NodeName)
	joined(&ac, res)
	return agent.Run(ctx, ac, agent.Credentials{Node: res.Node, Proxy: res.Proxy, Provisioner: res.Provisioner})
}

// validate checks that the agent has one way to reach the API, and reads
// --token-file.
func (o *agentOptions) validate() error {
	var err error
	if o.token, err = secretFrom(o.token, o.tokenFile, "token"); err != nil {
		return err
	}
	switch {
	case o.kubeconfig != "" && (o.server != "" || o.token != ""):
		return errors.New("--kubeconfig and --server/--token both given: choose one way to reach the server")
	case o.kubeconfig != "":
		return nil
	case o.server == "" && o.token == "":
		return errors.New("no server to join: give --server and --token (KELP_URL, KELP_TOKEN), or --kubeconfig")
	case o.server == "":
		return errors.New("--token given without --server (KELP_URL)")
	case o.token == "":
		return errors.New("--server given without --token (KELP_TOKEN) or --token-file")
	}
	return nil
}

// joined takes the cluster's settings from the server, so that agents
// repeat none of its flags, and the kubelet's serving certificate.
// A flag the user changed from its default and the server's value
// disagrees with is named in a warning: the server's wins, since every
// node must agree on the networks.
func joined(ac *agent.Config, res *agentjoin.Result) {
	s := res.Settings
	take := func(flag string, dst *string, def, server string) {
		if server == "" {
			return
		}
		if *dst != def && *dst != server {
			logrus.Warnf("--%s %s is ignored: the server's is %s", flag, *dst, server)
		}
		*dst = server
	}
	take("cluster-cidr", &ac.ClusterCIDR, config.ClusterCIDR, s.ClusterCIDR)
	take("cluster-dns", &ac.ClusterDNS, config.ClusterDNS, s.ClusterDNS)
	take("cluster-domain", &ac.ClusterDomain, config.ClusterDomain, s.ClusterDomain)
	take("flannel-backend", &ac.NodeNetwork, config.NodeNetwork, s.FlannelBackend)
	ac.KubeletServingCertFile, ac.KubeletServingKeyFile = res.ServingCertFile, res.ServingKeyFile
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
