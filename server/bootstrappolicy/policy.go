package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kelp-project/kelp/config"
)

// Well-known users and groups of the policy.
const (
	AuthenticatedGroup   = "system:authenticated"
	UnauthenticatedGroup = "system:unauthenticated"
	ServiceAccountsGroup = "system:serviceaccounts"
	MonitoringGroup      = "system:monitoring"
)

// kelp's components are upstream's users (config/identity.go).
const (
	KubeControllerUser = config.ControllerManagerUser
	KubeSchedulerUser  = config.SchedulerUser
	KubeProxyUser      = config.ProxyUser
)

// ClusterRoles are upstream's bootstrap cluster roles, the controllers'
// (system:controller:*) included.
func ClusterRoles() []rbacv1.ClusterRole {
	roles := []rbacv1.ClusterRole{
		// Everything, everywhere.
		clusterRole("cluster-admin",
			verbs("*").groups("*").resources("*"),
			verbs("*").urls("*")),
		// Enough to learn whether the server is up and which APIs it has.
		clusterRole("system:discovery",
			verbs("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/",
				"/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*")),
		clusterRole("system:monitoring",
			verbs("get").urls("/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz",
				"/livez/*", "/readyz/*", "/healthz/*"),
			verbs("get").groups(legacy).resources("nodes/metrics")),
		// What a user may learn about themselves.
		clusterRole("system:basic-user",
			verbs("create").groups(authorization).resources("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			verbs("create").groups(authentication).resources("selfsubjectreviews")),
		// Insensitive cluster information, for everyone.
		clusterRole("system:public-info-viewer",
			verbs("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/")),

		// The user-facing roles are aggregated from the aggregate-to-*
		// roles below (and anything else carrying their labels).
		aggregated("admin", nil, aggregateToAdmin),
		aggregated("edit", map[string]string{aggregateToAdmin: "true"}, aggregateToEdit),
		aggregated("view", map[string]string{aggregateToEdit: "true"}, aggregateToView),
		{ObjectMeta: meta("system:aggregate-to-admin", map[string]string{aggregateToAdmin: "true"}), Rules: rules(
			verbs("create").groups(authorization).resources("localsubjectaccessreviews"),
			verbs(readWrite...).groups(rbacGroup).resources("roles", "rolebindings"))},
		{ObjectMeta: meta("system:aggregate-to-edit", map[string]string{aggregateToEdit: "true"}), Rules: editRules()},
		{ObjectMeta: meta("system:aggregate-to-view", map[string]string{aggregateToView: "true"}), Rules: viewRules()},

		clusterRole("system:heapster",
			verbs(read...).groups(legacy).resources("events", "pods", "nodes", "namespaces"),
			verbs(read...).groups(extensions).resources("deployments")),
		{ObjectMeta: meta("system:node", nil), Rules: nodeRules()},
		clusterRole("system:node-problem-detector",
			verbs("get").groups(legacy).resources("nodes"),
			verbs("patch").groups(legacy).resources("nodes/status"),
			eventsRule()),
		clusterRole("system:kubelet-api-admin",
			verbs("get", "list", "watch").groups(legacy).resources("nodes"),
			verbs("proxy").groups(legacy).resources("nodes"),
			verbs("*").groups(legacy).resources("nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log"),
			verbs("*").groups(legacy).resources("nodes/pods", "nodes/healthz", "nodes/configz")),
		clusterRole("system:node-bootstrapper",
			verbs("create", "get", "list", "watch").groups(certificates).resources("certificatesigningrequests")),
		clusterRole("system:auth-delegator",
			verbs("create").groups(authentication).resources("tokenreviews"),
			verbs("create").groups(authorization).resources("subjectaccessreviews")),
		clusterRole("system:kube-aggregator",
			verbs(read...).groups(legacy).resources("services", "endpoints")),
		clusterRole("system:kube-controller-manager",
			eventsRule(),
			// Leader election: create any lease, and use its own.
			verbs("create").groups(coordination).resources("leases"),
			verbs("get", "update").groups(coordination).resources("leases").names("kube-controller-manager"),
			// The service-account token controller and the
			// --use-service-account-credentials client builder.
			verbs("create").groups(legacy).resources("secrets", "serviceaccounts"),
			verbs("delete").groups(legacy).resources("secrets"),
			verbs("get").groups(legacy).resources("configmaps", "namespaces", "secrets", "serviceaccounts"),
			verbs("update").groups(legacy).resources("secrets", "serviceaccounts"),
			verbs("create").groups(authentication).resources("tokenreviews"),
			verbs("create").groups(authorization).resources("subjectaccessreviews"),
			// Every controller's informers.
			verbs("list", "watch").groups("*").resources("*"),
			verbs("create").groups(legacy).resources("serviceaccounts/token")),
		clusterRole("system:kube-dns",
			verbs("list", "watch").groups(legacy).resources("endpoints", "services")),
		clusterRole("system:persistent-volume-provisioner",
			verbs("get", "list", "watch", "create", "delete").groups(legacy).resources("persistentvolumes"),
			verbs("get", "list", "watch", "update").groups(legacy).resources("persistentvolumeclaims"),
			verbs(read...).groups(storage).resources("storageclasses"),
			verbs("watch").groups(legacy).resources("events"),
			eventsRule()),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient",
			verbs("create").groups(certificates).resources("certificatesigningrequests/nodeclient")),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
			verbs("create").groups(certificates).resources("certificatesigningrequests/selfnodeclient")),
		clusterRole("system:volume-scheduler",
			verbs("get", "list", "watch", "update", "patch").groups(legacy).resources("persistentvolumes"),
			verbs(read...).groups(storage).resources("storageclasses"),
			verbs("get", "list", "watch", "update", "patch").groups(legacy).resources("persistentvolumeclaims")),
		clusterRole("system:certificates.k8s.io:legacy-unknown-approver",
			verbs("approve").groups(certificates).resources("signers").names("kubernetes.io/legacy-unknown")),
		clusterRole("system:certificates.k8s.io:kubelet-serving-approver",
			verbs("approve").groups(certificates).resources("signers").names("kubernetes.io/kubelet-serving")),
		clusterRole("system:certificates.k8s.io:kube-apiserver-client-approver",
			verbs("approve").groups(certificates).resources("signers").names("kubernetes.io/kube-apiserver-client")),
		clusterRole("system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
			verbs("approve").groups(certificates).resources("signers").names("kubernetes.io/kube-apiserver-client-kubelet")),
		clusterRole("system:service-account-issuer-discovery",
			verbs("get").urls("/.well-known/openid-configuration", "/.well-known/openid-configuration/",
				"/openid/v1/jwks", "/openid/v1/jwks/")),
		clusterRole("system:node-proxier",
			verbs("list", "watch").groups(legacy).resources("services", "endpoints"),
			verbs(read...).groups(legacy).resources("nodes"),
			eventsRule(),
			verbs("list", "watch").groups(discovery).resources("endpointslices")),
		clusterRole("system:kube-scheduler",
			eventsRule(),
			verbs("create").groups(coordination).resources("leases"),
			verbs("get", "update", "list", "watch").groups(coordination).resources("leases").names("kube-scheduler"),
			verbs(readWrite...).groups(coordination).resources("leasecandidates"),
			verbs(read...).groups(legacy).resources("nodes"),
			verbs("get", "list", "watch", "delete").groups(legacy).resources("pods"),
			verbs("create").groups(legacy).resources("pods/binding", "bindings"),
			verbs("patch", "update").groups(legacy).resources("pods/status"),
			verbs(read...).groups(legacy).resources("services", "replicationcontrollers"),
			verbs(read...).groups(apps, extensions).resources("replicasets"),
			verbs(read...).groups(apps).resources("statefulsets"),
			verbs(read...).groups(policy).resources("poddisruptionbudgets"),
			verbs(read...).groups(legacy).resources("persistentvolumeclaims", "persistentvolumes"),
			verbs("create").groups(authentication).resources("tokenreviews"),
			verbs("create").groups(authorization).resources("subjectaccessreviews"),
			verbs(read...).groups(storage).resources("csinodes"),
			verbs(read...).groups(storage).resources("volumeattachments"),
			verbs(read...).groups(legacy).resources("namespaces"),
			verbs(read...).groups(storage).resources("csidrivers"),
			verbs(read...).groups(storage).resources("csistoragecapacities")),
		// Trust anchors are public: every service account may read them.
		clusterRole("system:cluster-trust-bundle-discovery",
			verbs(read...).groups(certificates).resources("clustertrustbundles")),
	}
	roles = append(roles, kelpLocalPathProvisionerRole())
	return append(roles, controllerRoles()...)
}

func editRules() []rbacv1.PolicyRule {
	return rules(
		verbs(read...).groups(legacy).resources("pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"),
		verbs("impersonate").groups(legacy).resources("serviceaccounts"),
		verbs(write...).groups(legacy).resources("pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
		verbs("create").groups(legacy).resources("pods/eviction"),
		verbs(write...).groups(legacy).resources("replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets"),
		verbs("create").groups(legacy).resources("serviceaccounts/token"),
		verbs(write...).groups(legacy, events).resources("events"),
		verbs(write...).groups(apps).resources("statefulsets", "statefulsets/scale", "daemonsets", "deployments",
			"deployments/scale", "deployments/rollback", "replicasets", "replicasets/scale"),
		verbs(write...).groups(autoscaling).resources("horizontalpodautoscalers"),
		verbs(write...).groups(batch).resources("jobs", "cronjobs"),
		verbs(write...).groups(extensions).resources("daemonsets", "deployments", "deployments/scale", "deployments/rollback",
			"ingresses", "replicasets", "replicasets/scale", "replicationcontrollers/scale", "networkpolicies"),
		verbs(write...).groups(policy).resources("poddisruptionbudgets"),
		verbs(write...).groups(networking).resources("networkpolicies", "ingresses"),
		verbs(readWrite...).groups(coordination).resources("leases"),
	)
}

// viewRules read what is not sensitive: no Secrets, no roles.
func viewRules() []rbacv1.PolicyRule {
	return rules(
		verbs(read...).groups(legacy).resources("pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"),
		verbs(read...).groups(legacy).resources("limitranges", "resourcequotas", "bindings", "pods/log", "pods/status",
			"replicationcontrollers/status", "resourcequotas/status", "namespaces/status"),
		verbs(read...).groups(legacy).resources("namespaces"),
		verbs(read...).groups(legacy, events).resources("events"),
		verbs(read...).groups(discovery).resources("endpointslices"),
		verbs(read...).groups(apps).resources("controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
			"daemonsets", "daemonsets/status", "deployments", "deployments/status", "deployments/scale",
			"replicasets", "replicasets/status", "replicasets/scale"),
		verbs(read...).groups(autoscaling).resources("horizontalpodautoscalers", "horizontalpodautoscalers/status"),
		verbs(read...).groups(batch).resources("jobs", "cronjobs", "cronjobs/status", "jobs/status"),
		verbs(read...).groups(extensions).resources("daemonsets", "daemonsets/status", "deployments", "deployments/scale",
			"deployments/status", "ingresses", "ingresses/status", "replicasets", "replicasets/scale", "replicasets/status",
			"replicationcontrollers/scale", "networkpolicies"),
		verbs(read...).groups(policy).resources("poddisruptionbudgets", "poddisruptionbudgets/status"),
		verbs(read...).groups(networking).resources("networkpolicies", "ingresses", "ingresses/status"),
	)
}

// nodeRules are system:node's, which upstream binds to nobody: the Node
// authorizer decides for kubelets.
func nodeRules() []rbacv1.PolicyRule {
	return rules(
		verbs("create").groups(authentication).resources("tokenreviews"),
		verbs("create").groups(authorization).resources("subjectaccessreviews", "localsubjectaccessreviews"),
		verbs(read...).groups(legacy).resources("services"),
		verbs("create", "get", "list", "watch").groups(legacy).resources("nodes"),
		verbs("update", "patch").groups(legacy).resources("nodes/status"),
		verbs("update", "patch").groups(legacy).resources("nodes"),
		verbs("create", "update", "patch").groups(legacy, events).resources("events"),
		verbs(read...).groups(legacy).resources("pods"),
		verbs("create", "delete").groups(legacy).resources("pods"),
		verbs("update", "patch").groups(legacy).resources("pods/status"),
		verbs("create").groups(legacy).resources("pods/eviction"),
		verbs("get", "list", "watch").groups(legacy).resources("secrets", "configmaps"),
		verbs("get").groups(legacy).resources("persistentvolumeclaims", "persistentvolumes"),
		verbs("get").groups(legacy).resources("endpoints"),
		verbs("create", "get", "list", "watch").groups(certificates).resources("certificatesigningrequests"),
		verbs("get", "create", "update", "patch", "delete").groups(coordination).resources("leases"),
		verbs("get").groups(storage).resources("volumeattachments"),
		verbs("create").groups(legacy).resources("serviceaccounts/token"),
		verbs("get", "update", "patch").groups(legacy).resources("persistentvolumeclaims/status"),
		verbs("get", "watch", "list").groups(storage).resources("csidrivers"),
		verbs("get", "create", "update", "patch", "delete").groups(storage).resources("csinodes"),
		verbs("get", "list", "watch").groups("node.k8s.io").resources("runtimeclasses"),
		// The kubelet's clusterTrustBundle projected volumes.
		verbs("get", "list", "watch").groups(certificates).resources("clustertrustbundles"),
	)
}

// ClusterRoleBindings are upstream's bootstrap cluster role bindings,
// the controllers' included, plus kelp's (kelp.go).
func ClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	bindings := []rbacv1.ClusterRoleBinding{
		clusterBinding("cluster-admin", groups(config.MastersGroup)...),
		clusterBinding("system:monitoring", groups(MonitoringGroup)...),
		clusterBinding("system:discovery", groups(AuthenticatedGroup)...),
		clusterBinding("system:basic-user", groups(AuthenticatedGroup)...),
		clusterBinding("system:public-info-viewer", groups(AuthenticatedGroup, UnauthenticatedGroup)...),
		clusterBinding("system:node-proxier", users(KubeProxyUser)...),
		clusterBinding("system:kube-controller-manager", users(KubeControllerUser)...),
		clusterBinding("system:kube-dns", serviceAccount("kube-system", "kube-dns")),
		clusterBinding("system:kube-scheduler", users(KubeSchedulerUser)...),
		clusterBinding("system:volume-scheduler", users(KubeSchedulerUser)...),
		// Upstream keeps system:node bound to nobody: nodes are the Node
		// authorizer's.
		clusterBinding("system:node"),
		clusterBinding("system:service-account-issuer-discovery", groups(ServiceAccountsGroup)...),
		clusterBinding("system:cluster-trust-bundle-discovery", groups(ServiceAccountsGroup)...),
		kelpLocalPathProvisionerBinding(),
	}
	return append(bindings, controllerBindings()...)
}

// Roles are upstream's namespaced bootstrap roles.
func Roles() []rbacv1.Role {
	leaderLocking := []rule{
		verbs("watch", "get", "list", "create", "update").groups(coordination).resources("leases"),
		verbs("watch", "get", "list", "create", "update").groups(coordination).resources("leasecandidates"),
	}
	return []rbacv1.Role{
		namespacedRole("kube-system", "extension-apiserver-authentication-reader",
			verbs(read...).groups(legacy).resources("configmaps").names("extension-apiserver-authentication")),
		namespacedRole("kube-system", "system::leader-locking-kube-controller-manager", leaderLocking...),
		namespacedRole("kube-system", "system::leader-locking-kube-scheduler", leaderLocking...),
		namespacedRole("kube-system", "system:controller:bootstrap-signer",
			verbs(read...).groups(legacy).resources("secrets")),
		namespacedRole("kube-system", "system:controller:cloud-provider",
			verbs("create", "get", "list", "watch").groups(legacy).resources("configmaps")),
		namespacedRole("kube-system", "system:controller:token-cleaner",
			verbs("delete", "get", "list", "watch").groups(legacy).resources("secrets"),
			eventsRule()),
		namespacedRole("kube-public", "system:controller:bootstrap-signer",
			verbs(read...).groups(legacy).resources("configmaps"),
			verbs("update").groups(legacy).resources("configmaps").names("cluster-info"),
			eventsRule()),
		kelpDNSServiceRole(),
		kelpDNSEndpointsRole(),
	}
}

// RoleBindings are upstream's namespaced bootstrap bindings, plus kelp's.
func RoleBindings() []rbacv1.RoleBinding {
	authReader := roleBinding("kube-system", "extension-apiserver-authentication-reader", users(KubeControllerUser, KubeSchedulerUser)...)
	authReader.Name = "system::extension-apiserver-authentication-reader"
	return []rbacv1.RoleBinding{
		authReader,
		roleBinding("kube-system", "system::leader-locking-kube-controller-manager",
			append(users(KubeControllerUser), serviceAccount("kube-system", "kube-controller-manager"),
				serviceAccount("kube-system", "leader-election-controller"))...),
		roleBinding("kube-system", "system::leader-locking-kube-scheduler",
			append(users(KubeSchedulerUser), serviceAccount("kube-system", "kube-scheduler"))...),
		roleBinding("kube-system", "system:controller:bootstrap-signer", serviceAccount("kube-system", "bootstrap-signer")),
		roleBinding("kube-system", "system:controller:cloud-provider", serviceAccount("kube-system", "cloud-provider")),
		roleBinding("kube-system", "system:controller:token-cleaner", serviceAccount("kube-system", "token-cleaner")),
		roleBinding("kube-public", "system:controller:bootstrap-signer", serviceAccount("kube-system", "bootstrap-signer")),
		kelpDNSServiceBinding(),
		kelpDNSEndpointsBinding(),
	}
}
