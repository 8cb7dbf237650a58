package registry

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNamespacePrepareForCreate(t *testing.T) {
	s := served(t, "", "namespaces").Strategy
	for _, tc := range []struct {
		name  string
		in    []string
		phase corev1.NamespacePhase
		want  []string
	}{
		{name: "no finalizers", want: []string{"kubernetes"}},
		{name: "already has kubernetes", in: []string{"kubernetes"}, want: []string{"kubernetes"}},
		{name: "other finalizer kept first", in: []string{"example.com/x"}, want: []string{"example.com/x", "kubernetes"}},
		{name: "kubernetes not first", in: []string{"example.com/x", "kubernetes"}, want: []string{"example.com/x", "kubernetes"}},
		{name: "client-set phase is overridden", phase: corev1.NamespaceTerminating, want: []string{"kubernetes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
				Spec: corev1.NamespaceSpec{Finalizers: toFinalizers(tc.in)}, Status: corev1.NamespaceStatus{Phase: tc.phase}}
			s.PrepareForCreate(ns)
			// Twice: the hook is idempotent, the finalizer is added once.
			s.PrepareForCreate(ns)
			if got := fromFinalizers(ns.Spec.Finalizers); !slices.Equal(got, tc.want) {
				t.Errorf("spec.finalizers = %v, want %v", got, tc.want)
			}
			if ns.Status.Phase != corev1.NamespaceActive {
				t.Errorf("phase = %q, want Active", ns.Status.Phase)
			}
			if len(ns.Finalizers) != 0 {
				t.Errorf("metadata.finalizers = %v, want none", ns.Finalizers)
			}
		})
	}
}

func TestNamespaceMarkDeleted(t *testing.T) {
	s := served(t, "", "namespaces").Strategy
	earlier := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	for _, tc := range []struct {
		name          string
		spec, meta    []string
		deletedAt     *metav1.Time
		wantZeroGrace bool
	}{
		{name: "kubernetes finalizer pending", spec: []string{"kubernetes"}},
		{name: "metadata finalizer pending", meta: []string{"example.com/hold"}},
		{name: "both pending", spec: []string{"kubernetes"}, meta: []string{"example.com/hold"}},
		{name: "no finalizers left", wantZeroGrace: true},
		{name: "second delete keeps the timestamp", spec: []string{"kubernetes"}, deletedAt: &earlier},
		{name: "second delete after finalize", deletedAt: &earlier, wantZeroGrace: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := &corev1.Namespace{
				ObjectMeta: metav1.ObjectMeta{Name: "team-a", Finalizers: tc.meta, DeletionTimestamp: tc.deletedAt},
				Spec:       corev1.NamespaceSpec{Finalizers: toFinalizers(tc.spec)},
				Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
			}
			before := time.Now().Add(-time.Second)
			s.MarkDeleted(ns)
			if ns.Status.Phase != corev1.NamespaceTerminating {
				t.Errorf("phase = %q, want Terminating", ns.Status.Phase)
			}
			switch {
			case ns.DeletionTimestamp == nil:
				t.Fatal("deletionTimestamp not set")
			case tc.deletedAt != nil && !ns.DeletionTimestamp.Equal(tc.deletedAt):
				t.Errorf("deletionTimestamp = %v, want the first delete's %v", ns.DeletionTimestamp, tc.deletedAt)
			case tc.deletedAt == nil && ns.DeletionTimestamp.Time.Before(before):
				t.Errorf("deletionTimestamp = %v, want about now", ns.DeletionTimestamp)
			}
			g := ns.DeletionGracePeriodSeconds
			if tc.wantZeroGrace && (g == nil || *g != 0) {
				t.Errorf("deletionGracePeriodSeconds = %v, want 0 (nothing left to wait for)", g)
			}
			if !tc.wantZeroGrace && g != nil {
				t.Errorf("deletionGracePeriodSeconds = %d, want unset while finalizers remain", *g)
			}
			// The finalizers themselves are not touched.
			if got := fromFinalizers(ns.Spec.Finalizers); !slices.Equal(got, tc.spec) {
				t.Errorf("spec.finalizers = %v, want %v", got, tc.spec)
			}
			if !slices.Equal(ns.Finalizers, tc.meta) {
				t.Errorf("metadata.finalizers = %v, want %v", ns.Finalizers, tc.meta)
			}
		})
	}
}

func TestNamespaceBeforeStore(t *testing.T) {
	s := served(t, "", "namespaces").Strategy
	now := metav1.Now()
	for _, tc := range []struct {
		name          string
		ns            corev1.Namespace
		wantZeroGrace bool
	}{
		{name: "terminating, finalized", wantZeroGrace: true, ns: corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now},
			Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}},
		{name: "terminating, kubernetes finalizer left", ns: corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now},
			Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
			Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}},
		{name: "terminating, metadata finalizer left", ns: corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now, Finalizers: []string{"example.com/hold"}},
			Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}},
		{name: "active without finalizers", ns: corev1.Namespace{
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}},
		{name: "phase Terminating but not deleted", ns: corev1.Namespace{
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns.DeepCopy()
			ns.Name = "team-a"
			s.BeforeStore(ns)
			g := ns.DeletionGracePeriodSeconds
			if tc.wantZeroGrace && (g == nil || *g != 0) {
				t.Errorf("deletionGracePeriodSeconds = %v, want 0", g)
			}
			if !tc.wantZeroGrace && g != nil {
				t.Errorf("deletionGracePeriodSeconds = %d, want unset", *g)
			}
			if ns.Status.Phase != tc.ns.Status.Phase {
				t.Errorf("phase changed to %q", ns.Status.Phase)
			}
		})
	}
}

// The main endpoint does not change spec.finalizers: only /finalize does.
func TestNamespacePrepareForUpdateKeepsSpec(t *testing.T) {
	s := served(t, "", "namespaces").Strategy
	old := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	for _, spec := range [][]string{nil, {}, {"example.com/other"}} {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a"}},
			Spec: corev1.NamespaceSpec{Finalizers: toFinalizers(spec)}}
		s.PrepareForUpdate(obj, old)
		if got := fromFinalizers(obj.Spec.Finalizers); !slices.Equal(got, []string{"kubernetes"}) {
			t.Errorf("client spec %v: spec.finalizers = %v, want the stored [kubernetes]", spec, got)
		}
		if obj.Labels["team"] != "a" {
			t.Errorf("client spec %v: metadata changed: %v", spec, obj.Labels)
		}
	}
	if got := fromFinalizers(old.Spec.Finalizers); !slices.Equal(got, []string{"kubernetes"}) {
		t.Errorf("old object modified: %v", got)
	}
}

func toFinalizers(in []string) []corev1.FinalizerName {
	if in == nil {
		return nil
	}
	out := make([]corev1.FinalizerName, 0, len(in))
	for _, f := range in {
		out = append(out, corev1.FinalizerName(f))
	}
	return out
}

func fromFinalizers(in []corev1.FinalizerName) []string {
	var out []string
	for _, f := range in {
		out = append(out, string(f))
	}
	return out
}
