package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

// ControllerRolePrefix starts each controller's role and binding name.
const ControllerRolePrefix = "system:controller:"

// controller is one of upstream's kube-controller-manager loops: its role
// system:controller:<name>, bound to the ServiceAccount kube-system/<name>
// it runs as with --use-service-account-credentials.
type controller struct {
	name  string
	rules []rule
}

// controllers are upstream's, for the kinds kelp serves (no DRA, CSR
// signing or admission-policy controllers).
func controllers() []controller {
	return []controller{
		{"attachdetach-controller", []rule{
			verbs("list", "watch").groups(legacy).resources("persistentvolumes", "persistentvolumeclaims"),
			verbs("get", "list", "watch").groups(legacy).resources("nodes"),
			verbs("patch", "update").groups(legacy).resources("nodes/status"),
			verbs("list", "watch").groups(legacy).resources("pods"),
			eventsRule(),
			verbs("get", "create", "delete", "list", "watch").groups(storage).resources("volumeattachments"),
			verbs("get", "watch", "list").groups(storage).resources("csidrivers"),
			verbs("get", "watch", "list").groups(storage).resources("csinodes")}},
		{"clusterrole-aggregation-controller", []rule{
			// escalate: it writes rules its own role does not hold.
			verbs("escalate", "get", "list", "watch", "update", "patch").groups(rbacGroup).resources("clusterroles")}},
		{"cronjob-controller", []rule{
			verbs("get", "list", "watch", "update").groups(batch).resources("cronjobs"),
			verbs("get", "list", "watch", "create", "update", "delete", "patch").groups(batch).resources("jobs"),
			verbs("update").groups(batch).resources("cronjobs/status"),
			verbs("update").groups(batch).resources("cronjobs/finalizers"),
			verbs("list", "watch", "delete").groups(legacy).resources("pods"),
			eventsRule()}},
		{"daemon-set-controller", []rule{
			verbs("get", "list", "watch").groups(extensions, apps).resources("daemonsets"),
			verbs("update").groups(extensions, apps).resources("daemonsets/status"),
			verbs("update").groups(extensions, apps).resources("daemonsets/finalizers"),
			verbs("list", "watch").groups(legacy).resources("nodes"),
			verbs("list", "watch", "create", "delete", "patch").groups(legacy).resources("pods"),
			verbs("create").groups(legacy).resources("pods/binding"),
			verbs("get", "list", "watch", "create", "delete", "update", "patch").groups(apps).resources("controllerrevisions"),
			eventsRule()}},
		{"deployment-controller", []rule{
			verbs("get", "list", "watch", "update").groups(extensions, apps).resources("deployments"),
			verbs("update").groups(extensions, apps).resources("deployments/status"),
			verbs("update").groups(extensions, apps).resources("deployments/finalizers"),
			verbs("get", "list", "watch", "create", "update", "patch", "delete").groups(apps, extensions).resources("replicasets"),
			// Pods are listed to find orphans and updated to adopt them.
			verbs("get", "list", "watch", "update").groups(legacy).resources("pods"),
			eventsRule()}},
		{"disruption-controller", []rule{
			verbs("get", "list", "watch").groups(extensions, apps).resources("deployments"),
			verbs("get", "list", "watch").groups(apps, extensions).resources("replicasets"),
			verbs("get", "list", "watch").groups(legacy).resources("replicationcontrollers"),
			verbs("get", "list", "watch").groups(policy).resources("poddisruptionbudgets"),
			verbs("get", "list", "watch").groups(apps).resources("statefulsets"),
			verbs("update").groups(policy).resources("poddisruptionbudgets/status"),
			verbs("patch", "update").groups(legacy).resources("pods/status"),
			verbs("get").groups("*").resources("*/scale"),
			eventsRule()}},
		{"endpoint-controller", []rule{
			verbs("get", "list", "watch").groups(legacy).resources("services", "pods"),
			verbs("get", "list", "watch", "create", "update", "delete").groups(legacy).resources("endpoints"),
			verbs("create").groups(legacy).resources("endpoints/restricted"),
			eventsRule()}},
		{"endpointslice-controller", []rule{
			verbs("get", "list", "watch").groups(legacy).resources("services", "pods", "nodes"),
			verbs("update").groups(legacy).resources("services/finalizers"),
			verbs("get", "list", "watch", "create", "update", "delete").groups(discovery).resources("endpointslices"),
			eventsRule()}},
		{"endpointslicemirroring-controller", []rule{
			verbs("get", "list", "watch").groups(legacy).resources("services", "endpoints"),
			verbs("update").groups(legacy).resources("services/finalizers"),
			verbs("update").groups(legacy).resources("endpoints/finalizers"),
			verbs("get", "list", "watch", "create", "update", "delete").groups(discovery).resources("endpointslices"),
			eventsRule()}},
		{"expand-controller", []rule{
			verbs("get", "list", "watch", "update", "patch").groups(legacy).resources("persistentvolumes"),
			verbs("update", "patch").groups(legacy).resources("persistentvolumeclaims/status"),
			verbs("get", "list", "watch").groups(legacy).resources("persistentvolumeclaims"),
			eventsRule()}},
		{"ephemeral-volume-controller", []rule{
			verbs("get", "list", "watch").groups(legacy).resources("pods"),
			verbs("update").groups(legacy).resources("pods/finalizers"),
			verbs("get", "list", "watch", "create").groups(legacy).resources("persistentvolumeclaims"),
			eventsRule()}},
		{"generic-garbage-collector", []rule{
			verbs("get", "list", "watch", "patch", "update", "delete").groups("*").resources("*"),
			eventsRule()}},
		{"horizontal-pod-autoscaler", []rule{
			verbs("get", "list", "watch").groups(autoscaling).resources("horizontalpodautoscalers"),
			verbs("update").groups(autoscaling).resources("horizontalpodautoscalers/status"),
			verbs("get", "update").groups("*").resources("*/scale"),
			verbs("list", "watch").groups(legacy).resources("pods"),
			verbs("list", "watch").groups("metrics.k8s.io").resources("pods"),
			verbs("get", "list", "watch").groups("custom.metrics.k8s.io").resources("*"),
			verbs("get", "list", "watch").groups("external.metrics.k8s.io").resources("*"),
			eventsRule()}},
		{"job-controller", []rule{
			verbs("get", "list", "watch", "update", "patch").groups(batch).resources("jobs"),
			verbs("update").groups(batch).resources("jobs/status"),
			verbs("update").groups(batch).resources("jobs/finalizers"),
			verbs("list", "watch", "create", "delete", "patch").groups(legacy).resources("pods"),
			eventsRule()}},
		{"namespace-controller", []rule{
			verbs("get", "list", "watch", "delete").groups(legacy).resources("namespaces"),
			verbs("update").groups(legacy).resources("namespaces/finalize", "namespaces/status"),
			verbs("get", "list", "watch", "delete", "deletecollection").groups("*").resources("*")}},
		{"node-controller", []rule{
			verbs("get", "list", "watch", "update", "delete", "patch").groups(legacy).resources("nodes"),
			verbs("patch", "update").groups(legacy).resources("nodes/status"),
			verbs("patch", "update").groups(legacy).resources("pods/status"),
			verbs("list", "watch", "delete", "get").groups(legacy).resources("pods"),
			verbs("get", "list", "watch").groups(coordination).resources("leases"),
			eventsRule()}},
		{"persistent-volume-binder", []rule{
			verbs("get", "list", "watch", "update", "create", "delete").groups(legacy).resources("persistentvolumes"),
			verbs("update").groups(legacy).resources("persistentvolumes/status"),
			verbs("get", "list", "watch", "update").groups(legacy).resources("persistentvolumeclaims"),
			verbs("update").groups(legacy).resources("persistentvolumeclaims/status"),
			verbs("list", "watch", "get", "create", "delete").groups(legacy).resources("pods"),
			verbs("get", "list", "watch").groups(storage).resources("storageclasses"),
			verbs("list", "watch").groups(legacy).resources("nodes"),
			verbs("watch").groups(legacy).resources("events"),
			eventsRule()}},
		{"pod-garbage-collector", []rule{
			verbs("list", "watch", "delete").groups(legacy).resources("pods"),
			verbs("get", "list", "watch").groups(legacy).resources("nodes"),
			verbs("patch").groups(legacy).resources("pods/status")}},
		{"replicaset-controller", []rule{
			verbs("get", "list", "watch", "update").groups(apps, extensions).resources("replicasets"),
			verbs("update").groups(apps, extensions).resources("replicasets/status"),
			verbs("update").groups(apps, extensions).resources("replicasets/finalizers"),
			verbs("list", "watch", "patch", "create", "delete").groups(legacy).resources("pods"),
			eventsRule()}},
		{"replication-controller", []rule{
			verbs("get", "list", "watch", "update").groups(legacy).resources("replicationcontrollers"),
			verbs("update").groups(legacy).resources("replicationcontrollers/status"),
			verbs("update").groups(legacy).resources("replicationcontrollers/finalizers"),
			verbs("list", "watch", "patch", "create", "delete").groups(legacy).resources("pods"),
			eventsRule()}},
		{"resourcequota-controller", []rule{
			verbs("list", "watch").groups("*").resources("*"),
			verbs("update").groups(legacy).resources("resourcequotas/status"),
			eventsRule()}},
		{"route-controller", []rule{
			verbs("list", "watch").groups(legacy).resources("nodes"),
			verbs("patch").groups(legacy).resources("nodes/status"),
			eventsRule()}},
		{"service-account-controller", []rule{
			verbs("create").groups(legacy).resources("serviceaccounts"),
			eventsRule()}},
		{"service-controller", []rule{
			verbs("get", "list", "watch").groups(legacy).resources("services"),
			verbs("patch", "update").groups(legacy).resources("services/status"),
			verbs("list", "watch").groups(legacy).resources("nodes"),
			eventsRule()}},
		{"statefulset-controller", []rule{
			verbs("list", "watch").groups(legacy).resources("pods"),
			verbs("get", "list", "watch").groups(apps).resources("statefulsets"),
			verbs("update").groups(apps).resources("statefulsets/status"),
			verbs("update").groups(apps).resources("statefulsets/finalizers"),
			verbs("get", "create", "delete", "update", "patch").groups(legacy).resources("pods"),
			verbs("get", "create", "delete", "update", "patch", "list", "watch").groups(apps).resources("controllerrevisions"),
			verbs("get", "create", "list", "watch").groups(legacy).resources("persistentvolumeclaims"),
			verbs("update", "delete").groups(legacy).resources("persistentvolumeclaims"),
			verbs("update").groups(legacy).resources("pods/finalizers"),
			eventsRule()}},
		{"ttl-controller", []rule{
			verbs("update", "patch", "list", "watch").groups(legacy).resources("nodes"),
			eventsRule()}},
		{"certificate-controller", []rule{
			verbs("get", "list", "watch", "delete").groups(certificates).resources("certificatesigningrequests"),
			verbs("update").groups(certificates).resources("certificatesigningrequests/status", "certificatesigningrequests/approval"),
			verbs("approve").groups(certificates).resources("signers").names("kubernetes.io/kube-apiserver-client-kubelet"),
			verbs("sign").groups(certificates).resources("signers").names("kubernetes.io/legacy-unknown",
				"kubernetes.io/kube-apiserver-client", "kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"),
			verbs("create").groups(authorization).resources("subjectaccessreviews"),
			eventsRule()}},
		{"pvc-protection-controller", []rule{
			verbs("get", "list", "watch", "update").groups(legacy).resources("persistentvolumeclaims"),
			verbs("update").groups(legacy).resources("persistentvolumeclaims/status"),
			verbs("list", "watch", "get").groups(legacy).resources("pods"),
			eventsRule()}},
		{"pv-protection-controller", []rule{
			verbs("get", "list", "watch", "update").groups(legacy).resources("persistentvolumes"),
			eventsRule()}},
		{"storage-version-migrator-controller", []rule{
			// list for a resource's current revision, patch to migrate
			// any resource; its CRD's StorageMigrating condition.
			verbs("list", "patch").groups("*").resources("*"),
			verbs("get").groups("apiextensions.k8s.io").resources("customresourcedefinitions"),
			verbs("patch").groups("apiextensions.k8s.io").resources("customresourcedefinitions/status"),
			verbs("update").groups("storagemigration.k8s.io").resources("storageversionmigrations/status")}},
		{"ttl-after-finished-controller", []rule{
			verbs("get", "list", "watch", "delete").groups(batch).resources("jobs"),
			eventsRule()}},
		{"validatingadmissionpolicy-status-controller", []rule{
			verbs("get", "list", "watch").groups(admissionRegistration).resources("validatingadmissionpolicies"),
			verbs("get", "patch", "update").groups(admissionRegistration).resources("validatingadmissionpolicies/status"),
			eventsRule()}},
		{"root-ca-cert-publisher", []rule{
			verbs("create", "update").groups(legacy).resources("configmaps"),
			eventsRule()}},
		{"legacy-service-account-token-cleaner", []rule{
			verbs("get").groups(legacy).resources("configmaps").names("kube-apiserver-legacy-service-account-token-tracking"),
			verbs("patch", "delete").groups(legacy).resources("secrets")}},
	}
}

func controllerRoles() []rbacv1.ClusterRole {
	var out []rbacv1.ClusterRole
	for _, c := range controllers() {
		out = append(out, clusterRole(ControllerRolePrefix+c.name, c.rules...))
	}
	return out
}

func controllerBindings() []rbacv1.ClusterRoleBinding {
	kelp := kelpControllers()
	var out []rbacv1.ClusterRoleBinding
	for _, c := range controllers() {
		subjects := []rbacv1.Subject{serviceAccount("kube-system", c.name)}
		if kelp[c.name] {
			subjects = append(subjects, users(KubeControllerUser)...)
		}
		out = append(out, clusterBinding(ControllerRolePrefix+c.name, subjects...))
	}
	return out
}
