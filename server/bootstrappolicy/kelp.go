package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kelp-project/kelp/config"
)

// What kelp adds to upstream's policy, for its own components.

// kelpControllers are the upstream controllers kelp's controller manager
// runs (server/controlplane.go). They all run as one identity,
// system:kube-controller-manager (kube-controller-manager's
// --use-service-account-credentials=false), so that user is added to each
// one's upstream binding next to the ServiceAccount upstream names: the
// controllers hold exactly their upstream rights, and no more. kelp's
// servicelb writes LoadBalancer status as upstream's service controller
// does, and node IPAM sets podCIDRs as the node controller may. kelp's
// nodepassword controller (a deleted Node's password Secret in
// kube-system goes with it) needs only what system:kube-controller-manager
// already grants: list and watch of Nodes, delete of Secrets.
func kelpControllers() map[string]bool {
	return map[string]bool{
		"deployment-controller": true, "replicaset-controller": true, "replication-controller": true,
		"service-account-controller": true, "root-ca-cert-publisher": true,
		"namespace-controller": true, "generic-garbage-collector": true,
		"endpoint-controller": true, "endpointslice-controller": true,
		"node-controller": true, "service-controller": true,
		"endpointslicemirroring-controller":           true,
		"clusterrole-aggregation-controller":          true,
		"daemon-set-controller":                       true,
		"statefulset-controller":                      true,
		"disruption-controller":                       true,
		"pod-garbage-collector":                       true,
		"job-controller":                              true,
		"cronjob-controller":                          true,
		"ttl-after-finished-controller":               true,
		"storage-version-migrator-controller":         true,
		"persistent-volume-binder":                    true,
		"pvc-protection-controller":                   true,
		"pv-protection-controller":                    true,
		"resourcequota-controller":                    true,
		"validatingadmissionpolicy-status-controller": true,
		"horizontal-pod-autoscaler":                   true,
	}
}

// Cluster DNS has no upstream role: kubeadm's addon creates the kube-dns
// Service as an administrator and CoreDNS runs as a pod. In kelp the
// controller manager creates the Service, and each node's DNS (running
// with the proxy's identity) publishes its own EndpointSlice of it in
// kube-system.
const (
	dnsServiceRoleName   = "kelp:cluster-dns-service"
	dnsEndpointsRoleName = "kelp:cluster-dns-endpoints"
)

func kelpDNSServiceRole() rbacv1.Role {
	return namespacedRole("kube-system", dnsServiceRoleName,
		verbs("create").groups(legacy).resources("services"))
}

func kelpDNSEndpointsRole() rbacv1.Role {
	return namespacedRole("kube-system", dnsEndpointsRoleName,
		verbs("get", "create", "update").groups(discovery).resources("endpointslices"))
}

func kelpDNSServiceBinding() rbacv1.RoleBinding {
	return roleBinding("kube-system", dnsServiceRoleName, users(KubeControllerUser)...)
}

func kelpDNSEndpointsBinding() rbacv1.RoleBinding {
	return roleBinding("kube-system", dnsEndpointsRoleName, users(KubeProxyUser)...)
}

// The node's half of local storage (config/storage.go): every node's
// local-path provisioner runs as one shared identity, as the proxy does,
// and creates and deletes the PersistentVolumes of its node's claims. The
// Node authorizer never lets a kubelet write a PersistentVolume (nor should
// it: a PV is cluster-wide), so the provisioner gets exactly what
// upstream's external-provisioner sidecar is granted in its RBAC manifest,
// and no more: PVs written, claims annotated, classes and nodes read,
// events recorded.
const localPathProvisionerRoleName = "kelp:local-path-provisioner"

func kelpLocalPathProvisionerRole() rbacv1.ClusterRole {
	return clusterRole(localPathProvisionerRoleName,
		verbs("get", "list", "watch", "create", "delete", "update", "patch").groups(legacy).resources("persistentvolumes"),
		verbs("get", "list", "watch", "update", "patch").groups(legacy).resources("persistentvolumeclaims"),
		verbs("get", "list", "watch").groups(storage).resources("storageclasses"),
		verbs("get", "list", "watch").groups(legacy).resources("nodes"),
		eventsRule())
}

func kelpLocalPathProvisionerBinding() rbacv1.ClusterRoleBinding {
	return clusterBinding(localPathProvisionerRoleName, users(config.LocalPathProvisionerUser)...)
}
