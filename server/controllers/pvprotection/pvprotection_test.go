package pvprotection

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestPVProtection(t *testing.T) {
	for _, tc := range []struct {
		name       string
		deleting   bool
		phase      corev1.PersistentVolumePhase
		finalizers []string
		want       []string
	}{
		{name: "a volume without the finalizer gets it", phase: corev1.VolumeAvailable, want: []string{Finalizer}},
		{name: "deleted while Bound: kept", deleting: true, phase: corev1.VolumeBound, finalizers: []string{Finalizer}, want: []string{Finalizer}},
		{name: "deleted once Released: removed", deleting: true, phase: corev1.VolumeReleased, finalizers: []string{"example.com/x", Finalizer}, want: []string{"example.com/x"}},
		{name: "deleted while Available: removed", deleting: true, phase: corev1.VolumeAvailable, finalizers: []string{Finalizer}, want: nil},
		{name: "deleted without it: left alone", deleting: true, phase: corev1.VolumeBound, finalizers: []string{"example.com/x"}, want: []string{"example.com/x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Finalizers: tc.finalizers},
				Status: corev1.PersistentVolumeStatus{Phase: tc.phase}}
			if tc.deleting {
				now := metav1.Now()
				pv.DeletionTimestamp = &now
			}
			client := fake.NewSimpleClientset(pv)
			factory := informers.NewSharedInformerFactory(client, 0)
			c := New(client, factory)
			if err := factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(pv); err != nil {
				t.Fatal(err)
			}
			if err := c.sync(context.Background(), "pv"); err != nil {
				t.Fatal(err)
			}
			got, err := client.CoreV1().PersistentVolumes().Get(context.Background(), "pv", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Finalizers, tc.want) {
				t.Errorf("finalizers %v, want %v", got.Finalizers, tc.want)
			}
		})
	}
}
