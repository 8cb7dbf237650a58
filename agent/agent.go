// Package agent is the node side of kelp: it supervises containerd,
// imports the air-gap images, sets up the pod network and runs the
// kubelet. `kelp server` runs it in-process (unless --disable-agent);
// `kelp agent` runs it alone.
package agent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/kelp-project/kelp/agent/kubelet"
	"github.com/kelp-project/kelp/agent/localpath"
	"github.com/kelp-project/kelp/config"
	"github.com/kelp-project/kelp/embedded/containerd"
	"github.com/kelp-project/kelp/hostcheck"
	"github.com/kelp-project/kelp/netplane/dns"
	"github.com/kelp-project/kelp/netplane/nodenet"
	"github.com/kelp-project/kelp/netplane/proxy"
	"github.com/kelp-project/kelp/runtime"
)

// Config holds the agent's settings (flags of `kelp agent`, or derived
// from `kelp server`'s).
type Config struct {
	DataDir  string // <data-dir>; the agent uses <data-dir>/agent
	NodeName string
	NodeIP   string
	Version  string
	// ContainerRuntimeEndpoint uses an existing containerd instead of a
	// supervised one.
	ContainerRuntimeEndpoint string
	// ContainerdSocket is the supervised containerd's socket
	// (default /run/kelp/containerd/containerd.sock).
	ContainerdSocket string
	// RunDir holds runtime files: netns pins, runc state (default /run/kelp).
	RunDir      string
	LogRoot     string // container logs (default /var/log/pods)
	KubeletPort int    // the kubelet's HTTPS endpoint (10250; 0 picks a free port)
	CgroupRoot  string // default /kubepods
	// CgroupDriver is auto (the default), cgroupfs or systemd.
	CgroupDriver string
	// PodPidsLimit is each pod cgroup's pids.max (<= 0: no limit).
	PodPidsLimit  int64
	ClusterCIDR   string
	ClusterDNS    string
	ClusterDomain string
	// CrashLoopMaxBackoff caps container restart delays (upstream: 5 min).
	CrashLoopMaxBackoff time.Duration
	// DNSPort is where the node's cluster DNS listens on NodeIP (53).
	DNSPort int
	// DisableProxy and DisableDNS leave services and DNS to something else.
	DisableProxy, DisableDNS bool
	// NodeNetwork names the pod network backend (k3s's --flannel-backend;
	// netplane/nodenet lists them). Empty means nodenet.Default.
	NodeNetwork string
	// FlannelIface is the interface the overlay uses (--flannel-iface; ""
	// = the one holding NodeIP).
	FlannelIface string
	// KubeletServingCertFile and KubeletServingKeyFile are the kubelet
	// endpoint's certificate (issued at join); empty makes a self-signed
	// one.
	KubeletServingCertFile, KubeletServingKeyFile string
}

// paths resolves the agent's state and runtime directories and the
// supervised containerd's socket, the same for Run and KillAll.
func (c Config) paths() (agentDir, runDir, containerdSocket string) {
	runDir = c.RunDir
	if runDir == "" {
		runDir = config.RunDir
	}
	containerdSocket = c.ContainerdSocket
	if containerdSocket == "" {
		containerdSocket = filepath.Join(runDir, "containerd", "containerd.sock")
	}
	return filepath.Join(c.DataDir, "agent"), runDir, containerdSocket
}

// Credentials are the agent's identities towards the API server: the
// kubelet's (system:node:<name>), the service proxy's and DNS's
// (system:kube-proxy) and the local-path provisioner's
// (config.LocalPathProvisionerUser). A nil Proxy or Provisioner uses
// Node's (a kubeconfig given by hand).
type Credentials struct {
	Node, Proxy, Provisioner *rest.Config
}

// Run runs the agent until ctx ends. containerd and the pods keep running
// afterwards: the data plane outlives kelp.
func Run(ctx context.Context, cfg Config, creds Credentials) error {
	rc := creds.Node
	agentDir, runDir, sock := cfg.paths()
	// Checked first: a wrong name fails before anything is started.
	nodeNet, err := nodenet.Lookup(cfg.NodeNetwork)
	if err != nil {
		return fmt.Errorf("--flannel-backend: %w", err)
	}
	cg, err := cfg.cgroups()
	if err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	reportCgroups(cg, hostcheck.Local().Cgroups())
	if err := os.MkdirAll(filepath.Join(agentDir, "images"), 0o755); err != nil {
		return err
	}
	if cfg.ContainerRuntimeEndpoint == "" {
		if err := claimRunDir(runDir, cfg.DataDir, sock); err != nil {
			return err
		}
	}
	address := cfg.ContainerRuntimeEndpoint
	if address == "" {
		sup, err := containerd.Start(ctx, containerd.Config{Dir: agentDir, Address: sock})
		if err != nil {
			return fmt.Errorf("containerd: %w", err)
		}
		address = sup.Address()
	}
	rt, err := runtime.New(ctx, runtime.Options{Address: address, StateDir: filepath.Join(runDir, "runtime"),
		CgroupRoot: cfg.CgroupRoot, CgroupDriver: cfg.CgroupDriver, Cgroups: cg, LogRoot: cfg.LogRoot})
	if err != nil {
		return err
	}
	go rt.WatchImageDir(ctx, filepath.Join(agentDir, "images"))

	clientCA := rc.CAData
	if len(clientCA) == 0 && rc.CAFile != "" {
		if clientCA, err = os.ReadFile(rc.CAFile); err != nil {
			return err
		}
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	// The proxy's identity reads what the whole cluster's Services and
	// Nodes are; the node's may read only what its own pods need.
	proxyClient := kubernetes.Interface(client)
	if creds.Proxy != nil {
		if proxyClient, err = kubernetes.NewForConfig(creds.Proxy); err != nil {
			return err
		}
	}
	events, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: cfg.NodeName})

	k := kubelet.New(kubelet.Config{
		NodeName: cfg.NodeName, NodeIP: cfg.NodeIP, DataDir: agentDir,
		Version: cfg.Version, ClusterDNS: cfg.ClusterDNS, ClusterDomain: cfg.ClusterDomain,
		CgroupRoot: cfg.CgroupRoot, PodPidsLimit: cfg.PodPidsLimit, LogRoot: cfg.LogRoot, CrashLoopMaxBackoff: cfg.CrashLoopMaxBackoff,
		KubeletPort: cfg.KubeletPort, ClientCA: clientCA,
		ServingCertFile: cfg.KubeletServingCertFile, ServingKeyFile: cfg.KubeletServingKeyFile,
		NewNetwork: func(podCIDR string) (kubelet.Network, error) {
			return nodeNet.New(nodenet.Options{PodCIDR: podCIDR, ClusterCIDR: cfg.ClusterCIDR, AgentDir: agentDir, RunDir: runDir,
				Context: ctx, Client: proxyClient, NodeClient: client, NodeName: cfg.NodeName, NodeIP: cfg.NodeIP, Iface: cfg.FlannelIface})
		},
	}, client, rt, recorder)
	logrus.Infof("agent: node %s, containerd at %s", cfg.NodeName, address)
	if err := startNetplane(ctx, cfg, proxyClient); err != nil {
		return err
	}
	// The provisioner's identity writes PersistentVolumes, which the
	// node's may not.
	provisionerClient := kubernetes.Interface(client)
	if creds.Provisioner != nil {
		if provisionerClient, err = kubernetes.NewForConfig(creds.Provisioner); err != nil {
			return err
		}
	}
	stopProvisioner := startProvisioner(ctx, cfg, provisionerClient)
	defer stopProvisioner()
	return k.Run(ctx)
}

// startProvisioner runs the node's local-path provisioner on its own
// informers, recording Events as itself; the returned func stops the
// recording.
func startProvisioner(ctx context.Context, cfg Config, client kubernetes.Interface) func() {
	factory := informers.NewSharedInformerFactory(client, 0)
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: localpath.EventComponent(cfg.NodeName), Host: cfg.NodeName})
	p := localpath.New(localpath.Config{NodeName: cfg.NodeName, DataDir: cfg.DataDir}, client, factory, recorder)
	factory.Start(ctx.Done())
	go p.Run(ctx)
	return broadcaster.Shutdown
}

// startNetplane runs the service proxy and the cluster DNS, each a client
// of the API through one shared informer factory.
func startNetplane(ctx context.Context, cfg Config, client kubernetes.Interface) error {
	factory := informers.NewSharedInformerFactory(client, 0)
	if !cfg.DisableProxy {
		ip, err := netip.ParseAddr(cfg.NodeIP)
		if err != nil {
			return fmt.Errorf("node IP %q: %w", cfg.NodeIP, err)
		}
		p, err := proxy.New(proxy.Config{NodeName: cfg.NodeName, NodeIPs: []netip.Addr{ip}, ClusterCIDR: cfg.ClusterCIDR}, client, factory)
		if err != nil {
			return fmt.Errorf("service proxy: %w", err)
		}
		go p.Run(ctx)
	}
	if !cfg.DisableDNS {
		port := cfg.DNSPort
		if port == 0 {
			port = config.DNSPort
		}
		var clients []netip.Prefix
		if cfg.ClusterCIDR != "" {
			cidr, err := netip.ParsePrefix(cfg.ClusterCIDR)
			if err != nil {
				return fmt.Errorf("cluster CIDR %q: %w", cfg.ClusterCIDR, err)
			}
			clients = append(clients, cidr)
		}
		d, err := dns.New(dns.Config{Domain: cfg.ClusterDomain, Listen: []string{net.JoinHostPort(cfg.NodeIP, strconv.Itoa(port))},
			Clients: clients}, factory)
		if err != nil {
			return fmt.Errorf("cluster DNS: %w", err)
		}
		go func() {
			if err := d.Run(ctx); err != nil {
				logrus.WithError(err).Error("cluster DNS stopped")
			}
		}()
		go dns.PublishEndpoint(ctx, client, cfg.NodeName, cfg.NodeIP, int32(port))
		dns.WatchService(ctx, factory.Core().V1().Services().Informer(), cfg.ClusterDNS)
	}
	factory.Start(ctx.Done())
	return nil
}
