// Package quota holds upstream's quota evaluators for the core kinds
// (pkg/quota/v1/evaluator/core: pods, services, persistent volume claims,
// and the legacy object counts configmaps, secrets,
// replicationcontrollers and resourcequotas), over the v1 types, for the
// two that must measure alike: ResourceQuota admission, which charges a
// write to the quotas of its namespace, and the resource quota
// controller, which recomputes each quota's usage. Every other resource
// is counted (count/<resource>.<group>) by apiserver's generic object
// count evaluator. The measuring itself is k8s.io/apiserver/pkg/quota/v1.
package quota

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/utils/clock"
)

// legacyObjectCountAliases are the kinds whose object count also goes by
// an older name ("configmaps" besides "count/configmaps").
var legacyObjectCountAliases = map[schema.GroupVersionResource]corev1.ResourceName{
	corev1.SchemeGroupVersion.WithResource("configmaps"):             corev1.ResourceConfigMaps,
	corev1.SchemeGroupVersion.WithResource("resourcequotas"):         corev1.ResourceQuotas,
	corev1.SchemeGroupVersion.WithResource("replicationcontrollers"): corev1.ResourceReplicationControllers,
	corev1.SchemeGroupVersion.WithResource("secrets"):                corev1.ResourceSecrets,
}

// NewEvaluators returns upstream's evaluators of the core kinds; f lists a
// resource's objects (the controller's informers; admission, which only
// measures single objects, passes nil).
func NewEvaluators(f quota.ListerForResourceFunc, clk clock.Clock) []quota.Evaluator {
	if clk == nil {
		clk = clock.RealClock{}
	}
	result := []quota.Evaluator{NewPodEvaluator(f, clk), NewServiceEvaluator(f), NewPersistentVolumeClaimEvaluator(f)}
	for gvr, alias := range legacyObjectCountAliases {
		var list generic.ListFuncByNamespace
		if f != nil {
			list = generic.ListResourceUsingListerFunc(f, gvr)
		}
		result = append(result, generic.NewObjectCountEvaluator(gvr.GroupResource(), list, alias))
	}
	return result
}

// IgnoredResources are never charged, as upstream: virtual resources that
// are not stored, and events.
var IgnoredResources = map[schema.GroupResource]struct{}{
	{Group: "", Resource: "bindings"}:                                      {},
	{Group: "", Resource: "componentstatuses"}:                             {},
	{Group: "authentication.k8s.io", Resource: "tokenreviews"}:             {},
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:       {},
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:      {},
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}:  {},
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"}: {},
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:   {},
	{Group: "", Resource: "events"}:                                        {},
	{Group: "events.k8s.io", Resource: "events"}:                           {},
}

// evaluator is the skeleton upstream's core evaluators share: one
// resource, its objects listed through the controller's listers (nil in
// admission, which measures single objects), scopes matched by
// matchesScope; each kind adds Handles, MatchingResources and Usage (and
// the pod evaluator Constraints).
type evaluator struct {
	gvr          schema.GroupVersionResource
	list         generic.ListFuncByNamespace
	matchesScope generic.MatchesScopeFunc
	// matchingResources and usage are the kind's own methods.
	matchingResources func([]corev1.ResourceName) []corev1.ResourceName
	usage             func(runtime.Object) (corev1.ResourceList, error)
}

func newEvaluator(f quota.ListerForResourceFunc, gvr schema.GroupVersionResource, matchesScope generic.MatchesScopeFunc,
	matchingResources func([]corev1.ResourceName) []corev1.ResourceName, usage func(runtime.Object) (corev1.ResourceList, error)) evaluator {
	e := evaluator{gvr: gvr, matchesScope: matchesScope, matchingResources: matchingResources, usage: usage}
	if f != nil {
		e.list = generic.ListResourceUsingListerFunc(f, gvr)
	}
	return e
}

func (e *evaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

func (e *evaluator) GroupResource() schema.GroupResource { return e.gvr.GroupResource() }

func (e *evaluator) Matches(rq *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(rq, item, e.matchingResources, e.matchesScope)
}

// MatchingScopes: the selectors that match item.
func (e *evaluator) MatchingScopes(item runtime.Object, selectors []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	out := []corev1.ScopedResourceSelectorRequirement{}
	for _, selector := range selectors {
		ok, err := e.matchesScope(selector, item)
		if err != nil {
			return []corev1.ScopedResourceSelectorRequirement{}, fmt.Errorf("error on matching scope %v: %w", selector, err)
		}
		if ok {
			out = append(out, selector)
		}
	}
	return out, nil
}

// UncoveredQuotaScopes: the limited scopes no matched quota scope names.
func (e *evaluator) UncoveredQuotaScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	out := []corev1.ScopedResourceSelectorRequirement{}
	for _, selector := range limited {
		covered := false
		for _, m := range matched {
			if m.ScopeName == selector.ScopeName {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, selector)
		}
	}
	return out, nil
}

func (e *evaluator) UsageStats(options quota.UsageStatsOptions) (quota.UsageStats, error) {
	if e.list == nil {
		return quota.UsageStats{}, fmt.Errorf("%s evaluator: no lister", e.gvr.Resource)
	}
	return generic.CalculateUsageStats(options, e.list, e.matchesScope, e.usage)
}

// scopedSelector is upstream's ScopedResourceSelectorRequirementsAsSelector:
// one scope requirement as a label selector over {scopeName: value}.
func scopedSelector(ssr corev1.ScopedResourceSelectorRequirement) (labels.Selector, error) {
	var op selection.Operator
	switch ssr.Operator {
	case corev1.ScopeSelectorOpIn:
		op = selection.In
	case corev1.ScopeSelectorOpNotIn:
		op = selection.NotIn
	case corev1.ScopeSelectorOpExists:
		op = selection.Exists
	case corev1.ScopeSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	default:
		return nil, fmt.Errorf("%q is not a valid scope selector operator", ssr.Operator)
	}
	r, err := labels.NewRequirement(string(ssr.ScopeName), op, ssr.Values)
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*r), nil
}
