package defaultstest

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestApplyByType: a kind the dispatch knows is defaulted, lists item by
// item; a kind it does not know is left alone.
func TestApplyByType(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}
	Apply(pod)
	if pod.Spec.RestartPolicy != corev1.RestartPolicyAlways || pod.Spec.Containers[0].ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("pod not defaulted: %+v", pod.Spec)
	}
	list := &corev1.SecretList{Items: []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "s"}}}}
	Apply(list)
	if list.Items[0].Type != corev1.SecretTypeOpaque {
		t.Errorf("list item not defaulted: %q", list.Items[0].Type)
	}
	cm := &corev1.ConfigMap{Data: map[string]string{"k": "v"}}
	Apply(cm)
	if len(cm.Data) != 1 || cm.Data["k"] != "v" {
		t.Errorf("an undefaulted kind changed: %v", cm.Data)
	}
}
