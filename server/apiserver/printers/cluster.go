package printers

import (
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// nodeRolePrefix marks a role with a label key node-role.kubernetes.io/<role>.
	nodeRolePrefix = "node-role.kubernetes.io/"
	// nodeRoleLabel is the older form kubernetes.io/role=<role>.
	nodeRoleLabel = "kubernetes.io/role"
)

func init() {
	nodeInfoDoc := corev1.NodeSystemInfo{}.SwaggerDoc()
	addressesDoc := corev1.NodeStatus{}.SwaggerDoc()["addresses"]
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Status", "string", "The status of the node"),
		column("Roles", "string", "The roles of the node"),
		ageColumn(),
		column("Version", "string", nodeInfoDoc["kubeletVersion"]),
		wide(column("Internal-IP", "string", addressesDoc)),
		wide(column("External-IP", "string", addressesDoc)),
		wide(column("OS-Image", "string", nodeInfoDoc["osImage"])),
		wide(column("Kernel-Version", "string", nodeInfoDoc["kernelVersion"])),
		wide(column("Container-Runtime", "string", nodeInfoDoc["containerRuntimeVersion"])),
	}, func(n *corev1.Node, now time.Time) []interface{} {
		info := n.Status.NodeInfo
		return []interface{}{
			n.Name,
			nodeStatus(n),
			joinOr(nodeRoles(n), ",", "<none>"),
			age(n.ObjectMeta, now),
			info.KubeletVersion,
			nodeAddress(n, corev1.NodeInternalIP),
			nodeAddress(n, corev1.NodeExternalIP),
			orUnknown(info.OSImage),
			orUnknown(info.KernelVersion),
			orUnknown(info.ContainerRuntimeVersion),
		}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Status", "string", "The status of the namespace"),
		ageColumn(),
	}, func(ns *corev1.Namespace, now time.Time) []interface{} {
		return []interface{}{ns.Name, string(ns.Status.Phase), age(ns.ObjectMeta, now)}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Holder", "string", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]),
		ageColumn(),
	}, func(l *coordinationv1.Lease, now time.Time) []interface{} {
		return []interface{}{l.Name, deref(l.Spec.HolderIdentity), age(l.ObjectMeta, now)}
	})

	pcDoc := schedulingv1.PriorityClass{}.SwaggerDoc()
	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Value", "integer", pcDoc["value"]),
		column("Global-Default", "boolean", pcDoc["globalDefault"]),
		ageColumn(),
		// Not marked wide upstream even though it is only filled for wide output.
		column("PreemptionPolicy", "string", pcDoc["preemptionPolicy"]),
	}, func(pc *schedulingv1.PriorityClass, now time.Time) []interface{} {
		var policy string
		if pc.PreemptionPolicy != nil {
			policy = string(*pc.PreemptionPolicy)
		}
		return []interface{}{pc.Name, int64(pc.Value), pc.GlobalDefault, age(pc.ObjectMeta, now), policy}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Handler", "string", nodev1.RuntimeClass{}.SwaggerDoc()["handler"]),
		ageColumn(),
	}, func(rc *nodev1.RuntimeClass, now time.Time) []interface{} {
		return []interface{}{rc.Name, rc.Handler, age(rc.ObjectMeta, now)}
	})

	cells([]metav1.TableColumnDefinition{
		nameColumn(),
		column("Status", "string", "Status of the component conditions"),
		column("Message", "string", "Message of the component conditions"),
		column("Error", "string", "Error of the component conditions"),
	}, func(cs *corev1.ComponentStatus, _ time.Time) []interface{} {
		status, message, errMsg := "Unknown", "", ""
		for _, c := range cs.Conditions {
			if c.Type != corev1.ComponentHealthy {
				continue
			}
			status = "Unhealthy"
			if c.Status == corev1.ConditionTrue {
				status = "Healthy"
			}
			message, errMsg = c.Message, c.Error
			break
		}
		return []interface{}{cs.Name, status, message, errMsg}
	})
}

// nodeStatus only reflects the Ready condition (other conditions such as
// MemoryPressure never show), plus cordoning.
func nodeStatus(n *corev1.Node) string {
	var status []string
	// The last Ready condition wins, as with upstream's condition map.
	var ready *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			ready = &n.Status.Conditions[i]
		}
	}
	switch {
	case ready == nil:
		status = append(status, "Unknown")
	case ready.Status == corev1.ConditionTrue:
		status = append(status, string(corev1.NodeReady))
	default:
		status = append(status, "Not"+string(corev1.NodeReady))
	}
	if n.Spec.Unschedulable {
		status = append(status, "SchedulingDisabled")
	}
	return strings.Join(status, ",")
}

// nodeRoles returns the sorted, de-duplicated roles from both label forms.
func nodeRoles(n *corev1.Node) []string {
	set := map[string]bool{}
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, nodeRolePrefix):
			if role := strings.TrimPrefix(k, nodeRolePrefix); role != "" {
				set[role] = true
			}
		case k == nodeRoleLabel && v != "":
			set[v] = true
		}
	}
	roles := make([]string, 0, len(set))
	for r := range set {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	return roles
}

// nodeAddress returns the first address of the given type, or "<none>".
func nodeAddress(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
