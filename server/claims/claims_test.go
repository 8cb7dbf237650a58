package claims

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOfPod(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-web-0"}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
	}}}
	if got := OfPod(pod); !slices.Equal(got, []string{"data-web-0", "web-0-scratch"}) {
		t.Errorf("claims of the pod: %v", got)
	}
}

func TestDefaultClass(t *testing.T) {
	at := func(name string, day int, isDefault bool) *storagev1.StorageClass {
		c := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "x"}
		if isDefault {
			c.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
		}
		c.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, day, 0, 0, 0, 0, time.UTC))
		return c
	}
	if DefaultClass([]*storagev1.StorageClass{at("a", 1, false)}) != nil {
		t.Errorf("a default without any annotated class")
	}
	beta := at("beta", 1, false)
	beta.Annotations = map[string]string{"storageclass.beta.kubernetes.io/is-default-class": "true"}
	if c := DefaultClass([]*storagev1.StorageClass{beta, at("b", 2, false)}); c == nil || c.Name != "beta" {
		t.Errorf("the beta annotation is not honoured: %v", c)
	}
	if c := DefaultClass([]*storagev1.StorageClass{at("old", 1, true), at("new", 3, true), at("mid", 2, true)}); c.Name != "new" {
		t.Errorf("default %s, want the newest", c.Name)
	}
	if c := DefaultClass([]*storagev1.StorageClass{at("z", 1, true), at("y", 1, true)}); c.Name != "y" {
		t.Errorf("tie broken to %s, want y by name", c.Name)
	}
}
