package validation

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RBAC objects only need URL-safe names (role names like "system:admin"
// contain colons), hence nameIsPathSegment throughout.

func validatePolicyRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var allErrs field.ErrorList
	for i, r := range rules {
		p := field.NewPath("rules").Index(i)
		if len(r.Verbs) == 0 {
			allErrs = append(allErrs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(r.NonResourceURLs) > 0 {
			// Non-resource URLs are cluster-wide by nature.
			if namespaced {
				allErrs = append(allErrs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
				allErrs = append(allErrs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(r.APIGroups) == 0 {
			allErrs = append(allErrs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(r.Resources) == 0 {
			allErrs = append(allErrs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return allErrs
}

func Role(r *rbacv1.Role) field.ErrorList {
	allErrs := validateObjectMeta(&r.ObjectMeta, true, nameIsPathSegment)
	return append(allErrs, validatePolicyRules(r.Rules, true)...)
}

func ClusterRole(r *rbacv1.ClusterRole) field.ErrorList {
	allErrs := validateObjectMeta(&r.ObjectMeta, false, nameIsPathSegment)
	allErrs = append(allErrs, validatePolicyRules(r.Rules, false)...)
	if ar := r.AggregationRule; ar != nil {
		p := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(ar.ClusterRoleSelectors) == 0 {
			allErrs = append(allErrs, field.Required(p, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range ar.ClusterRoleSelectors {
			allErrs = append(allErrs, validateLabelSelector(&ar.ClusterRoleSelectors[i], p.Index(i))...)
		}
	}
	return allErrs
}

func validateRoleRef(ref rbacv1.RoleRef, kinds []string) field.ErrorList {
	var allErrs field.ErrorList
	p := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		allErrs = append(allErrs, field.NotSupported(p.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	ok := false
	for _, k := range kinds {
		ok = ok || k == ref.Kind
	}
	if !ok {
		allErrs = append(allErrs, field.NotSupported(p.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		allErrs = append(allErrs, field.Required(p.Child("name"), ""))
	} else {
		allErrs = append(allErrs, validateName(ref.Name, nameIsPathSegment, p.Child("name"))...)
	}
	return allErrs
}

func validateSubjects(subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var allErrs field.ErrorList
	for i, s := range subjects {
		p := field.NewPath("subjects").Index(i)
		if s.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if s.Name != "" {
				allErrs = append(allErrs, validateName(s.Name, nameIsDNSSubdomain, p.Child("name"))...)
			}
			if s.APIGroup != "" {
				allErrs = append(allErrs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
			}
			// A ClusterRoleBinding has no namespace to default from.
			if !namespaced && s.Namespace == "" {
				allErrs = append(allErrs, field.Required(p.Child("namespace"), ""))
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup != rbacv1.GroupName {
				allErrs = append(allErrs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
			}
		default:
			allErrs = append(allErrs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
		}
	}
	return allErrs
}

func RoleBinding(b *rbacv1.RoleBinding) field.ErrorList {
	allErrs := validateObjectMeta(&b.ObjectMeta, true, nameIsPathSegment)
	allErrs = append(allErrs, validateRoleRef(b.RoleRef, []string{"Role", "ClusterRole"})...)
	return append(allErrs, validateSubjects(b.Subjects, true)...)
}

func ClusterRoleBinding(b *rbacv1.ClusterRoleBinding) field.ErrorList {
	allErrs := validateObjectMeta(&b.ObjectMeta, false, nameIsPathSegment)
	allErrs = append(allErrs, validateRoleRef(b.RoleRef, []string{"ClusterRole"})...)
	return append(allErrs, validateSubjects(b.Subjects, false)...)
}

// roleRefImmutable: a binding grants one role; changing which role would
// silently change every subject's permissions, so it must be recreated.
func roleRefImmutable(newRef, oldRef rbacv1.RoleRef) field.ErrorList {
	if newRef != oldRef {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), newRef, "cannot change roleRef")}
	}
	return nil
}
