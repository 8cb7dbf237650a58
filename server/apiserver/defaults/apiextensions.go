package defaults

import apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

// CustomResourceDefinition is upstream's v1 defaulting (singular and
// listKind from kind, conversion None, the webhook service port), taken
// from apiextensions-apiserver rather than copied.
func CustomResourceDefinition(crd *apiextensionsv1.CustomResourceDefinition) {
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
}
