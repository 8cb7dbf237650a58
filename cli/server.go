package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sirupsen/logrus"
	urfave "github.com/urfave/cli/v2"

	"github.com/kelp-project/kelp/agent"
	agentjoin "github.com/kelp-project/kelp/agent/join"
	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/netplane/nodenet"
	"github.com/kelp-project/kelp/resident"
	"github.com/kelp-project/kelp/server"
	"github.com/kelp-project/kelp/server/apiserver"
	serverjoin "github.com/kelp-project/kelp/server/join"
	"github.com/kelp-project/kelp/server/manifests"
)

// serverOptions are the parsed flags of `kelp server`.
type serverOptions struct {
	debug, disableAgent bool
	kubeconfigMode      string        // octal, into server.KubeconfigMode
	storageMinFree      string        // --storage-min-free, into server.StorageMinFree
	tokenFile           string        // --token-file, into server.Token
	agentTokenFile      string        // --agent-token-file, into server.AgentToken
	server              server.Config // NodeLifecycle and SchedulerBackoff included
	// agent holds the local agent's own flags; localAgent adds the rest
	// from the server's.
	agent agent.Config
}

// Server is `kelp server`.
func Server() *urfave.Command { return serverCommand(runServer) }

func serverCommand(run func(context.Context, *serverOptions) error) *urfave.Command {
	o := &serverOptions{agent: newAgentConfig()}
	s, nl, sb, gc := &o.server, &o.server.NodeLifecycle, &o.server.SchedulerBackoff, &o.server.PodGC
	return &urfave.Command{
		Name:  "server",
		Usage: "run the control plane (embedded etcd, API server, controllers, scheduler) and a local node agent",
		Flags: append([]urfave.Flag{
			debugFlag(&o.debug),
			dataDirFlag(&s.DataDir),
			&urfave.IntFlag{Name: "https-listen-port", Value: config.HTTPSPort, Usage: "API server port (0 picks a free port)", EnvVars: env("HTTPS_LISTEN_PORT"), Destination: &s.HTTPSPort},
			&urfave.StringFlag{Name: "bind-address", Value: config.BindAddress, Usage: "API server bind address", EnvVars: env("BIND_ADDRESS"), Destination: &s.BindAddress},
			&urfave.StringFlag{Name: "advertise-address", Usage: "address advertised to clients (default: the host's first IPv4 address)", EnvVars: env("ADVERTISE_ADDRESS"), Destination: &s.AdvertiseAddress},
			&urfave.StringFlag{Name: "write-kubeconfig", Aliases: []string{"o"}, Value: config.Kubeconfig, Usage: "where to write the admin kubeconfig", EnvVars: env("WRITE_KUBECONFIG"), Destination: &s.WriteKubeconfig},
			&urfave.StringFlag{Name: "write-kubeconfig-mode", Value: config.KubeconfigMode, Usage: "file mode of the admin kubeconfig", EnvVars: env("WRITE_KUBECONFIG_MODE"), Destination: &o.kubeconfigMode},
			clusterCIDRFlag(&s.ClusterCIDR),
			&urfave.StringFlag{Name: "service-cidr", Value: config.ServiceCIDR, Usage: "service network", EnvVars: env("SERVICE_CIDR"), Destination: &s.ServiceCIDR},
			&urfave.StringFlag{Name: "service-node-port-range", Value: config.ServiceNodePortRange, Usage: "NodePort range", EnvVars: env("SERVICE_NODE_PORT_RANGE"), Destination: &s.ServiceNodePorts},
			clusterDNSFlag(&s.ClusterDNS),
			clusterDomainFlag(&s.ClusterDomain),
			&urfave.BoolFlag{Name: "disable-agent", Usage: "do not run the local node agent", EnvVars: env("DISABLE_AGENT"), Destination: &o.disableAgent},
			nodeIPFlag(&o.agent.NodeIP, "the advertise address"),
			&urfave.StringSliceFlag{Name: "disable", Usage: "do not deploy this packaged manifest of <data-dir>/server/manifests, and delete what it deployed (repeatable or comma-separated; known: " + strings.Join(manifests.Packaged(), ", ") + ")", EnvVars: env("DISABLE")},
			&urfave.BoolFlag{Name: "disable-scheduler", Usage: "do not run the scheduler", EnvVars: env("DISABLE_SCHEDULER"), Destination: &s.DisableScheduler},
			&urfave.BoolFlag{Name: "disable-controller-manager", Usage: "do not run the controllers", EnvVars: env("DISABLE_CONTROLLER_MANAGER"), Destination: &s.DisableControllers},
			nodeNameFlag(&s.NodeName),
			tokenFlag(&s.Token, "the server secret: joins agents and is the kelp-admin bearer token (default: the one in <data-dir>/server/token, or a new one)"),
			tokenFileFlag(&o.tokenFile),
			&urfave.StringFlag{Name: "agent-token", Usage: "secret that joins only agents (default: the one in <data-dir>/server/node-token, or a new one)", EnvVars: env("AGENT_TOKEN"), Destination: &s.AgentToken},
			&urfave.StringFlag{Name: "agent-token-file", Usage: "file holding the agent token (instead of --agent-token)", EnvVars: env("AGENT_TOKEN_FILE"), Destination: &o.agentTokenFile},
			&urfave.Int64Flag{Name: "default-not-ready-toleration-seconds", Value: config.DefaultNotReadyTolerationSeconds, Usage: "toleration added to every pod for the not-ready:NoExecute taint", EnvVars: env("DEFAULT_NOT_READY_TOLERATION_SECONDS"), Destination: &s.DefaultNotReadyTolerationSeconds},
			&urfave.Int64Flag{Name: "default-unreachable-toleration-seconds", Value: config.DefaultUnreachableTolerationSeconds, Usage: "toleration added to every pod for the unreachable:NoExecute taint", EnvVars: env("DEFAULT_UNREACHABLE_TOLERATION_SECONDS"), Destination: &s.DefaultUnreachableTolerationSeconds},
			&urfave.BoolFlag{Name: "secrets-encryption", Usage: "encrypt Secrets at rest (configuration and keys in <data-dir>/server/cred; see kelp secrets-encrypt)", EnvVars: env("SECRETS_ENCRYPTION"), Destination: &s.SecretsEncryption},
			&urfave.StringFlag{Name: "storage-min-free", Value: config.StorageMinFree, Usage: "free space of the data dir's filesystem below which writes are refused (507): a percentage, a size (256Mi), both for the smaller (5%,256Mi), or 0 for never; node heartbeats and deletes go on down to a reserve etcd keeps for itself", EnvVars: env("STORAGE_MIN_FREE"), Destination: &o.storageMinFree},
			&urfave.DurationFlag{Name: "etcd-compaction-interval", Value: config.EtcdCompactionInterval, Usage: "how often etcd history is compacted (0 disables)", EnvVars: env("ETCD_COMPACTION_INTERVAL"), Destination: &s.CompactionInterval},
			&urfave.IntFlag{Name: "max-requests-inflight", Value: config.MaxRequestsInFlight, Usage: "read-only requests served at once, long-running ones aside, beyond which requests get 429 (0: no limit)", EnvVars: env("MAX_REQUESTS_INFLIGHT"), Destination: &s.MaxRequestsInFlight},
			&urfave.IntFlag{Name: "max-mutating-requests-inflight", Value: config.MaxMutatingRequestsInFlight, Usage: "mutating requests served at once, beyond which requests get 429 (0: no limit)", EnvVars: env("MAX_MUTATING_REQUESTS_INFLIGHT"), Destination: &s.MaxMutatingRequestsInFlight},
			&urfave.DurationFlag{Name: "idle-connection-timeout", Value: config.IdleConnectionTimeout, Usage: "how long an API connection may stay idle before it is closed", EnvVars: env("IDLE_CONNECTION_TIMEOUT"), Destination: &s.IdleConnectionTimeout},
			&urfave.DurationFlag{Name: "tls-handshake-timeout", Value: config.TLSHandshakeTimeout, Usage: "how long an API connection's TLS handshake may take", EnvVars: env("TLS_HANDSHAKE_TIMEOUT"), Destination: &s.TLSHandshakeTimeout},
			&urfave.IntFlag{Name: "max-connections", Value: config.MaxConnections, Usage: "API connections open at most (fewer if the open-files limit allows fewer); beyond it a new connection closes the oldest idle one without a client certificate (0: the open-files limit alone)", EnvVars: env("MAX_CONNECTIONS"), Destination: &s.MaxConnections},
			&urfave.IntFlag{Name: "max-connections-per-ip", Value: config.MaxConnectionsPerIP, Usage: "API connections without a client certificate allowed from one source address (0: no limit)", EnvVars: env("MAX_CONNECTIONS_PER_IP"), Destination: &s.MaxConnectionsPerIP},
			// kube-controller-manager's node lifecycle flags, upstream defaults.
			&urfave.DurationFlag{Name: "node-monitor-period", Value: config.NodeMonitorPeriod, Usage: "how often node health is checked", EnvVars: env("NODE_MONITOR_PERIOD"), Destination: &nl.NodeMonitorPeriod},
			&urfave.DurationFlag{Name: "node-monitor-grace-period", Value: config.NodeMonitorGracePeriod, Usage: "how long a node may go without renewing its Lease before it is marked NotReady (Unknown)", EnvVars: env("NODE_MONITOR_GRACE_PERIOD"), Destination: &nl.NodeMonitorGracePeriod},
			&urfave.DurationFlag{Name: "node-startup-grace-period", Value: config.NodeStartupGracePeriod, Usage: "grace period for a node that has never reported Ready", EnvVars: env("NODE_STARTUP_GRACE_PERIOD"), Destination: &nl.NodeStartupGracePeriod},
			&urfave.Float64Flag{Name: "node-eviction-rate", Value: config.NodeEvictionRate, Usage: "nodes per second whose pods may be evicted in a healthy zone", EnvVars: env("NODE_EVICTION_RATE"), Destination: &nl.NodeEvictionRate},
			&urfave.Float64Flag{Name: "secondary-node-eviction-rate", Value: config.SecondaryNodeEvictionRate, Usage: "nodes per second whose pods may be evicted in a partly failing large zone", EnvVars: env("SECONDARY_NODE_EVICTION_RATE"), Destination: &nl.SecondaryNodeEvictionRate},
			&urfave.IntFlag{Name: "large-cluster-size-threshold", Value: config.LargeClusterSizeThreshold, Usage: "zone size above which the secondary eviction rate applies", EnvVars: env("LARGE_CLUSTER_SIZE_THRESHOLD"), Destination: &nl.LargeClusterSizeThreshold},
			&urfave.Float64Flag{Name: "unhealthy-zone-threshold", Value: config.UnhealthyZoneThreshold, Usage: "fraction of NotReady nodes at which a zone counts as partly failing", EnvVars: env("UNHEALTHY_ZONE_THRESHOLD"), Destination: &nl.UnhealthyZoneThreshold},
			// kube-controller-manager's pod garbage collector.
			&urfave.IntFlag{Name: "terminated-pod-gc-threshold", Value: config.TerminatedPodGCThreshold, Usage: "finished pods kept before the oldest are deleted (0: keep all)", EnvVars: env("TERMINATED_POD_GC_THRESHOLD"), Destination: &gc.TerminatedPodThreshold},
			&urfave.DurationFlag{Name: "pod-gc-quarantine", Value: config.PodGCQuarantine, Usage: "how long a pod's Node must stay missing before its pods are deleted", EnvVars: env("POD_GC_QUARANTINE"), Destination: &gc.Quarantine},
			// kube-scheduler's backoff, upstream defaults.
			&urfave.DurationFlag{Name: "pod-initial-backoff", Value: config.PodInitialBackoff, Usage: "first retry delay for a pod that could not be scheduled", EnvVars: env("POD_INITIAL_BACKOFF"), Destination: &sb.Initial},
			&urfave.DurationFlag{Name: "pod-max-backoff", Value: config.PodMaxBackoff, Usage: "longest retry delay for a pod that could not be scheduled", EnvVars: env("POD_MAX_BACKOFF"), Destination: &sb.Max},
		}, agentFlags(&o.agent)...),
		Action: func(c *urfave.Context) error {
			o.server.Disable = disabled(c.StringSlice("disable"))
			return run(c.Context, o)
		},
	}
}

// disabled is --disable's names: urfave splits each value at commas
// already; spaces around them and empty names are dropped.
func disabled(values []string) []string {
	var names []string
	for _, v := range values {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	return names
}

// serverConfig is the control plane's config, once the flags are parsed.
func (o *serverOptions) serverConfig() (server.Config, error) {
	mode, err := strconv.ParseUint(o.kubeconfigMode, 8, 32)
	if err != nil {
		return server.Config{}, fmt.Errorf("--write-kubeconfig-mode %q: not an octal file mode", o.kubeconfigMode)
	}
	cfg := o.server
	cfg.KubeconfigMode = os.FileMode(mode)
	if cfg.StorageMinFree, err = apiserver.ParseMinFree(o.storageMinFree); err != nil {
		return server.Config{}, err
	}
	if cfg.Token, err = secretFrom(cfg.Token, o.tokenFile, "token"); err != nil {
		return server.Config{}, err
	}
	if cfg.AgentToken, err = secretFrom(cfg.AgentToken, o.agentTokenFile, "agent-token"); err != nil {
		return server.Config{}, err
	}
	// Joining agents use the server's backend, so a wrong name stops the
	// server, even without an agent of its own, rather than every agent.
	if _, err := nodenet.Lookup(o.agent.NodeNetwork); err != nil {
		return server.Config{}, fmt.Errorf("--flannel-backend: %w", err)
	}
	cfg.NodeNetwork = o.agent.NodeNetwork
	return cfg, nil
}

// runServer starts the control plane, then, unless --disable-agent, the
// local agent as one of its clients, and serves until SIGINT or SIGTERM.
func runServer(ctx context.Context, o *serverOptions) error {
	if o.debug {
		logrus.SetLevel(logrus.DebugLevel)
	}
	cfg, err := o.serverConfig()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go resident.TrimAfter(ctx, config.ResidentTrimDelay)
	s, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	if !o.disableAgent {
		ac := localAgent(o.agent, cfg, s)
		// The local agent's name is claimed as a joining agent's would be.
		password, err := serverjoin.LoadOrCreatePassword(filepath.Join(ac.DataDir, "agent", agentjoin.PasswordFile))
		if err == nil {
			err = s.ClaimNode(ctx, password)
		}
		if err != nil {
			stop()
			_ = s.Wait()
			return err
		}
		// A client of the server: at shutdown it stops while the API
		// still answers. If it fails on its own, the server stops too,
		// as k3s does: a server whose node cannot run is not the
		// one-command cluster that was asked for.
		agentErr := make(chan error, 1)
		s.Go("agent", func(ctx context.Context) error {
			err := agent.Run(ctx, ac, agent.Credentials{Node: s.NodeConfig, Proxy: s.ProxyConfig, Provisioner: s.ProvisionerConfig})
			if err != nil && ctx.Err() == nil {
				agentErr <- err
				stop()
			}
			return err
		})
		werr := s.Wait()
		select {
		case err := <-agentErr:
			return fmt.Errorf("the local agent stopped: %w (--disable-agent runs the control plane without a node)", err)
		default:
			return werr
		}
	}
	return s.Wait()
}

// localAgent completes the local agent's config from the server's: the
// same data dir, node and cluster networks, on a control-plane node.
func localAgent(ac agent.Config, cfg server.Config, s *server.Server) agent.Config {
	ac.DataDir, ac.NodeName = cfg.DataDir, s.NodeName
	ac.ClusterCIDR, ac.ClusterDNS, ac.ClusterDomain = cfg.ClusterCIDR, cfg.ClusterDNS, cfg.ClusterDomain
	if ac.NodeIP == "" {
		ac.NodeIP = s.AdvertiseAddress
	}
	return ac
}
