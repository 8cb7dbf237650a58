// Command kelp is a Kubernetes cluster in one binary: `kelp server` runs
// the control plane, and `kelp kubectl` is unmodified kubectl.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	urfavecli "github.com/urfave/cli/v2"
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"

	"github.com/kelp-project/kelp/agent"
	"github.com/kelp-project/kelp/runtime"
	"github.com/kelp-project/kelp/server"
	"github.com/kelp-project/kelp/server/controllers/nodelifecycle"
	"github.com/kelp-project/kelp/server/scheduler"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/version"
)

// defaultKubeconfig is where `kelp server` writes the admin kubeconfig
// and where `kelp kubectl` looks when KUBECONFIG is unset.
const defaultKubeconfig = "/etc/kelp/kelp.yaml"

// nodeDefaults are kube-controller-manager's node lifecycle defaults.
var nodeDefaults = nodelifecycle.DefaultConfig()

// kelpVersion is set at link time by the Makefile.
var kelpVersion = "dev"

func main() {
	// Installed as a "kubectl" symlink, kelp is kubectl.
	if filepath.Base(os.Args[0]) == "kubectl" {
		runKubectl(os.Args[1:])
	}
	// The containerd shim runs kelp as each container's log writer.
	if runtime.IsLoggerInvocation(os.Args[1:]) {
		if err := runtime.LoggerMain(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	app := &urfavecli.App{
		Name:    "kelp",
		Version: kelpVersion,
		Usage:   "a Kubernetes cluster in one binary",
		Flags: []urfavecli.Flag{
			&urfavecli.BoolFlag{Name: "debug", Usage: "log at debug level", EnvVars: []string{"KELP_DEBUG"}},
		},
		Before: func(c *urfavecli.Context) error {
			logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: time.RFC3339Nano})
			if c.Bool("debug") {
				logrus.SetLevel(logrus.DebugLevel)
			}
			return nil
		},
		Commands: []*urfavecli.Command{serverCommand(), agentCommand(), killallCommand(), kubectlCommand()},
	}
	if err := app.Run(os.Args); err != nil {
		logrus.Fatal(err)
	}
}

func serverCommand() *urfavecli.Command {
	env := func(name string) []string { return []string{"KELP_" + name} }
	return &urfavecli.Command{
		Name:  "server",
		Usage: "run the control plane (embedded etcd, API server, controllers, scheduler) and a local node agent",
		Flags: append([]urfavecli.Flag{
			&urfavecli.BoolFlag{Name: "debug", Usage: "log at debug level", EnvVars: env("DEBUG")},
			&urfavecli.StringFlag{Name: "data-dir", Aliases: []string{"d"}, Value: "/var/lib/kelp", Usage: "directory for all state", EnvVars: env("DATA_DIR")},
			&urfavecli.IntFlag{Name: "https-listen-port", Value: 6443, Usage: "API server port (0 picks a free port)", EnvVars: env("HTTPS_LISTEN_PORT")},
			&urfavecli.StringFlag{Name: "bind-address", Value: "0.0.0.0", Usage: "API server bind address", EnvVars: env("BIND_ADDRESS")},
			&urfavecli.StringFlag{Name: "advertise-address", Usage: "address advertised to clients (default: the host's first IPv4 address)", EnvVars: env("ADVERTISE_ADDRESS")},
			&urfavecli.StringFlag{Name: "write-kubeconfig", Aliases: []string{"o"}, Value: defaultKubeconfig, Usage: "where to write the admin kubeconfig", EnvVars: env("WRITE_KUBECONFIG")},
			&urfavecli.StringFlag{Name: "write-kubeconfig-mode", Value: "0600", Usage: "file mode of the admin kubeconfig", EnvVars: env("WRITE_KUBECONFIG_MODE")},
			&urfavecli.StringFlag{Name: "cluster-cidr", Value: "10.42.0.0/16", Usage: "pod network", EnvVars: env("CLUSTER_CIDR")},
			&urfavecli.StringFlag{Name: "service-cidr", Value: "10.43.0.0/16", Usage: "service network", EnvVars: env("SERVICE_CIDR")},
			&urfavecli.StringFlag{Name: "service-node-port-range", Value: "30000-32767", Usage: "NodePort range", EnvVars: env("SERVICE_NODE_PORT_RANGE")},
			&urfavecli.StringFlag{Name: "cluster-dns", Value: "10.43.0.10", Usage: "cluster DNS service IP", EnvVars: env("CLUSTER_DNS")},
			&urfavecli.StringFlag{Name: "cluster-domain", Value: "cluster.local", Usage: "cluster domain", EnvVars: env("CLUSTER_DOMAIN")},
			&urfavecli.BoolFlag{Name: "disable-agent", Usage: "do not run the local node agent", EnvVars: env("DISABLE_AGENT")},
			&urfavecli.StringFlag{Name: "node-ip", Usage: "the node's InternalIP (default: the advertise address)", EnvVars: env("NODE_IP")},
			&urfavecli.BoolFlag{Name: "disable-scheduler", Usage: "do not run the scheduler", EnvVars: env("DISABLE_SCHEDULER")},
			&urfavecli.BoolFlag{Name: "disable-controller-manager", Usage: "do not run the controllers", EnvVars: env("DISABLE_CONTROLLER_MANAGER")},
			&urfavecli.StringFlag{Name: "node-name", Usage: "node name (default: the hostname)", EnvVars: env("NODE_NAME")},
			&urfavecli.Int64Flag{Name: "default-not-ready-toleration-seconds", Value: 300, Usage: "toleration added to every pod for the not-ready:NoExecute taint", EnvVars: env("DEFAULT_NOT_READY_TOLERATION_SECONDS")},
			&urfavecli.Int64Flag{Name: "default-unreachable-toleration-seconds", Value: 300, Usage: "toleration added to every pod for the unreachable:NoExecute taint", EnvVars: env("DEFAULT_UNREACHABLE_TOLERATION_SECONDS")},
			&urfavecli.DurationFlag{Name: "etcd-compaction-interval", Value: 5 * time.Minute, Usage: "how often etcd history is compacted (0 disables)", EnvVars: env("ETCD_COMPACTION_INTERVAL")},
			// kube-controller-manager's node lifecycle flags, upstream defaults.
			&urfavecli.DurationFlag{Name: "node-monitor-period", Value: nodeDefaults.NodeMonitorPeriod, Usage: "how often node health is checked", EnvVars: env("NODE_MONITOR_PERIOD")},
			&urfavecli.DurationFlag{Name: "node-monitor-grace-period", Value: nodeDefaults.NodeMonitorGracePeriod, Usage: "how long a node may go without renewing its Lease before it is marked NotReady (Unknown)", EnvVars: env("NODE_MONITOR_GRACE_PERIOD")},
			&urfavecli.DurationFlag{Name: "node-startup-grace-period", Value: nodeDefaults.NodeStartupGracePeriod, Usage: "grace period for a node that has never reported Ready", EnvVars: env("NODE_STARTUP_GRACE_PERIOD")},
			&urfavecli.Float64Flag{Name: "node-eviction-rate", Value: nodeDefaults.NodeEvictionRate, Usage: "nodes per second whose pods may be evicted in a healthy zone", EnvVars: env("NODE_EVICTION_RATE")},
			&urfavecli.Float64Flag{Name: "secondary-node-eviction-rate", Value: nodeDefaults.SecondaryNodeEvictionRate, Usage: "nodes per second whose pods may be evicted in a partly failing large zone", EnvVars: env("SECONDARY_NODE_EVICTION_RATE")},
			&urfavecli.IntFlag{Name: "large-cluster-size-threshold", Value: nodeDefaults.LargeClusterSizeThreshold, Usage: "zone size above which the secondary eviction rate applies", EnvVars: env("LARGE_CLUSTER_SIZE_THRESHOLD")},
			&urfavecli.Float64Flag{Name: "unhealthy-zone-threshold", Value: nodeDefaults.UnhealthyZoneThreshold, Usage: "fraction of NotReady nodes at which a zone counts as partly failing", EnvVars: env("UNHEALTHY_ZONE_THRESHOLD")},
			// kube-scheduler's backoff, upstream defaults.
			&urfavecli.DurationFlag{Name: "pod-initial-backoff", Value: scheduler.DefaultBackoff.Initial, Usage: "first retry delay for a pod that could not be scheduled", EnvVars: env("POD_INITIAL_BACKOFF")},
			&urfavecli.DurationFlag{Name: "pod-max-backoff", Value: scheduler.DefaultBackoff.Max, Usage: "longest retry delay for a pod that could not be scheduled", EnvVars: env("POD_MAX_BACKOFF")},
		}, agentFlags(env)...),
		Action: func(c *urfavecli.Context) error {
			if c.Bool("debug") {
				logrus.SetLevel(logrus.DebugLevel)
			}
			ac := agentConfig(c)
			mode, err := strconv.ParseUint(c.String("write-kubeconfig-mode"), 8, 32)
			if err != nil {
				return fmt.Errorf("--write-kubeconfig-mode %q: not an octal file mode", c.String("write-kubeconfig-mode"))
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return server.Run(ctx, server.Config{
				DataDir:            c.String("data-dir"),
				BindAddress:        c.String("bind-address"),
				HTTPSPort:          c.Int("https-listen-port"),
				AdvertiseAddress:   c.String("advertise-address"),
				WriteKubeconfig:    c.String("write-kubeconfig"),
				KubeconfigMode:     os.FileMode(mode),
				ClusterCIDR:        c.String("cluster-cidr"),
				ServiceCIDR:        c.String("service-cidr"),
				ServiceNodePorts:   c.String("service-node-port-range"),
				ClusterDNS:         c.String("cluster-dns"),
				ClusterDomain:      c.String("cluster-domain"),
				DisableAgent:       c.Bool("disable-agent"),
				DisableScheduler:   c.Bool("disable-scheduler"),
				DisableControllers: c.Bool("disable-controller-manager"),
				NodeName:           c.String("node-name"),
				CompactionInterval: c.Duration("etcd-compaction-interval"),

				DefaultNotReadyTolerationSeconds:    c.Int64("default-not-ready-toleration-seconds"),
				DefaultUnreachableTolerationSeconds: c.Int64("default-unreachable-toleration-seconds"),
				NodeLifecycle: nodelifecycle.Config{
					NodeMonitorPeriod:         c.Duration("node-monitor-period"),
					NodeMonitorGracePeriod:    c.Duration("node-monitor-grace-period"),
					NodeStartupGracePeriod:    c.Duration("node-startup-grace-period"),
					NodeEvictionRate:          c.Float64("node-eviction-rate"),
					SecondaryNodeEvictionRate: c.Float64("secondary-node-eviction-rate"),
					LargeClusterSizeThreshold: c.Int("large-cluster-size-threshold"),
					UnhealthyZoneThreshold:    c.Float64("unhealthy-zone-threshold"),
				},
				SchedulerBackoff: scheduler.Backoff{Initial: c.Duration("pod-initial-backoff"), Max: c.Duration("pod-max-backoff")},
				Agent:            ac,
			})
		},
	}
}

// agentFlags are the node agent's own flags, shared by `kelp server`
// (for its local agent) and `kelp agent`.
func agentFlags(env func(string) []string) []urfavecli.Flag {
	return []urfavecli.Flag{
		&urfavecli.StringFlag{Name: "container-runtime-endpoint", Usage: "use this containerd socket instead of a supervised containerd", EnvVars: env("CONTAINER_RUNTIME_ENDPOINT")},
		&urfavecli.StringFlag{Name: "containerd-socket", Usage: "socket of the supervised containerd (default: <run-dir>/containerd/containerd.sock)", EnvVars: env("CONTAINERD_SOCKET")},
		&urfavecli.StringFlag{Name: "run-dir", Value: "/run/kelp", Usage: "runtime files: pod netns pins, runc state", EnvVars: env("RUN_DIR")},
		&urfavecli.StringFlag{Name: "pod-log-dir", Value: "/var/log/pods", Usage: "where container logs are written", EnvVars: env("POD_LOG_DIR")},
		&urfavecli.StringFlag{Name: "cgroup-root", Value: "/kubepods", Usage: "cgroup under which pods run", EnvVars: env("CGROUP_ROOT")},
		&urfavecli.IntFlag{Name: "kubelet-port", Value: 10250, Usage: "port of the kubelet's HTTPS endpoint (logs, exec; 0 picks a free port)", EnvVars: env("KUBELET_PORT")},
		&urfavecli.IntFlag{Name: "dns-port", Value: 53, Usage: "port of the node's cluster DNS listener on the node IP", EnvVars: env("DNS_PORT")},
		&urfavecli.BoolFlag{Name: "disable-kube-proxy", Usage: "do not run the service proxy", EnvVars: env("DISABLE_KUBE_PROXY")},
		&urfavecli.BoolFlag{Name: "disable-dns", Usage: "do not serve cluster DNS", EnvVars: env("DISABLE_DNS")},
		&urfavecli.DurationFlag{Name: "container-restart-max-backoff", Value: 5 * time.Minute, Usage: "longest CrashLoopBackOff delay", EnvVars: env("CONTAINER_RESTART_MAX_BACKOFF")},
	}
}

func agentConfig(c *urfavecli.Context) agent.Config {
	return agent.Config{
		NodeIP:                   c.String("node-ip"),
		Version:                  version.Get().GitVersion, // the Kubernetes version build.sh links in
		ContainerRuntimeEndpoint: c.String("container-runtime-endpoint"),
		ContainerdSocket:         c.String("containerd-socket"),
		RunDir:                   c.String("run-dir"),
		LogRoot:                  c.String("pod-log-dir"),
		CgroupRoot:               c.String("cgroup-root"),
		KubeletPort:              c.Int("kubelet-port"),
		DNSPort:                  c.Int("dns-port"),
		DisableProxy:             c.Bool("disable-kube-proxy"),
		DisableDNS:               c.Bool("disable-dns"),
		CrashLoopMaxBackoff:      c.Duration("container-restart-max-backoff"),
	}
}

// agentCommand runs the node agent alone. Joining with a token comes with
// multi-node support; for now it takes a kubeconfig with a node's rights.
func agentCommand() *urfavecli.Command {
	env := func(name string) []string { return []string{"KELP_" + name} }
	return &urfavecli.Command{
		Name:  "agent",
		Usage: "run the node agent (kubelet on containerd, pod network)",
		Flags: append([]urfavecli.Flag{
			&urfavecli.BoolFlag{Name: "debug", Usage: "log at debug level", EnvVars: env("DEBUG")},
			&urfavecli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig to reach the API server", Required: true, EnvVars: env("KUBECONFIG")},
			&urfavecli.StringFlag{Name: "data-dir", Aliases: []string{"d"}, Value: "/var/lib/kelp", Usage: "directory for all state", EnvVars: env("DATA_DIR")},
			&urfavecli.StringFlag{Name: "node-name", Usage: "node name (default: the hostname)", EnvVars: env("NODE_NAME")},
			&urfavecli.StringFlag{Name: "node-ip", Usage: "the node's InternalIP (default: the host's first IPv4 address)", EnvVars: env("NODE_IP")},
			&urfavecli.StringFlag{Name: "cluster-cidr", Value: "10.42.0.0/16", Usage: "pod network", EnvVars: env("CLUSTER_CIDR")},
			&urfavecli.StringFlag{Name: "cluster-dns", Value: "10.43.0.10", Usage: "cluster DNS service IP", EnvVars: env("CLUSTER_DNS")},
			&urfavecli.StringFlag{Name: "cluster-domain", Value: "cluster.local", Usage: "cluster domain", EnvVars: env("CLUSTER_DOMAIN")},
		}, agentFlags(env)...),
		Action: func(c *urfavecli.Context) error {
			if c.Bool("debug") {
				logrus.SetLevel(logrus.DebugLevel)
			}
			rc, err := clientcmd.BuildConfigFromFlags("", c.String("kubeconfig"))
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			ac := agentConfig(c)
			ac.DataDir, ac.NodeName = c.String("data-dir"), c.String("node-name")
			ac.ClusterCIDR, ac.ClusterDNS, ac.ClusterDomain = c.String("cluster-cidr"), c.String("cluster-dns"), c.String("cluster-domain")
			if ac.NodeName == "" {
				h, err := os.Hostname()
				if err != nil {
					return err
				}
				ac.NodeName = strings.ToLower(h)
			}
			if ac.NodeIP == "" {
				ac.NodeIP = server.DefaultAddress("")
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return agent.Run(ctx, ac, rc)
		},
	}
}

// killallCommand stops what keeps running after kelp stops: containers,
// containerd, the pod network and cgroups (k3s has k3s-killall.sh).
func killallCommand() *urfavecli.Command {
	env := func(name string) []string { return []string{"KELP_" + name} }
	return &urfavecli.Command{
		Name:  "killall",
		Usage: "stop every container, the supervised containerd and the pod network left by kelp",
		Flags: append([]urfavecli.Flag{
			&urfavecli.StringFlag{Name: "data-dir", Aliases: []string{"d"}, Value: "/var/lib/kelp", Usage: "directory for all state", EnvVars: env("DATA_DIR")},
			&urfavecli.StringFlag{Name: "cluster-cidr", Value: "10.42.0.0/16", Usage: "pod network", EnvVars: env("CLUSTER_CIDR")},
		}, agentFlags(env)...),
		Action: func(c *urfavecli.Context) error {
			ac := agentConfig(c)
			ac.DataDir, ac.ClusterCIDR = c.String("data-dir"), c.String("cluster-cidr")
			return agent.KillAll(c.Context, ac)
		},
	}
}

// kubectlCommand runs the real kubectl. With KUBECONFIG unset it uses the
// admin kubeconfig, as k3s does.
func kubectlCommand() *urfavecli.Command {
	return &urfavecli.Command{
		Name:            "kubectl",
		Usage:           "run kubectl against this cluster",
		SkipFlagParsing: true,
		Action: func(c *urfavecli.Context) error {
			runKubectl(c.Args().Slice())
			return nil
		},
	}
}

// runKubectl runs kubectl with args and exits with its status.
func runKubectl(args []string) {
	if os.Getenv("KUBECONFIG") == "" {
		if _, err := os.Stat(defaultKubeconfig); err == nil {
			os.Setenv("KUBECONFIG", defaultKubeconfig)
		}
	}
	os.Args = append([]string{"kubectl"}, args...)
	os.Exit(cli.Run(cmd.NewDefaultKubectlCommand()))
}
