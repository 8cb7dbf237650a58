package config

// Identities: the users and groups carried by the client certificates the
// cluster CA issues (CN = user, O = groups). They follow upstream, so audit
// logs and RBAC read as they do on any cluster; the issuer (server) and the
// checker (the API server's authorizer, the kubelet) must agree on them.
const (
	// AdminUser is the admin kubeconfig's and the token's user.
	AdminUser = "kelp-admin"
	// MastersGroup is cluster-admin, bypassing authorization.
	MastersGroup = "system:masters"
	// ControllerManagerUser and SchedulerUser are the in-process control
	// loops.
	ControllerManagerUser = "system:kube-controller-manager"
	SchedulerUser         = "system:kube-scheduler"
	// ProxyUser is the service proxy (kube-proxy).
	ProxyUser = "system:kube-proxy"
	// APIServerKubeletClientUser is the API server towards kubelets (logs,
	// exec, port-forward): the only user, besides MastersGroup, a kubelet
	// serves.
	APIServerKubeletClientUser = "system:kube-apiserver-kubelet-client"
	// AuthProxyUser is the aggregator towards extension API servers (k3s's
	// front-proxy client certificate), signed by the request-header CA:
	// extension servers trust the X-Remote-* headers of this name only
	// (requestheader-allowed-names).
	AuthProxyUser = "system:auth-proxy"
	// SupervisorUser is the join endpoints' identity towards the API (k3s's
	// supervisor): it reads bootstrap tokens and keeps node passwords,
	// Secrets in kube-system. It holds system:masters.
	SupervisorUser = "system:kelp-supervisor"
	// APIServerUser is the API server's own loopback client (upstream's
	// system:apiserver, in MastersGroup): it reconciles the RBAC bootstrap
	// policy at start.
	APIServerUser = "system:apiserver"
	// DeployUser applies the auto-deploy manifests directory
	// (server/manifests). It holds system:masters, as k3s's deploy
	// controller does: a manifest may hold any object, RBAC included.
	DeployUser = "system:kelp-deploy"
	// NodesGroup holds every node's user, NodeUser(name).
	NodesGroup = "system:nodes"
)

// NodeUserPrefix starts every node's user.
const NodeUserPrefix = "system:node:"

// NodeUser is the user of the node agent on node name.
func NodeUser(name string) string { return NodeUserPrefix + name }
