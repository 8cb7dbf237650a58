package auth

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// RBAC is upstream's RBAC authorizer (kube-apiserver's
// --authorization-mode=...,RBAC): a request is allowed when a rule of a
// role bound to the user, one of its groups or its service account
// covers it. It never denies: a request no rule covers gets no opinion,
// with no reason, as upstream's.
//
// The roles and bindings come from an RBACIndex, which the API server
// keeps current from its watch caches: a binding applies as soon as its
// watch event reaches the index, as upstream's informer-fed authorizer.
type RBAC struct {
	Index *RBACIndex
}

func (a RBAC) Authorize(u *User, attrs Attributes) (Decision, string) {
	if u == nil {
		return DecisionNoOpinion, ""
	}
	var allowedBy *RuleSource
	a.Index.VisitRules(u, attrs.Namespace, func(source RuleSource, rule *rbacv1.PolicyRule) bool {
		if RuleAllows(attrs, rule) {
			// A copy: only a match's source escapes to the heap.
			matched := source
			allowedBy = &matched
			return false
		}
		return true
	})
	if allowedBy != nil {
		return DecisionAllow, "RBAC: allowed by " + allowedBy.String()
	}
	return DecisionNoOpinion, ""
}

// RuleAllows reports whether one policy rule covers a request: the verb,
// and either the API group, resource (or resource/subresource) and name,
// or the non-resource path. "*" matches anything in each list; a rule
// resource "*/<sub>" matches that subresource of any resource; a
// non-resource URL ending in "*" matches by prefix. A rule with
// resourceNames never matches a request without a name (create, list).
func RuleAllows(a Attributes, rule *rbacv1.PolicyRule) bool {
	if !has(rule.Verbs, a.Verb) {
		return false
	}
	if !a.IsResource {
		for _, u := range rule.NonResourceURLs {
			if u == rbacv1.NonResourceAll || u == a.Path ||
				(strings.HasSuffix(u, "*") && strings.HasPrefix(a.Path, strings.TrimSuffix(u, "*"))) {
				return true
			}
		}
		return false
	}
	if !has(rule.APIGroups, a.Group) || !resourceMatches(rule.Resources, a.Resource, a.Subresource) {
		return false
	}
	return len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, a.Name)
}

// has: the list holds want or "*".
func has(list []string, want string) bool {
	for _, v := range list {
		if v == want || v == rbacv1.VerbAll {
			return true
		}
	}
	return false
}

func resourceMatches(ruleResources []string, resource, subresource string) bool {
	for _, r := range ruleResources {
		if r == rbacv1.ResourceAll {
			return true
		}
		if subresource == "" {
			if r == resource {
				return true
			}
			continue
		}
		// resource/subresource, without building the combined string on
		// the hot path.
		if len(r) == len(resource)+1+len(subresource) && strings.HasPrefix(r, resource) &&
			r[len(resource)] == '/' && strings.HasSuffix(r, subresource) {
			return true
		}
		if len(r) == len(subresource)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, subresource) {
			return true
		}
	}
	return false
}

// ServiceAccountUsername is a service account's user name, as its tokens
// authenticate it and RBAC subjects of kind ServiceAccount name it.
func ServiceAccountUsername(namespace, name string) string {
	return serviceAccountPrefix + namespace + ":" + name
}

const serviceAccountPrefix = "system:serviceaccount:"

// subject is an index key: a user name or a group name. ServiceAccount
// subjects are indexed as their user names.
type subject struct {
	group bool
	name  string
}

type nsName struct{ namespace, name string }

type nsSubject struct {
	namespace string
	subject
}

// RBACIndex holds every Role, ClusterRole, RoleBinding and
// ClusterRoleBinding, with the bindings indexed by subject, so a decision
// looks at the bindings of the user and its groups only, however many
// bindings the cluster has. Objects are shared with the watch cache that
// fed them and never changed.
type RBACIndex struct {
	mu                  sync.RWMutex
	roles               map[nsName]*rbacv1.Role
	clusterRoles        map[string]*rbacv1.ClusterRole
	roleBindings        map[nsName]*rbacv1.RoleBinding
	clusterRoleBindings map[string]*rbacv1.ClusterRoleBinding
	// Invariant: a binding is in the subject maps under each of its
	// subjects exactly while it is in the maps above.
	rbBySubject  map[nsSubject]map[string]*rbacv1.RoleBinding
	crbBySubject map[subject]map[string]*rbacv1.ClusterRoleBinding
}

func NewRBACIndex() *RBACIndex {
	return &RBACIndex{
		roles:               map[nsName]*rbacv1.Role{},
		clusterRoles:        map[string]*rbacv1.ClusterRole{},
		roleBindings:        map[nsName]*rbacv1.RoleBinding{},
		clusterRoleBindings: map[string]*rbacv1.ClusterRoleBinding{},
		rbBySubject:         map[nsSubject]map[string]*rbacv1.RoleBinding{},
		crbBySubject:        map[subject]map[string]*rbacv1.ClusterRoleBinding{},
	}
}

func subjectKey(s rbacv1.Subject, bindingNamespace string) (subject, bool) {
	switch s.Kind {
	case rbacv1.UserKind:
		return subject{name: s.Name}, true
	case rbacv1.GroupKind:
		return subject{group: true, name: s.Name}, true
	case rbacv1.ServiceAccountKind:
		// A RoleBinding's service account may leave its namespace to the
		// binding's.
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return subject{name: ServiceAccountUsername(ns, s.Name)}, true
	}
	return subject{}, false
}

// Set adds or replaces one RBAC object.
func (x *RBACIndex) Set(obj runtime.Object) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.setLocked(obj)
}

// Delete removes one RBAC object.
func (x *RBACIndex) Delete(obj runtime.Object) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.deleteLocked(obj)
}

// Replace makes the objects of obj's kind exactly objs (after a relist of
// that kind's watch cache); example only names the kind.
func (x *RBACIndex) Replace(example runtime.Object, objs []runtime.Object) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch example.(type) {
	case *rbacv1.Role:
		x.roles = map[nsName]*rbacv1.Role{}
	case *rbacv1.ClusterRole:
		x.clusterRoles = map[string]*rbacv1.ClusterRole{}
	case *rbacv1.RoleBinding:
		x.roleBindings = map[nsName]*rbacv1.RoleBinding{}
		x.rbBySubject = map[nsSubject]map[string]*rbacv1.RoleBinding{}
	case *rbacv1.ClusterRoleBinding:
		x.clusterRoleBindings = map[string]*rbacv1.ClusterRoleBinding{}
		x.crbBySubject = map[subject]map[string]*rbacv1.ClusterRoleBinding{}
	}
	for _, o := range objs {
		x.setLocked(o)
	}
}

func (x *RBACIndex) setLocked(obj runtime.Object) {
	x.deleteLocked(obj)
	switch o := obj.(type) {
	case *rbacv1.Role:
		x.roles[nsName{o.Namespace, o.Name}] = o
	case *rbacv1.ClusterRole:
		x.clusterRoles[o.Name] = o
	case *rbacv1.RoleBinding:
		x.roleBindings[nsName{o.Namespace, o.Name}] = o
		for _, s := range o.Subjects {
			if k, ok := subjectKey(s, o.Namespace); ok {
				key := nsSubject{o.Namespace, k}
				if x.rbBySubject[key] == nil {
					x.rbBySubject[key] = map[string]*rbacv1.RoleBinding{}
				}
				x.rbBySubject[key][o.Name] = o
			}
		}
	case *rbacv1.ClusterRoleBinding:
		x.clusterRoleBindings[o.Name] = o
		for _, s := range o.Subjects {
			if k, ok := subjectKey(s, ""); ok {
				if x.crbBySubject[k] == nil {
					x.crbBySubject[k] = map[string]*rbacv1.ClusterRoleBinding{}
				}
				x.crbBySubject[k][o.Name] = o
			}
		}
	}
}

func (x *RBACIndex) deleteLocked(obj runtime.Object) {
	switch o := obj.(type) {
	case *rbacv1.Role:
		delete(x.roles, nsName{o.Namespace, o.Name})
	case *rbacv1.ClusterRole:
		delete(x.clusterRoles, o.Name)
	case *rbacv1.RoleBinding:
		old, ok := x.roleBindings[nsName{o.Namespace, o.Name}]
		if !ok {
			return
		}
		delete(x.roleBindings, nsName{o.Namespace, o.Name})
		for _, s := range old.Subjects {
			if k, ok := subjectKey(s, old.Namespace); ok {
				key := nsSubject{old.Namespace, k}
				delete(x.rbBySubject[key], old.Name)
				if len(x.rbBySubject[key]) == 0 {
					delete(x.rbBySubject, key)
				}
			}
		}
	case *rbacv1.ClusterRoleBinding:
		old, ok := x.clusterRoleBindings[o.Name]
		if !ok {
			return
		}
		delete(x.clusterRoleBindings, o.Name)
		for _, s := range old.Subjects {
			if k, ok := subjectKey(s, ""); ok {
				delete(x.crbBySubject[k], old.Name)
				if len(x.crbBySubject[k]) == 0 {
					delete(x.crbBySubject, k)
				}
			}
		}
	}
}

// RuleSource is where a rule came from: a binding, its role and the
// subject it matched. Its String is upstream's (the reason of an allow).
// A value, so visiting a rule allocates nothing.
type RuleSource struct {
	kind, name, namespace string
	roleRef               rbacv1.RoleRef
	subject               subject
}

func (b RuleSource) String() string {
	var who string
	switch sa, isSA := strings.CutPrefix(b.subject.name, serviceAccountPrefix); {
	case b.subject.group:
		who = fmt.Sprintf("Group %q", b.subject.name)
	case isSA && strings.Contains(sa, ":"):
		ns, name, _ := strings.Cut(sa, ":")
		who = fmt.Sprintf("ServiceAccount %q", name+"/"+ns)
	default:
		who = fmt.Sprintf("User %q", b.subject.name)
	}
	name := b.name
	if b.kind == "RoleBinding" {
		name = b.name + "/" + b.namespace
	}
	return fmt.Sprintf("%s %q of %s %q to %s", b.kind, name, b.roleRef.Kind, b.roleRef.Name, who)
}

// userSubjects are the index keys a user matches: its name and each group.
func userSubjects(u *User, visit func(subject) bool) bool {
	if !visit(subject{name: u.Name}) {
		return false
	}
	for _, g := range u.Groups {
		if !visit(subject{group: true, name: g}) {
			return false
		}
	}
	return true
}

// VisitRules calls visit with each rule granted to u cluster-wide and, if
// namespace is set, in namespace, until visit returns false. A rule may
// come more than once (two bindings of one role). Bindings of missing
// roles grant nothing.
func (x *RBACIndex) VisitRules(u *User, namespace string, visit func(source RuleSource, rule *rbacv1.PolicyRule) bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	cont := userSubjects(u, func(s subject) bool {
		for _, b := range x.crbBySubject[s] {
			rules, _ := x.roleRefRulesLocked(b.RoleRef, "")
			for i := range rules {
				if !visit(RuleSource{kind: "ClusterRoleBinding", name: b.Name, roleRef: b.RoleRef, subject: s}, &rules[i]) {
					return false
				}
			}
		}
		return true
	})
	if !cont || namespace == "" {
		return
	}
	userSubjects(u, func(s subject) bool {
		for _, b := range x.rbBySubject[nsSubject{namespace, s}] {
			rules, _ := x.roleRefRulesLocked(b.RoleRef, namespace)
			for i := range rules {
				if !visit(RuleSource{kind: "RoleBinding", name: b.Name, namespace: namespace, roleRef: b.RoleRef, subject: s}, &rules[i]) {
					return false
				}
			}
		}
		return true
	})
}

// RulesFor returns every rule granted to u cluster-wide and in namespace:
// what escalation checks compare against and SelfSubjectRulesReview lists.
func (x *RBACIndex) RulesFor(u *User, namespace string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	x.VisitRules(u, namespace, func(_ RuleSource, r *rbacv1.PolicyRule) bool {
		out = append(out, *r)
		return true
	})
	return out
}

// RoleRefRules returns the rules of the role a binding in namespace refers
// to, and false if there is no such role.
func (x *RBACIndex) RoleRefRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.roleRefRulesLocked(ref, namespace)
}

func (x *RBACIndex) roleRefRulesLocked(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, bool) {
	switch ref.Kind {
	case "Role":
		if r, ok := x.roles[nsName{namespace, ref.Name}]; ok {
			return r.Rules, true
		}
	case "ClusterRole":
		if r, ok := x.clusterRoles[ref.Name]; ok {
			return r.Rules, true
		}
	}
	return nil, false
}
