package job

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
)

// matchFailurePolicy judges one failed pod by the Job's podFailurePolicy:
// the first rule that matches decides. It returns the Job's failure
// message for a FailJob rule, and whether the failure counts towards
// backoffLimit (false only for Ignore). No rule matching counts the
// failure, as a Job without a policy does.
func matchFailurePolicy(policy *batch.PodFailurePolicy, pod *v1.Pod) (failJob *string, counts bool) {
	failJob, counts, _ = matchFailurePolicyAction(policy, pod)
	return failJob, counts
}

// matchFailurePolicyAction is matchFailurePolicy that also names the action
// of the rule that matched (nil when none did, or there is no policy).
func matchFailurePolicyAction(policy *batch.PodFailurePolicy, pod *v1.Pod) (failJob *string, counts bool, action *batch.PodFailurePolicyAction) {
	if policy == nil {
		return nil, true, nil
	}
	for i, rule := range policy.Rules {
		var what string
		switch {
		case rule.OnExitCodes != nil:
			cs := matchExitCodes(&pod.Status, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			what = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
				cs.Name, pod.Namespace, pod.Name, cs.State.Terminated.ExitCode, rule.Action, i)
		case rule.OnPodConditions != nil:
			c := matchPodConditions(&pod.Status, rule.OnPodConditions)
			if c == nil {
				continue
			}
			what = fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d", pod.Namespace, pod.Name, c.Type, rule.Action, i)
		default:
			continue
		}
		action := rule.Action
		switch action {
		case batch.PodFailurePolicyActionIgnore:
			return nil, false, &action
		case batch.PodFailurePolicyActionFailJob:
			return &what, true, &action
		default: // Count, and FailIndex (which also fails the pod's index)
			return nil, true, &action
		}
	}
	return nil, true, nil
}

// matchExitCodes returns a terminated container (regular first, then init)
// whose non-zero exit code satisfies the requirement.
func matchExitCodes(st *v1.PodStatus, req *batch.PodFailurePolicyOnExitCodesRequirement) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses} {
		for i := range list {
			cs := &list[i]
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 || (req.ContainerName != nil && *req.ContainerName != cs.Name) {
				continue
			}
			in := slices.Contains(req.Values, t.ExitCode)
			if (req.Operator == batch.PodFailurePolicyOnExitCodesOpIn && in) || (req.Operator == batch.PodFailurePolicyOnExitCodesOpNotIn && !in) {
				return cs
			}
		}
	}
	return nil
}

func matchPodConditions(st *v1.PodStatus, patterns []batch.PodFailurePolicyOnPodConditionsPattern) *v1.PodCondition {
	for i := range st.Conditions {
		for _, pat := range patterns {
			if st.Conditions[i].Type == pat.Type && st.Conditions[i].Status == pat.Status {
				return &st.Conditions[i]
			}
		}
	}
	return nil
}

// Upstream's pod-recreation backoff: after n failures since the last
// success, no new pod before lastFailure + base·2^(n-1), capped.
const (
	DefaultPodFailureBackoff = 10 * time.Second
	MaxPodFailureBackoff     = 6 * time.Minute
)

// backoffRecord is what the backoff needs to remember across syncs: the
// finished pods that carried it lose their finalizer and may be gone.
type backoffRecord struct {
	failuresAfterLastSuccess int32
	lastFailure              time.Time
}

// remaining is how long pod creation must still wait.
func (r backoffRecord) remaining(now time.Time, base, maxDelay time.Duration) time.Duration {
	if r.failuresAfterLastSuccess == 0 || r.lastFailure.IsZero() {
		return 0
	}
	delay := base
	for i := int32(1); i < r.failuresAfterLastSuccess && delay < maxDelay; i++ {
		delay *= 2
	}
	delay = min(delay, maxDelay)
	if left := r.lastFailure.Add(delay).Sub(now); left > 0 {
		return left
	}
	return 0
}

// backoffStore holds one record per Job key, in memory only: after a
// restart of the controller the backoff starts over, as upstream's does.
type backoffStore struct {
	mu sync.Mutex
	m  map[string]backoffRecord
}

func newBackoffStore() *backoffStore { return &backoffStore{m: map[string]backoffRecord{}} }

func (s *backoffStore) get(key string) backoffRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

func (s *backoffStore) set(key string, r backoffRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = r
}

func (s *backoffStore) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// nextBackoff folds newly finished pods into the record: a success resets
// it, and only failures after the latest success count.
func nextBackoff(r backoffRecord, succeeded, failed []*v1.Pod) backoffRecord {
	if len(succeeded) == 0 && len(failed) == 0 {
		return r
	}
	byFinish := func(pods []*v1.Pod) {
		sort.Slice(pods, func(i, j int) bool { return finishedAt(pods[i]).Before(finishedAt(pods[j])) })
	}
	byFinish(succeeded)
	byFinish(failed)
	if len(succeeded) == 0 {
		r.failuresAfterLastSuccess += int32(len(failed))
		r.lastFailure = finishedAt(failed[len(failed)-1])
		return r
	}
	lastSuccess := finishedAt(succeeded[len(succeeded)-1])
	r = backoffRecord{}
	for i := len(failed) - 1; i >= 0; i-- {
		t := finishedAt(failed[i])
		if !t.After(lastSuccess) {
			break
		}
		if r.lastFailure.IsZero() {
			r.lastFailure = t
		}
		r.failuresAfterLastSuccess++
	}
	return r
}

// finishedAt is when a pod ended: its containers' last finish, else when
// it stopped being Ready, else when its deletion began, else its creation.
func finishedAt(p *v1.Pod) time.Time {
	var last time.Time
	complete := len(p.Status.ContainerStatuses) > 0
	for _, cs := range p.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil || t.FinishedAt.IsZero() {
			complete = false
			break
		}
		if t.FinishedAt.After(last) {
			last = t.FinishedAt.Time
		}
	}
	if complete {
		return last
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if p.DeletionTimestamp != nil {
		// The deletion timestamp is when the grace period ends; the pod
		// stopped counting as running when it began.
		var grace int64
		if p.DeletionGracePeriodSeconds != nil {
			grace = *p.DeletionGracePeriodSeconds
		}
		return p.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
	}
	return p.CreationTimestamp.Time
}
