package kubelet

import (
	"strings"
	"testing"

	"github.com/containerd/containerd/identifiers"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Container IDs are identifiers containerd accepts, even for the longest
// container names (the conformance specs name containers after
// generated pod names), and stay distinct per container and attempt.
func TestContainerIDIsAContainerdIdentifier(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "cc391b07-9fe6-45aa-97cf-c7caf7989ea6"}}
	long := "my-hostname-basic-0082b381-6b9a-4b8e-81a7-0cc7ac9f4e75"
	longest := strings.Repeat("a", 63)
	seen := map[string]bool{}
	for _, name := range []string{"app", long, longest, longest[:62] + "b"} {
		for _, attempt := range []int{0, 1, 12345} {
			id := containerID(pod, name, attempt)
			if err := identifiers.Validate(id); err != nil {
				t.Errorf("%s attempt %d: %v", name, attempt, err)
			}
			if seen[id] {
				t.Errorf("%s attempt %d: id %s given twice", name, attempt, id)
			}
			seen[id] = true
		}
	}
	if got := containerID(pod, "app", 2); got != "cc391b07-9fe6-45aa-97cf-c7caf7989ea6-app-2" {
		t.Errorf("a short name's id changed: %s", got)
	}
}
