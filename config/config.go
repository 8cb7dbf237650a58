// Package config holds kelp's defaults and well-known names, each declared
// once: the CLI's flags take their defaults from here, and the packages that
// fall back on a default when a field is left empty use the same constant.
//
// It imports nothing from kelp, so every layer (cli, server, agent, the
// controllers) may import it without a cycle.
package config

import "time"

// Paths. Tests move every one of them with flags, so that several servers
// and agents can run on one machine.
const (
	// DataDir holds all state: <data-dir>/server and <data-dir>/agent.
	DataDir = "/var/lib/kelp"
	// RunDir holds runtime files: pod netns pins, runc state, the
	// supervised containerd's socket.
	RunDir = "/run/kelp"
	// Kubeconfig is where `kelp server` writes the admin kubeconfig and
	// where `kelp kubectl` looks when KUBECONFIG is unset.
	Kubeconfig = "/etc/kelp/kelp.yaml"
	// KubeconfigMode is the admin kubeconfig's file mode, in octal as the
	// flag takes it: the file carries cluster-admin credentials.
	KubeconfigMode = "0600"
	PodLogDir      = "/var/log/pods"
	CgroupRoot     = "/kubepods"
	// CgroupDriver is --cgroup-driver's default: systemd when systemd
	// runs, cgroupfs otherwise (runtime/cgroups).
	CgroupDriver = "auto"
	// PodPidsLimit is --pod-max-pids's default: no limit, as upstream.
	PodPidsLimit int64 = -1
)

// Networks, as k3s defaults them. The first address of ServiceCIDR is the
// default/kubernetes Service; ClusterDNS must lie inside ServiceCIDR.
const (
	ClusterCIDR          = "10.42.0.0/16"
	ServiceCIDR          = "10.43.0.0/16"
	ServiceNodePortRange = "30000-32767"
	ClusterDNS           = "10.43.0.10"
	ClusterDomain        = "cluster.local"
	// NodeNetwork is the node-network backend (--flannel-backend): vxlan,
	// as in k3s (netplane/nodenet lists the others: host-gw, none).
	NodeNetwork = "vxlan"
	// FlannelIface is the interface carrying the overlay (--flannel-iface);
	// empty means the one holding the node IP.
	FlannelIface = ""
)

// ServiceAccountIssuer is the iss of bound service-account tokens and the
// API server's audience, as k3s sets --service-account-issuer and
// --api-audiences: the API's in-cluster name.
func ServiceAccountIssuer(clusterDomain string) string {
	return "https://kubernetes.default.svc." + clusterDomain
}

// Listeners.
const (
	BindAddress = "0.0.0.0"
	HTTPSPort   = 6443  // the API server
	KubeletPort = 10250 // the kubelet's HTTPS endpoint (logs, exec)
	DNSPort     = 53    // the node's cluster DNS, on the node IP
	VXLANPort   = 8472  // UDP: the VXLAN overlay between nodes (flannel's port)
)

// StorageMinFree is the free space of the data dir's filesystem below which
// the API server refuses writes: 5% of it or 256 MiB, whichever is smaller
// (kelp's own; upstream's kubelet evicts pods below 10%, which is reported
// as DiskPressure, not enforced on the API).
const StorageMinFree = "5%,256Mi"

// Timings. Every one of them is a flag, so tests can shrink it; the values
// are upstream's unless said otherwise.
const (
	EtcdCompactionInterval = 5 * time.Minute
	// ResidentTrimDelay is when a kelp process, started up, gives back
	// the pages only its start needed (package resident). Not a flag:
	// nothing waits on it, it only changes what stays resident.
	ResidentTrimDelay = 20 * time.Second
	// CrashLoopMaxBackoff caps container restart delays.
	CrashLoopMaxBackoff = 5 * time.Minute
	// The tolerations the API server adds to every pod for the
	// not-ready and unreachable NoExecute taints.
	DefaultNotReadyTolerationSeconds    = 300
	DefaultUnreachableTolerationSeconds = 300
)

// BootstrapTokenTTL is how long `kelp token create` makes a token valid
// for, as kubeadm's default.
const BootstrapTokenTTL = 24 * time.Hour

// The API server's request and connection limits: kube-apiserver's
// max-in-flight and keep-alive defaults, and kelp's connection guard
// (server/connlimit.go), which upstream lacks.
const (
	MaxRequestsInFlight         = 400
	MaxMutatingRequestsInFlight = 200
	// IdleConnectionTimeout closes a connection no request has used for
	// that long, HTTP/1.1 and HTTP/2 alike (upstream's, matching
	// http.DefaultTransport's keep-alive).
	IdleConnectionTimeout = 90 * time.Second
	// TLSHandshakeTimeout bounds a connection's TLS handshake, so that
	// half-open handshakes cannot pile up.
	TLSHandshakeTimeout = 10 * time.Second
	// MaxConnectionsPerIP caps the connections without a client
	// certificate from one source address: enough for a node's pods
	// using service-account tokens behind its masquerade, little enough
	// that one address holds tens of MB, not the process's fd limit.
	MaxConnectionsPerIP = 1024
	// MaxConnections caps the API server's open connections below its fd
	// budget: an idle TLS connection costs some 60 KiB (GC headroom
	// included), so the fd limit a service manager gives (a million under
	// k3s's unit) bounds nothing on a box of 1 GiB; 2,048 hold about 130
	// MiB at worst. What Go's runtime keeps once a flood has gone (span
	// and goroutine metadata, fragmentation: some 3.5 KiB per connection
	// it held) is never given back: 4,096 left 14 MiB, over a tenth of
	// an idle server; 2,048 leave half that. Far more than an edge
	// cluster's clients need: connections with a client certificate are
	// never evicted for new ones.
	MaxConnections = 2048
)

// kube-controller-manager's node lifecycle defaults
// (nodelifecycle.DefaultConfig assembles them).
const (
	NodeMonitorPeriod         = 5 * time.Second
	NodeMonitorGracePeriod    = 50 * time.Second
	NodeStartupGracePeriod    = 60 * time.Second
	NodeEvictionRate          = 0.1
	SecondaryNodeEvictionRate = 0.01
	LargeClusterSizeThreshold = 50
	UnhealthyZoneThreshold    = 0.55
)

// kube-controller-manager's pod garbage collector defaults
// (podgc.DefaultConfig): finished pods kept, how long a pod's missing
// Node is quarantined before a GET confirms it gone, how often it looks.
const (
	TerminatedPodGCThreshold = 12500
	PodGCQuarantine          = 40 * time.Second
	PodGCPeriod              = 20 * time.Second
)

// kube-scheduler's retry delays for a pod that could not be scheduled:
// PodInitialBackoff, doubling per attempt up to PodMaxBackoff
// (scheduler.DefaultBackoff).
const (
	PodInitialBackoff = 1 * time.Second
	PodMaxBackoff     = 10 * time.Second
)
