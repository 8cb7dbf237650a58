package cli

import (
	"fmt"
	"os"
	"strings"

	urfave "github.com/urfave/cli/v2"

	"github.com/kelp-project/kelp/agent"
	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/netplane/nodenet"
)

// The flags that several commands take are declared here, once each. A
// definition is a function of the field it parses into: a flag carries
// parse state (urfave copies an environment variable into Value), so each
// command gets its own, and the same flag can land in server.Config for
// `kelp server` and in agent.Config for `kelp agent`.

// env is a flag's environment variable, KELP_<NAME>: name is the flag's name
// in upper case with underscores (TestEnvVars holds every flag to it).
func env(name string) []string { return []string{"KELP_" + name} }

func debugFlag(dst *bool) urfave.Flag {
	return &urfave.BoolFlag{Name: "debug", Usage: "log at debug level", EnvVars: env("DEBUG"), Destination: dst}
}

func dataDirFlag(dst *string) urfave.Flag {
	return &urfave.StringFlag{Name: "data-dir", Aliases: []string{"d"}, Value: config.DataDir, Usage: "directory for all state", EnvVars: env("DATA_DIR"), Destination: dst}
}

func clusterCIDRFlag(dst *string) urfave.Flag {
	return &urfave.StringFlag{Name: "cluster-cidr", Value: config.ClusterCIDR, Usage: "pod network", EnvVars: env("CLUSTER_CIDR"), Destination: dst}
}

func clusterDNSFlag(dst *string) urfave.Flag {
	return &urfave.StringFlag{Name: "cluster-dns", Value: config.ClusterDNS, Usage: "cluster DNS service IP", EnvVars: env("CLUSTER_DNS"), Destination: dst}
}

func clusterDomainFlag(dst *string) urfave.Flag {
	return &urfave.StringFlag{Name: "cluster-domain", Value: config.ClusterDomain, Usage: "cluster domain", EnvVars: env("CLUSTER_DOMAIN"), Destination: dst}
}

func nodeNameFlag(dst *string) urfave.Flag {
	return &urfave.StringFlag{Name: "node-name", Usage: "node name (default: the hostname)", EnvVars: env("NODE_NAME"), Destination: dst}
}

// nodeIPFlag's default differs: `kelp server` uses its advertise address,
// `kelp agent` the host's.
func nodeIPFlag(dst *string, defaultText string) urfave.Flag {
	return &urfave.StringFlag{Name: "node-ip", Usage: "the node's InternalIP (default: " + defaultText + ")", EnvVars: env("NODE_IP"), Destination: dst}
}

// serverURLFlag is the API server to reach: for `kelp agent` the one to
// join, for `kelp kubeconfig` the one the kubeconfig names. Its variable is
// k3s's KELP_URL (K3S_URL).
func serverURLFlag(dst *string, value, usage string) urfave.Flag {
	return &urfave.StringFlag{Name: "server", Aliases: []string{"s"}, Value: value, Usage: usage, EnvVars: []string{"KELP_URL"}, Destination: dst}
}

// tokenFlag and tokenFileFlag choose a join secret: on `kelp server` the
// server's, on `kelp agent` the one to join with.
func tokenFlag(dst *string, usage string) urfave.Flag {
	return &urfave.StringFlag{Name: "token", Aliases: []string{"t"}, Usage: usage, EnvVars: env("TOKEN"), Destination: dst}
}

func tokenFileFlag(dst *string) urfave.Flag {
	return &urfave.StringFlag{Name: "token-file", Usage: "file holding the token (instead of --token)", EnvVars: env("TOKEN_FILE"), Destination: dst}
}

// secretFrom is the token given by flag or read from file, exactly one of
// them or neither.
func secretFrom(token, file, name string) (string, error) {
	if file == "" {
		return token, nil
	}
	if token != "" {
		return "", fmt.Errorf("--%s and --%s-file both given: choose one", name, name)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--%s-file: %w", name, err)
	}
	if t := strings.TrimSpace(string(data)); t != "" {
		return t, nil
	}
	return "", fmt.Errorf("--%s-file %s is empty", name, file)
}

// agentFlags are the node agent's own flags, taken by every command that
// runs or cleans up after an agent: `kelp server` (for its local agent),
// `kelp agent` and `kelp killall`.
func agentFlags(c *agent.Config) []urfave.Flag {
	return []urfave.Flag{
		&urfave.StringFlag{Name: "container-runtime-endpoint", Usage: "use this containerd socket instead of a supervised containerd", EnvVars: env("CONTAINER_RUNTIME_ENDPOINT"), Destination: &c.ContainerRuntimeEndpoint},
		&urfave.StringFlag{Name: "containerd-socket", Usage: "socket of the supervised containerd (default: <run-dir>/containerd/containerd.sock)", EnvVars: env("CONTAINERD_SOCKET"), Destination: &c.ContainerdSocket},
		&urfave.StringFlag{Name: "run-dir", Value: config.RunDir, Usage: "runtime files: pod netns pins, runc state", EnvVars: env("RUN_DIR"), Destination: &c.RunDir},
		&urfave.StringFlag{Name: "pod-log-dir", Value: config.PodLogDir, Usage: "where container logs are written", EnvVars: env("POD_LOG_DIR"), Destination: &c.LogRoot},
		&urfave.StringFlag{Name: "cgroup-root", Value: config.CgroupRoot, Usage: "cgroup under which pods run", EnvVars: env("CGROUP_ROOT"), Destination: &c.CgroupRoot},
		&urfave.StringFlag{Name: "cgroup-driver", Value: config.CgroupDriver, Usage: "who makes pod and container cgroups: auto (systemd when systemd runs, else cgroupfs), cgroupfs or systemd", EnvVars: env("CGROUP_DRIVER"), Destination: &c.CgroupDriver},
		&urfave.Int64Flag{Name: "pod-max-pids", Value: config.PodPidsLimit, Usage: "pids.max of each pod's cgroup (-1: no limit)", EnvVars: env("POD_MAX_PIDS"), Destination: &c.PodPidsLimit},
		&urfave.IntFlag{Name: "kubelet-port", Value: config.KubeletPort, Usage: "port of the kubelet's HTTPS endpoint (logs, exec; 0 picks a free port)", EnvVars: env("KUBELET_PORT"), Destination: &c.KubeletPort},
		&urfave.IntFlag{Name: "dns-port", Value: config.DNSPort, Usage: "port of the node's cluster DNS listener on the node IP", EnvVars: env("DNS_PORT"), Destination: &c.DNSPort},
		&urfave.StringFlag{Name: "flannel-backend", Value: config.NodeNetwork, Usage: "the node network: how pods get their addresses and reach each other (known: " + strings.Join(nodenet.Names(), ", ") + ")", EnvVars: env("FLANNEL_BACKEND"), Destination: &c.NodeNetwork},
		&urfave.StringFlag{Name: "flannel-iface", Value: config.FlannelIface, Usage: "interface the overlay uses (default: the one holding the node IP)", EnvVars: env("FLANNEL_IFACE"), Destination: &c.FlannelIface},
		&urfave.BoolFlag{Name: "disable-kube-proxy", Usage: "do not run the service proxy", EnvVars: env("DISABLE_KUBE_PROXY"), Destination: &c.DisableProxy},
		&urfave.BoolFlag{Name: "disable-dns", Usage: "do not serve cluster DNS", EnvVars: env("DISABLE_DNS"), Destination: &c.DisableDNS},
		&urfave.DurationFlag{Name: "container-restart-max-backoff", Value: config.CrashLoopMaxBackoff, Usage: "longest CrashLoopBackOff delay", EnvVars: env("CONTAINER_RESTART_MAX_BACKOFF"), Destination: &c.CrashLoopMaxBackoff},
	}
}
