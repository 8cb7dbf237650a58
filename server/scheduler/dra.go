package scheduler

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// draNotSupported is why a pod with resource claims fits no node: upstream's
// DynamicResources plugin would allocate its claims from the drivers'
// ResourceSlices (or wait for them), and the kubelet would have the
// drivers prepare the devices. kelp does neither, so binding such a pod
// would start it without the devices it asked for.
const draNotSupported = "kelp does not allocate dynamic resources (DRA)"

// dynamicResourcesPreFilter is the DynamicResources plugin's PreFilter as
// far as kelp can go: a pod without resourceClaims is not its concern
// (""); one with them is unschedulable on every node, and no preemption
// can help. The message names the claims.
func dynamicResourcesPreFilter(pod *v1.Pod) string {
	if len(pod.Spec.ResourceClaims) == 0 {
		return ""
	}
	names := make([]string, 0, len(pod.Spec.ResourceClaims))
	for _, c := range pod.Spec.ResourceClaims {
		names = append(names, c.Name)
	}
	return fmt.Sprintf("pod uses resource claims (%s), and %s", strings.Join(names, ", "), draNotSupported)
}
