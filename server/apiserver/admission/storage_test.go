package admission

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

var (
	pvcsGVR = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	pvsGVR  = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
)

func class(name string, isDefault bool, age time.Duration) *storagev1.StorageClass {
	c := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age))}, Provisioner: "example.com/" + name}
	if isDefault {
		c.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	return c
}

// storageChain is the chain over the given StorageClasses (and namespaces
// that all exist).
func storageChain(t *testing.T, classes ...*storagev1.StorageClass) *Chain {
	t.Helper()
	objs := &fakeObjects{items: map[string]runtime.Object{}}
	for _, c := range classes {
		objs.items["/"+c.Name] = c
	}
	return New(Config{Getter: func(gvr schema.GroupVersionResource) ObjectGetter {
		switch gvr {
		case storageClassesResource:
			return objs
		case serviceAccountsGVR:
			return testAccounts()
		}
		return namespaceGetter{}
	}})
}

func TestDefaultStorageClass(t *testing.T) {
	for _, tc := range []struct {
		name    string
		classes []*storagev1.StorageClass
		asked   *string
		beta    bool
		op      string
		want    *string
	}{
		{name: "no class gets the default", classes: []*storagev1.StorageClass{class("fast", false, 0), class("local-path", true, time.Hour)},
			want: ptr.To("local-path")},
		{name: "several defaults: the newest", classes: []*storagev1.StorageClass{class("old", true, time.Hour), class("new", true, time.Minute), class("plain", false, 0)},
			want: ptr.To("new")},
		{name: "no default: unchanged", classes: []*storagev1.StorageClass{class("fast", false, 0)}, want: nil},
		{name: "no classes at all", want: nil},
		{name: "an explicit class stays", classes: []*storagev1.StorageClass{class("local-path", true, 0)}, asked: ptr.To("fast"), want: ptr.To("fast")},
		{name: `class "" means no class`, classes: []*storagev1.StorageClass{class("local-path", true, 0)}, asked: ptr.To(""), want: ptr.To("")},
		{name: "the beta annotation is a class", classes: []*storagev1.StorageClass{class("local-path", true, 0)}, beta: true, want: nil},
		{name: "updates are left alone", classes: []*storagev1.StorageClass{class("local-path", true, 0)}, op: "UPDATE", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := storageChain(t, tc.classes...)
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: tc.asked}}
			if tc.beta {
				pvc.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: "manual"}
			}
			op := tc.op
			if op == "" {
				op = "CREATE"
			}
			a := &Attributes{Operation: op, Resource: pvcsGVR, Namespace: "default", Name: "data", Object: pvc}
			if err := c.Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			if got := pvc.Spec.StorageClassName; (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("storageClassName = %v, want %v", ptr.Deref(got, "<nil>"), ptr.Deref(tc.want, "<nil>"))
			}
		})
	}
}

func TestStorageObjectInUseProtection(t *testing.T) {
	c := storageChain(t)
	for _, tc := range []struct {
		name        string
		op          string
		gvr         schema.GroupVersionResource
		subresource string
		obj         runtime.Object
		want        []string
	}{
		{name: "new claim", op: "CREATE", gvr: pvcsGVR, obj: &corev1.PersistentVolumeClaim{}, want: []string{"kubernetes.io/pvc-protection"}},
		{name: "new volume", op: "CREATE", gvr: pvsGVR, obj: &corev1.PersistentVolume{}, want: []string{"kubernetes.io/pv-protection"}},
		{name: "already there, once", op: "CREATE", gvr: pvcsGVR,
			obj:  &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{"example.com/x", "kubernetes.io/pvc-protection"}}},
			want: []string{"example.com/x", "kubernetes.io/pvc-protection"}},
		{name: "claim update", op: "UPDATE", gvr: pvcsGVR, obj: &corev1.PersistentVolumeClaim{}, want: nil},
		{name: "volume status", op: "CREATE", gvr: pvsGVR, subresource: "status", obj: &corev1.PersistentVolume{}, want: nil},
		{name: "other kinds", op: "CREATE", gvr: corev1.SchemeGroupVersion.WithResource("configmaps"), obj: &corev1.ConfigMap{}, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Attributes{Operation: tc.op, Resource: tc.gvr, Subresource: tc.subresource, Object: tc.obj}
			if err := c.Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			got := tc.obj.(metav1.Object).GetFinalizers()
			if !slices.Equal(got, tc.want) {
				t.Errorf("finalizers %v, want %v", got, tc.want)
			}
		})
	}
}
