package deployment

import (
	"encoding/binary"
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/davecgh/go-spew/spew"
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Annotation keys and condition reasons shared with kubectl.
const (
	RevisionAnnotation        = "deployment.kubernetes.io/revision"
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
	ChangeCauseAnnotation     = "kubernetes.io/change-cause"
	lastAppliedAnnotation     = "kubectl.kubernetes.io/last-applied-configuration"
	rollbackToAnnotation      = "deprecated.deployment.rollback.to"

	// DefaultPodTemplateHashKey is the label added to ReplicaSets and their pods.
	DefaultPodTemplateHashKey = apps.DefaultDeploymentUniqueLabelKey

	NewReplicaSetReason        = "NewReplicaSetCreated"
	FoundNewRSReason           = "FoundNewReplicaSet"
	ReplicaSetUpdatedReason    = "ReplicaSetUpdated"
	NewRSAvailableReason       = "NewReplicaSetAvailable"
	TimedOutReason             = "ProgressDeadlineExceeded"
	PausedDeployReason         = "DeploymentPaused"
	ResumedDeployReason        = "DeploymentResumed"
	FailedRSCreateReason       = "ReplicaSetCreateError"
	MinimumReplicasAvailable   = "MinimumReplicasAvailable"
	MinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	maxRevHistoryLengthInChars = 2000
)

// deepHashObject writes a stable, pointer-following dump of obj into h
// (the same spew configuration upstream uses, so hashes match).
func deepHashObject(h hash.Hash, obj interface{}) {
	h.Reset()
	printer := spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}
	printer.Fprintf(h, "%#v", obj)
}

// ComputeHash returns the pod-template-hash for a template and collision count.
func ComputeHash(template *v1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	deepHashObject(h, *template)
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// EqualIgnoreHash compares two templates ignoring the pod-template-hash label.
func EqualIgnoreHash(a, b *v1.PodTemplateSpec) bool {
	a1, b1 := a.DeepCopy(), b.DeepCopy()
	delete(a1.Labels, DefaultPodTemplateHashKey)
	delete(b1.Labels, DefaultPodTemplateHashKey)
	return apiequality.Semantic.DeepEqual(a1, b1)
}

func replicas(rs *apps.ReplicaSet) int32 {
	if rs == nil || rs.Spec.Replicas == nil {
		return 0
	}
	return *rs.Spec.Replicas
}

func dReplicas(d *apps.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func isRollingUpdate(d *apps.Deployment) bool {
	return d.Spec.Strategy.Type != apps.RecreateDeploymentStrategyType
}

// ResolveFenceposts scales maxSurge (rounding up) and maxUnavailable (rounding
// down) against desired; if both end up 0, maxUnavailable becomes 1.
func ResolveFenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (int32, int32, error) {
	def := intstr.FromString("25%")
	if maxSurge == nil {
		maxSurge = &def
	}
	if maxUnavailable == nil {
		maxUnavailable = &def
	}
	surge, err := intstr.GetScaledValueFromIntOrPercent(maxSurge, int(desired), true)
	if err != nil {
		return 0, 0, err
	}
	unavailable, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, int(desired), false)
	if err != nil {
		return 0, 0, err
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return int32(surge), int32(unavailable), nil
}

func rollingParams(d *apps.Deployment) (*intstr.IntOrString, *intstr.IntOrString) {
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		return ru.MaxSurge, ru.MaxUnavailable
	}
	return nil, nil
}

// MaxSurge returns the resolved surge for a rolling deployment, 0 otherwise.
func MaxSurge(d *apps.Deployment) int32 {
	if !isRollingUpdate(d) {
		return 0
	}
	s, u := rollingParams(d)
	surge, _, _ := ResolveFenceposts(s, u, dReplicas(d))
	return surge
}

// MaxUnavailable returns the resolved maxUnavailable, capped at replicas.
func MaxUnavailable(d *apps.Deployment) int32 {
	if !isRollingUpdate(d) || dReplicas(d) == 0 {
		return 0
	}
	s, u := rollingParams(d)
	_, unavailable, _ := ResolveFenceposts(s, u, dReplicas(d))
	if unavailable > dReplicas(d) {
		return dReplicas(d)
	}
	return unavailable
}

func sumSpec(rss []*apps.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		n += replicas(rs)
	}
	return n
}

func sumStatus(rss []*apps.ReplicaSet, f func(*apps.ReplicaSetStatus) int32) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += f(&rs.Status)
		}
	}
	return n
}

func actualCount(rss []*apps.ReplicaSet) int32 {
	return sumStatus(rss, func(s *apps.ReplicaSetStatus) int32 { return s.Replicas })
}
func readyCount(rss []*apps.ReplicaSet) int32 {
	return sumStatus(rss, func(s *apps.ReplicaSetStatus) int32 { return s.ReadyReplicas })
}
func availableCount(rss []*apps.ReplicaSet) int32 {
	return sumStatus(rss, func(s *apps.ReplicaSetStatus) int32 { return s.AvailableReplicas })
}

// podsUntilScaled counts the pods each ReplicaSet may have until its
// controller has caught up: a ReplicaSet just scaled down still has its
// old pods (status.replicas) until they are deleted, and surging on top of
// them would run more than replicas+maxSurge pods at once.
func podsUntilScaled(rss []*apps.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += max(replicas(rs), rs.Status.Replicas)
		}
	}
	return n
}

// availableAfterScale is what will stay available once every ReplicaSet
// reaches its spec: a ReplicaSet just scaled down still reports its old
// availableReplicas until its controller catches up, and counting those
// would let a rolling update take more pods away than maxUnavailable allows.
func availableAfterScale(rss []*apps.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += min(rs.Status.AvailableReplicas, replicas(rs))
		}
	}
	return n
}

func filterActive(rss []*apps.ReplicaSet) []*apps.ReplicaSet {
	var out []*apps.ReplicaSet
	for _, rs := range rss {
		if rs != nil && replicas(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

func withNew(old []*apps.ReplicaSet, newRS *apps.ReplicaSet) []*apps.ReplicaSet {
	out := append([]*apps.ReplicaSet{}, old...)
	if newRS != nil {
		out = append(out, newRS)
	}
	return out
}

// sortByCreation sorts oldest first (name breaks ties).
func sortByCreation(rss []*apps.ReplicaSet) {
	sort.SliceStable(rss, func(i, j int) bool {
		if rss[i].CreationTimestamp.Equal(&rss[j].CreationTimestamp) {
			return rss[i].Name < rss[j].Name
		}
		return rss[i].CreationTimestamp.Before(&rss[j].CreationTimestamp)
	})
}

// Revision parses the revision annotation of an object (0 if absent).
func Revision(obj metav1.Object) (int64, error) {
	v, ok := obj.GetAnnotations()[RevisionAnnotation]
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

func maxRevision(rss []*apps.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		if v, err := Revision(rs); err == nil && v > m {
			m = v
		}
	}
	return m
}

func intAnnotation(rs *apps.ReplicaSet, key string) (int32, bool) {
	v, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// setReplicasAnnotations records desired/max replicas; reports a change.
func setReplicasAnnotations(rs *apps.ReplicaSet, desired, max int32) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	if s := strconv.Itoa(int(desired)); rs.Annotations[DesiredReplicasAnnotation] != s {
		rs.Annotations[DesiredReplicasAnnotation] = s
		changed = true
	}
	if s := strconv.Itoa(int(max)); rs.Annotations[MaxReplicasAnnotation] != s {
		rs.Annotations[MaxReplicasAnnotation] = s
		changed = true
	}
	return changed
}

func skipCopyAnnotation(k string) bool {
	switch k {
	case lastAppliedAnnotation, RevisionAnnotation, RevisionHistoryAnnotation,
		DesiredReplicasAnnotation, MaxReplicasAnnotation, rollbackToAnnotation:
		return true
	}
	return false
}

func copyDeploymentAnnotations(d *apps.Deployment, rs *apps.ReplicaSet) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if skipCopyAnnotation(k) {
			continue
		}
		if cur, ok := rs.Annotations[k]; ok && cur == v {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	return changed
}

// setNewReplicaSetAnnotations copies deployment annotations and bumps the
// revision (moving the old one into revision-history). Reports a change.
func setNewReplicaSetAnnotations(d *apps.Deployment, rs *apps.ReplicaSet, newRevision string, exists bool) bool {
	changed := copyDeploymentAnnotations(d, rs)
	oldRevision := rs.Annotations[RevisionAnnotation]
	oldInt, err := strconv.ParseInt(oldRevision, 10, 64)
	if err != nil {
		if oldRevision != "" {
			return false
		}
		oldInt = 0
	}
	newInt, err := strconv.ParseInt(newRevision, 10, 64)
	if err != nil {
		return false
	}
	if oldInt < newInt {
		rs.Annotations[RevisionAnnotation] = newRevision
		changed = true
		if oldRevision != "" {
			hist := rs.Annotations[RevisionHistoryAnnotation]
			parts := strings.Split(hist, ",")
			if hist == "" {
				rs.Annotations[RevisionHistoryAnnotation] = oldRevision
			} else {
				total := len(hist) + len(oldRevision) + 1
				start := 0
				for total > maxRevHistoryLengthInChars && start < len(parts) {
					total -= len(parts[start]) + 1
					start++
				}
				if total <= maxRevHistoryLengthInChars {
					rs.Annotations[RevisionHistoryAnnotation] = strings.Join(append(parts[start:], oldRevision), ",")
				}
			}
		}
	}
	if !exists && setReplicasAnnotations(rs, dReplicas(d), dReplicas(d)+MaxSurge(d)) {
		changed = true
	}
	return changed
}

// --- conditions ---

func getCondition(s *apps.DeploymentStatus, t apps.DeploymentConditionType) *apps.DeploymentCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

func newCondition(t apps.DeploymentConditionType, status v1.ConditionStatus, reason, msg string, now metav1.Time) apps.DeploymentCondition {
	return apps.DeploymentCondition{Type: t, Status: status, Reason: reason, Message: msg, LastUpdateTime: now, LastTransitionTime: now}
}

func removeCondition(s *apps.DeploymentStatus, t apps.DeploymentConditionType) {
	var out []apps.DeploymentCondition
	for _, c := range s.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	s.Conditions = out
}

// setCondition replaces the condition of its type unless status and reason
// are unchanged; the transition time survives a same-status change.
func setCondition(s *apps.DeploymentStatus, c apps.DeploymentCondition) {
	cur := getCondition(s, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	removeCondition(s, c.Type)
	s.Conditions = append(s.Conditions, c)
}

func hasProgressDeadline(d *apps.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

func deploymentComplete(d *apps.Deployment, s *apps.DeploymentStatus) bool {
	n := dReplicas(d)
	return s.UpdatedReplicas == n && s.Replicas == n && s.AvailableReplicas == n && s.ObservedGeneration >= d.Generation
}

func deploymentProgressing(d *apps.Deployment, s *apps.DeploymentStatus) bool {
	old := d.Status
	return s.UpdatedReplicas > old.UpdatedReplicas ||
		(s.Replicas-s.UpdatedReplicas) < (old.Replicas-old.UpdatedReplicas) ||
		s.ReadyReplicas > old.ReadyReplicas ||
		s.AvailableReplicas > old.AvailableReplicas
}
