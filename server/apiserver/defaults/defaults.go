// Package defaults fills in the upstream (kube-apiserver) v1 defaults for the
// typed k8s.io/api objects kelp serves.
//
// Each kind's function (Pod, Service, Deployment, ...) is named by that
// kind's entry in the API server's registry, which calls it on every create
// and update, after decoding and before validation, exactly where
// kube-apiserver runs the scheme's generated SetObjectDefaults_* functions. The rules here mirror those generated
// defaulters (pkg/apis/*/v1/defaults.go plus the +default markers in
// k8s.io/api) for the fields clients can observe, plus a few steps upstream
// performs in registry strategies or built-in admission plugins that clients
// also see on every object (namespace finalizers, service IP families, Job
// selector generation, pod priority); each of those is marked where it lives.
//
// Invariants:
//   - Defaulting is idempotent: applying it twice gives the same object as
//     once. The API server may default an object on both decode and update
//     paths.
//   - It only fills unset (zero / nil) fields; it never overwrites a value
//     the client sent.
package defaults

import (
	"math"

	corev1 "k8s.io/api/core/v1"
)

// PodTemplate defaults a core/v1 PodTemplate's pod template.
func PodTemplate(o *corev1.PodTemplate) { podTemplateSpec(&o.Template) }

// ptr returns a pointer to a copy of v. Each defaulted pointer field gets its
// own allocation so objects never share mutable state.

// maxInt32 is used for Job.spec.backoffLimit when backoffLimitPerIndex is set.
const maxInt32 = math.MaxInt32
