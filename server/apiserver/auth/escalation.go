package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"

	"github.com/kelp-project/kelp/config"
)

// Escalation is upstream's RBAC escalation prevention: nobody grants
// through RBAC what they do not hold themselves.
//
//   - A Role or ClusterRole is written only by a user whose own RBAC rules
//     (in the role's namespace, or cluster-wide for a ClusterRole) cover
//     every rule of it, or who may `escalate` it. An aggregationRule, which
//     can gather anything, needs full authority (cluster-admin's rules).
//   - A RoleBinding or ClusterRoleBinding is written only by a user who
//     holds every rule of the role it refers to (in the binding's
//     namespace), or who may `bind` that role.
//
// system:masters is exempt; a write that changes only what the garbage
// collector changes (owner references, finalizers, deletion) is not
// checked. Rules come from RBAC alone, as upstream's rule resolver: what
// the Node authorizer allows a kubelet is no right to grant.
type Escalation struct {
	Authorizer Authorizer
	Index      *RBACIndex
	// RoleRules finds the rules of the role a binding refers to; nil
	// means Index.RoleRefRules. The API server reads storage when the
	// index lacks the role: one apply may create a role and bind it a
	// moment later, before the role's watch event reaches the index.
	RoleRules func(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, bool)
}

var (
	rolesResource        = schema.GroupResource{Group: rbacv1.GroupName, Resource: "roles"}
	clusterRolesResource = schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterroles"}
	roleBindingsResource = schema.GroupResource{Group: rbacv1.GroupName, Resource: "rolebindings"}
	crbResource          = schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterrolebindings"}
)

// fullAuthority is cluster-admin's rules.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

// Check refuses a create (old nil) or update of an RBAC object by u that
// would escalate, with upstream's 403. Other objects pass.
func (e Escalation) Check(u *User, obj, old runtime.Object) error {
	if u == nil || slices.Contains(u.Groups, config.MastersGroup) {
		return nil
	}
	if old != nil && OnlyGCFields(obj, old) {
		return nil
	}
	switch o := obj.(type) {
	case *rbacv1.Role:
		if e.allowed(u, "escalate", rolesResource, o.Namespace, o.Name) {
			return nil
		}
		return e.confirm(u, o.Namespace, rolesResource, o.Name, o.Rules)
	case *rbacv1.ClusterRole:
		if e.allowed(u, "escalate", clusterRolesResource, "", o.Name) {
			return nil
		}
		if err := e.confirm(u, "", clusterRolesResource, o.Name, o.Rules); err != nil {
			return err
		}
		oldRole, _ := old.(*rbacv1.ClusterRole)
		if hasAggregation(o) || (oldRole != nil && hasAggregation(oldRole)) {
			if e.missing(u, "", fullAuthority) != nil {
				return apierrors.NewForbidden(clusterRolesResource, o.Name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
			}
		}
	case *rbacv1.RoleBinding:
		return e.checkBinding(u, o.Namespace, roleBindingsResource, o.Name, o.RoleRef)
	case *rbacv1.ClusterRoleBinding:
		return e.checkBinding(u, "", crbResource, o.Name, o.RoleRef)
	}
	return nil
}

func (e Escalation) checkBinding(u *User, namespace string, gr schema.GroupResource, name string, ref rbacv1.RoleRef) error {
	roleGR := clusterRolesResource
	if ref.Kind == "Role" {
		roleGR = rolesResource
	}
	if e.allowed(u, "bind", roleGR, namespace, ref.Name) {
		return nil
	}
	lookup := e.RoleRules
	if lookup == nil {
		lookup = e.Index.RoleRefRules
	}
	rules, ok := lookup(ref, namespace)
	if !ok {
		return apierrors.NewNotFound(roleGR, ref.Name)
	}
	return e.confirm(u, namespace, gr, name, rules)
}

func (e Escalation) allowed(u *User, verb string, gr schema.GroupResource, namespace, name string) bool {
	d, _ := e.Authorizer.Authorize(u, Attributes{IsResource: true, Verb: verb, Group: gr.Group, Version: "*",
		Resource: gr.Resource, Namespace: namespace, Name: name})
	return d == DecisionAllow
}

// confirm is upstream's ConfirmNoEscalation, as a 403 on the object.
func (e Escalation) confirm(u *User, namespace string, gr schema.GroupResource, name string, rules []rbacv1.PolicyRule) error {
	if err := e.missing(u, namespace, rules); err != nil {
		return apierrors.NewForbidden(gr, name, err)
	}
	return nil
}

// missing returns upstream's error listing the rules u lacks, or nil.
func (e Escalation) missing(u *User, namespace string, rules []rbacv1.PolicyRule) error {
	covered, missing := rbacvalidation.Covers(e.Index.RulesFor(u, namespace), rules)
	if covered {
		return nil
	}
	var lines []string
	for _, r := range compactRules(missing) {
		if s := compactString(r); !slices.Contains(lines, s) {
			lines = append(lines, s)
		}
	}
	slices.Sort(lines)
	return fmt.Errorf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.Name, u.Groups, strings.Join(lines, "\n"))
}

// compactRules merges the verbs of rules about one resource (one group,
// one resource, at most one name, nothing else), as upstream's
// CompactRules, so a missing role reads as a few lines.
func compactRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type simple struct{ group, resource, name string }
	var out []rbacv1.PolicyRule
	merged := map[simple]int{} // index in out
	for _, r := range rules {
		if len(r.APIGroups) != 1 || len(r.Resources) != 1 || len(r.ResourceNames) > 1 || len(r.NonResourceURLs) > 0 {
			out = append(out, r)
			continue
		}
		k := simple{r.APIGroups[0], r.Resources[0], ""}
		if len(r.ResourceNames) == 1 {
			k.name = "\x00" + r.ResourceNames[0]
		}
		if i, ok := merged[k]; ok {
			out[i].Verbs = append(out[i].Verbs, r.Verbs...)
			continue
		}
		merged[k] = len(out)
		out = append(out, *r.DeepCopy())
	}
	return out
}

// compactString is upstream's rbacv1helpers.CompactString:
// {APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}.
func compactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}

func hasAggregation(r *rbacv1.ClusterRole) bool {
	return r.AggregationRule != nil && len(r.AggregationRule.ClusterRoleSelectors) > 0
}

// OnlyGCFields reports whether obj differs from old only in what the
// garbage collector and deletion change (upstream's
// IsOnlyMutatingGCFields), and in the system metadata a write always
// moves.
func OnlyGCFields(obj, old runtime.Object) bool {
	cp := obj.DeepCopyObject()
	cm, err1 := meta.Accessor(cp)
	om, err2 := meta.Accessor(old)
	if err1 != nil || err2 != nil {
		return false
	}
	cm.SetOwnerReferences(om.GetOwnerReferences())
	cm.SetFinalizers(om.GetFinalizers())
	cm.SetDeletionTimestamp(om.GetDeletionTimestamp())
	cm.SetDeletionGracePeriodSeconds(om.GetDeletionGracePeriodSeconds())
	cm.SetResourceVersion(om.GetResourceVersion())
	cm.SetManagedFields(om.GetManagedFields())
	cm.SetGeneration(om.GetGeneration())
	return apiequality.Semantic.DeepEqual(cp, old)
}
