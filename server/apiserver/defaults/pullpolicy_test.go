package defaults

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestImagePullPolicy(t *testing.T) {
	tests := []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"nginx:1.27", corev1.PullIfNotPresent},
		{"registry:5000/app", corev1.PullAlways},
		{"registry:5000/app:v1", corev1.PullIfNotPresent},
		{"nginx@sha256:abc", corev1.PullIfNotPresent},
		{"nginx:latest@sha256:abc", corev1.PullAlways},
		{"username/container-lab:v2", corev1.PullIfNotPresent},
	}
	for _, tc := range tests {
		if got := pullPolicyFor(tc.image); got != tc.want {
			t.Errorf("pullPolicyFor(%q) = %q, want %q", tc.image, got, tc.want)
		}
	}
}
