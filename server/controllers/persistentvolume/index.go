package persistentvolume

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	volumehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/kelp-project/kelp/server/claims"
)

// PodClaimIndex indexes pods by the "<namespace>/<claim>" keys of the
// claims their volumes use, generic ephemeral volumes included.
const PodClaimIndex = "pod-pvc"

// AddPodClaimIndex adds PodClaimIndex to a pod informer that does not have
// it yet (several controllers share the informer). It must run before the
// informer starts.
func AddPodClaimIndex(inf cache.SharedIndexInformer) {
	if _, ok := inf.GetIndexer().GetIndexers()[PodClaimIndex]; ok {
		return
	}
	_ = inf.AddIndexers(cache.Indexers{PodClaimIndex: podClaimKeys})
}

func podClaimKeys(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, name := range claims.OfPod(pod) {
		keys = append(keys, pod.Namespace+"/"+name)
	}
	return keys, nil
}

// accessModeOrder is the order upstream lists access modes in.
var accessModeOrder = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod}

// modesKey is a volume's set of access modes, canonically ordered.
func modesKey(modes []corev1.PersistentVolumeAccessMode) string {
	var parts []string
	for _, m := range accessModeOrder {
		if slices.Contains(modes, m) {
			parts = append(parts, string(m))
		}
	}
	return strings.Join(parts, ",")
}

// findBestMatch is upstream's findBestMatchForClaim: the volumes are
// grouped by their set of access modes; the groups offering every mode
// the claim asks for are tried from the fewest modes to the most, and in
// each FindMatchingVolume picks a pre-bound volume or the smallest that
// fits. delayBinding leaves unbound volumes to the scheduler.
func findBestMatch(claim *corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume, delayBinding bool) (*corev1.PersistentVolume, error) {
	groups := map[string][]*corev1.PersistentVolume{}
	for _, v := range volumes {
		k := modesKey(v.Spec.AccessModes)
		groups[k] = append(groups[k], v)
	}
	var keys []string
	for k, vs := range groups {
		if hasModes(vs[0].Spec.AccessModes, claim.Spec.AccessModes) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if ni, nj := len(strings.Split(keys[i], ",")), len(strings.Split(keys[j], ",")); ni != nj {
			return ni < nj
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		v, err := volumehelpers.FindMatchingVolume(claim, groups[k], nil, nil, delayBinding, true)
		if err != nil {
			return nil, fmt.Errorf("finding a volume for claim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
		if v != nil {
			return v, nil
		}
	}
	return nil, nil
}

func hasModes(have, want []corev1.PersistentVolumeAccessMode) bool {
	for _, m := range want {
		if !slices.Contains(have, m) {
			return false
		}
	}
	return true
}
