// Package bootstrappolicy is upstream's RBAC bootstrap policy (the roles
// and bindings kube-apiserver reconciles at every start, from
// plugin/pkg/auth/authorizer/rbac/bootstrappolicy) and its reconciliation
// through the API. The roles are upstream's at 1.37 with the feature gates
// kelp serves (no DRA); what kelp adds for its own
// components is in kelp.go.
package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The API groups rules name.
const (
	legacy                = ""
	apps                  = "apps"
	autoscaling           = "autoscaling"
	batch                 = "batch"
	extensions            = "extensions"
	policy                = "policy"
	networking            = "networking.k8s.io"
	coordination          = "coordination.k8s.io"
	discovery             = "discovery.k8s.io"
	events                = "events.k8s.io"
	storage               = "storage.k8s.io"
	certificates          = "certificates.k8s.io"
	authentication        = "authentication.k8s.io"
	authorization         = "authorization.k8s.io"
	rbacGroup             = rbacv1.GroupName
	admissionRegistration = "admissionregistration.k8s.io"
)

// Verb sets, as upstream names them.
var (
	read      = []string{"get", "list", "watch"}
	readWrite = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	write     = []string{"create", "update", "patch", "delete", "deletecollection"}
)

// rule builds a resource rule: verbs on resources of groups.
type rule rbacv1.PolicyRule

func verbs(v ...string) rule { return rule{Verbs: v} }

func (r rule) groups(g ...string) rule    { r.APIGroups = g; return r }
func (r rule) resources(s ...string) rule { r.Resources = s; return r }
func (r rule) names(n ...string) rule     { r.ResourceNames = n; return r }
func (r rule) urls(u ...string) rule      { r.NonResourceURLs = u; return r }

func rules(rs ...rule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rs))
	for i, r := range rs {
		out[i] = rbacv1.PolicyRule(r)
	}
	return out
}

// eventsRule lets a component record Events in both Event APIs.
func eventsRule() rule {
	return verbs("create", "update", "patch").groups(legacy, events).resources("events")
}

// Labels and annotations of every bootstrap object.
const (
	bootstrappingLabel = "kubernetes.io/bootstrapping"
	// AutoUpdateAnnotation, set to "false" on an object, stops the
	// reconciliation at start from touching it.
	AutoUpdateAnnotation = rbacv1.AutoUpdateAnnotationKey
	aggregateToAdmin     = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateToEdit      = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToView      = "rbac.authorization.k8s.io/aggregate-to-view"
)

func meta(name string, labels map[string]string) metav1.ObjectMeta {
	l := map[string]string{bootstrappingLabel: "rbac-defaults"}
	for k, v := range labels {
		l[k] = v
	}
	return metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{AutoUpdateAnnotation: "true"}}
}

func clusterRole(name string, rs ...rule) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: meta(name, nil), Rules: rules(rs...)}
}

func aggregated(name string, labels map[string]string, selectorLabel string) rbacv1.ClusterRole {
	r := rbacv1.ClusterRole{ObjectMeta: meta(name, labels), AggregationRule: &rbacv1.AggregationRule{
		ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{selectorLabel: "true"}}}}}
	return r
}

func subjectsOf(kind string, names ...string) []rbacv1.Subject {
	out := make([]rbacv1.Subject, len(names))
	for i, n := range names {
		out[i] = rbacv1.Subject{Kind: kind, APIGroup: rbacGroup, Name: n}
	}
	return out
}

func users(names ...string) []rbacv1.Subject  { return subjectsOf(rbacv1.UserKind, names...) }
func groups(names ...string) []rbacv1.Subject { return subjectsOf(rbacv1.GroupKind, names...) }

func serviceAccount(namespace, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
}

func clusterBinding(role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{ObjectMeta: meta(role, nil),
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "ClusterRole", Name: role},
		Subjects: subjects}
}

func namespacedRole(namespace, name string, rs ...rule) rbacv1.Role {
	m := meta(name, nil)
	m.Namespace = namespace
	return rbacv1.Role{ObjectMeta: m, Rules: rules(rs...)}
}

func roleBinding(namespace, role string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
	m := meta(role, nil)
	m.Namespace = namespace
	return rbacv1.RoleBinding{ObjectMeta: m, RoleRef: rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "Role", Name: role}, Subjects: subjects}
}
