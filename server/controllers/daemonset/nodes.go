package daemonset

import (
	"fmt"
	"strconv"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Pod labels the controller sets (upstream's
// extensions.DaemonSetTemplateGenerationKey and
// apps.DefaultDaemonSetUniqueLabelKey).
const (
	templateGenerationLabel = "pod-template-generation"
	revisionHashLabel       = apps.ControllerRevisionHashLabelKey
)

// daemonTolerations are the tolerations every daemon pod gets
// (upstream's util.AddOrUpdateDaemonPodTolerations): a daemon belongs to
// its node, so it stays through not-ready and unreachable (no
// tolerationSeconds: never evicted for them), and it is placed on nodes
// under resource pressure or cordoned. network-unavailable is added only
// for hostNetwork pods, which are what bring the network up.
func daemonTolerations(hostNetwork bool) []v1.Toleration {
	t := []v1.Toleration{
		{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
		{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
		{Key: v1.TaintNodeDiskPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodePIDPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	}
	if hostNetwork {
		t = append(t, v1.Toleration{Key: v1.TaintNodeNetworkUnavailable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})
	}
	return t
}

// addDaemonTolerations adds or replaces (same key, operator and effect,
// as upstream's AddOrUpdateTolerationInPodSpec) the automatic tolerations.
// Replacing matters: a user's not-ready toleration with tolerationSeconds
// would otherwise get the daemon evicted from its own node.
func addDaemonTolerations(spec *v1.PodSpec) {
	for _, want := range daemonTolerations(spec.HostNetwork) {
		replaced := false
		for i := range spec.Tolerations {
			if spec.Tolerations[i].MatchToleration(&want) {
				spec.Tolerations[i] = want
				replaced = true
			}
		}
		if !replaced {
			spec.Tolerations = append(spec.Tolerations, want)
		}
	}
}

// placement is what decides where a DaemonSet's pods go: its template's
// tolerations (with the automatic ones) and required node affinity
// (nodeSelector plus required terms). Built once per sync, not per node.
type placement struct {
	nodeName    string
	tolerations []v1.Toleration
	affinity    nodeaffinity.RequiredNodeAffinity
}

func placementOf(ds *apps.DaemonSet) placement {
	spec := ds.Spec.Template.Spec.DeepCopy()
	addDaemonTolerations(spec)
	return placement{
		nodeName:    ds.Spec.Template.Spec.NodeName,
		tolerations: spec.Tolerations,
		affinity:    nodeaffinity.NewRequiredNodeAffinity(ds.Spec.Template.Spec.NodeSelector, ds.Spec.Template.Spec.Affinity),
	}
}

// shouldRun reports whether a daemon pod should be placed on node
// (shouldRun) and whether one already there may stay (shouldContinue). A
// NoSchedule taint keeps new pods off but lets a running one stay; only an
// untolerated NoExecute taint, or a selector or affinity that no longer
// matches, removes it.
func (p placement) shouldRun(node *v1.Node) (shouldRun, shouldContinue bool) {
	if p.nodeName != "" && p.nodeName != node.Name {
		return false, false
	}
	// A parse error counts as no match, as upstream.
	if ok, _ := p.affinity.Match(node); !ok {
		return false, false
	}
	logger := klog.Background()
	if _, bad := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, p.tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoExecute || t.Effect == v1.TaintEffectNoSchedule
	}, false); !bad {
		return true, true
	}
	_, bad := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, p.tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoExecute
	}, false)
	return false, !bad
}

// bindToNode sets the required node affinity that pins a daemon pod to
// its node through the default scheduler (upstream's
// ReplaceDaemonSetPodNodeNameNodeAffinity): the required terms become one
// matchFields term on metadata.name. Dropping the template's other terms
// is safe because the controller only picks nodes that satisfy them.
func bindToNode(affinity *v1.Affinity, node string) *v1.Affinity {
	sel := &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
	}}}
	if affinity == nil {
		affinity = &v1.Affinity{}
	}
	if affinity.NodeAffinity == nil {
		affinity.NodeAffinity = &v1.NodeAffinity{}
	}
	affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = sel
	return affinity
}

// targetNode is the node a daemon pod is for: where it is bound, else the
// node its matchFields affinity names (upstream's GetTargetNodeName).
func targetNode(pod *v1.Pod) (string, error) {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName, nil
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "", fmt.Errorf("pod %s/%s has no required node affinity", pod.Namespace, pod.Name)
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, req := range term.MatchFields {
			if req.Key == metav1.ObjectNameField && req.Operator == v1.NodeSelectorOpIn {
				if len(req.Values) != 1 {
					return "", fmt.Errorf("pod %s/%s: matchFields %s names %d nodes", pod.Namespace, pod.Name, metav1.ObjectNameField, len(req.Values))
				}
				return req.Values[0], nil
			}
		}
	}
	return "", fmt.Errorf("pod %s/%s names no node", pod.Namespace, pod.Name)
}

// templateGeneration is the server-kept count of template changes
// (registry: carryTemplateGeneration); nil when absent or unreadable.
func templateGeneration(ds *apps.DaemonSet) *int64 {
	v, ok := ds.Annotations[apps.DeprecatedTemplateGeneration]
	if !ok {
		return nil
	}
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil
	}
	return &g
}

// isUpdated reports whether pod runs the current template: its revision
// hash matches, or (pods from before revisions) its template generation.
func isUpdated(pod *v1.Pod, hash string, generation *int64) bool {
	if hash != "" && pod.Labels[revisionHashLabel] == hash {
		return true
	}
	return generation != nil && pod.Labels[templateGenerationLabel] == strconv.FormatInt(*generation, 10)
}

// podTemplate is the template daemon pods are created from: the
// DaemonSet's, with the automatic tolerations and the revision labels.
func podTemplate(ds *apps.DaemonSet, hash string) *v1.PodTemplateSpec {
	t := ds.Spec.Template.DeepCopy()
	addDaemonTolerations(&t.Spec)
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	if g := templateGeneration(ds); g != nil {
		t.Labels[templateGenerationLabel] = strconv.FormatInt(*g, 10)
	}
	if hash != "" {
		t.Labels[revisionHashLabel] = hash
	}
	return t
}
