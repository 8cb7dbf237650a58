package registry

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The reviews (`kubectl auth whoami`, `kubectl auth can-i`, and the
// SubjectAccessReviews other components send) are create-only and
// answered from the API server's own authentication and authorizer chain;
// nothing is stored, so they have no strategy.

func tokenReviews() *Resource {
	return &Resource{
		GVR: gvr("authentication.k8s.io", "v1", "tokenreviews"), Kind: "TokenReview", Singular: "tokenreview",
		Review: true, Verbs: []string{"create"},
		New: func() runtime.Object { return &authenticationv1.TokenReview{} }, NewList: func() runtime.Object { return &metav1.List{} },
	}
}

func selfSubjectReviews() *Resource {
	return &Resource{
		GVR: gvr("authentication.k8s.io", "v1", "selfsubjectreviews"), Kind: "SelfSubjectReview", Singular: "selfsubjectreview",
		Review: true, Verbs: []string{"create"},
		New: func() runtime.Object { return &authenticationv1.SelfSubjectReview{} }, NewList: func() runtime.Object { return &metav1.List{} },
	}
}

func selfSubjectAccessReviews() *Resource {
	return &Resource{
		GVR: gvr("authorization.k8s.io", "v1", "selfsubjectaccessreviews"), Kind: "SelfSubjectAccessReview", Singular: "selfsubjectaccessreview",
		Review: true, Verbs: []string{"create"},
		New: func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }, NewList: func() runtime.Object { return &metav1.List{} },
	}
}

func selfSubjectRulesReviews() *Resource {
	return &Resource{
		GVR: gvr("authorization.k8s.io", "v1", "selfsubjectrulesreviews"), Kind: "SelfSubjectRulesReview", Singular: "selfsubjectrulesreview",
		Review: true, Verbs: []string{"create"},
		New: func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }, NewList: func() runtime.Object { return &metav1.List{} },
	}
}

func subjectAccessReviews() *Resource {
	return &Resource{
		GVR: gvr("authorization.k8s.io", "v1", "subjectaccessreviews"), Kind: "SubjectAccessReview", Singular: "subjectaccessreview",
		Review: true, Verbs: []string{"create"},
		New: func() runtime.Object { return &authorizationv1.SubjectAccessReview{} }, NewList: func() runtime.Object { return &metav1.List{} },
	}
}

func localSubjectAccessReviews() *Resource {
	return &Resource{
		GVR: gvr("authorization.k8s.io", "v1", "localsubjectaccessreviews"), Kind: "LocalSubjectAccessReview", Singular: "localsubjectaccessreview",
		Review: true, Namespaced: true, Verbs: []string{"create"},
		New: func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} }, NewList: func() runtime.Object { return &metav1.List{} },
	}
}
