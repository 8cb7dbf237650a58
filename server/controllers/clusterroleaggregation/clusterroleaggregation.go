// Package clusterroleaggregation is upstream's ClusterRole aggregation
// controller: a ClusterRole with an aggregationRule gets, as its rules,
// the rules of every ClusterRole its selectors match (admin, edit and view
// are built this way from the aggregate-to-* roles and from whatever an
// operator labels to extend them).
package clusterroleaggregation

import (
	"context"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kelp-project/kelp/server/controllers"
)

// Controller keeps aggregated ClusterRoles' rules current.
type Controller struct {
	client kubernetes.Interface
	roles  rbaclisters.ClusterRoleLister
	loop   controllers.Loop
}

// New wires the controller to the factory's ClusterRole informer.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) *Controller {
	inf := factory.Rbac().V1().ClusterRoles()
	c := &Controller{client: client, roles: inf.Lister()}
	c.loop = controllers.Loop{Name: "clusterrole-aggregation", Queue: controllers.NewQueue("clusterrole-aggregation"),
		Synced: []cache.InformerSynced{inf.Informer().HasSynced}, Sync: c.sync}
	// Any change may change what some selector matches: every aggregating
	// role is looked at again (there are few).
	enqueueAll := func(interface{}) { c.enqueueAggregating() }
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueueAll, UpdateFunc: func(_, o interface{}) { enqueueAll(o) }, DeleteFunc: enqueueAll,
	})
	return c
}

// Run runs workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) { c.loop.Run(ctx, workers) }

func (c *Controller) enqueueAggregating() {
	all, err := c.roles.List(labels.Everything())
	if err != nil {
		return
	}
	for _, r := range all {
		if r.AggregationRule != nil {
			c.loop.Queue.Add(r.Name)
		}
	}
}

func (c *Controller) sync(ctx context.Context, name string) error {
	role, err := c.roles.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if role.AggregationRule == nil {
		return nil
	}
	all, err := c.roles.List(labels.Everything())
	if err != nil {
		return err
	}
	want, err := Aggregate(role, all)
	if err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(role.Rules, want) {
		return nil
	}
	updated := role.DeepCopy()
	updated.Rules = want
	_, err = c.client.RbacV1().ClusterRoles().Update(ctx, updated, metav1.UpdateOptions{})
	return err
}

// Aggregate returns the rules role aggregates from all: those of every
// other ClusterRole a selector matches, in the order of the roles' names,
// each distinct rule once. An invalid selector is an error.
func Aggregate(role *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	var selectors []labels.Selector
	for i := range role.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, err
		}
		selectors = append(selectors, s)
	}
	sorted := append([]*rbacv1.ClusterRole(nil), all...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var out []rbacv1.PolicyRule
	for _, other := range sorted {
		if other.Name == role.Name {
			continue
		}
		matched := false
		for _, s := range selectors {
			matched = matched || s.Matches(labels.Set(other.Labels))
		}
		if !matched {
			continue
		}
		for _, r := range other.Rules {
			if !containsRule(out, r) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func containsRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, have := range rules {
		if apiequality.Semantic.DeepEqual(have, r) {
			return true
		}
	}
	return false
}
