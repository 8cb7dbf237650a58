package admission

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
)

func resources(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// The LimitRange of upstream's conformance spec, defaulted as the API
// server stores it.
func specLimitRange() *corev1.LimitRange {
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "ns"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:                 corev1.LimitTypeContainer,
			Min:                  resources("cpu", "100m", "memory", "10000Mi"),
			Max:                  resources("cpu", "500m", "memory", "500Gi"),
			DefaultRequest:       resources("cpu", "200m", "memory", "20000Mi"),
			Default:              resources("cpu", "300m", "memory", "30000Mi"),
			MaxLimitRequestRatio: resources("cpu", "4"),
		}, {
			Type: corev1.LimitTypePersistentVolumeClaim,
			Min:  resources("storage", "1Gi"), Max: resources("storage", "10Gi"),
		}}}}
	defaults.LimitRange(lr)
	return lr
}

func limitRangerWith(lrs ...*corev1.LimitRange) limitRanger {
	f := &fakeObjects{items: map[string]runtime.Object{}}
	for _, lr := range lrs {
		f.items[lr.Namespace+"/"+lr.Name] = lr
	}
	return limitRanger{ranges: f}
}

func limitedPod(res ...corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	for i, r := range res {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c" + string(rune('0'+i)), Image: "busybox", Resources: r})
	}
	return p
}

func admitLimited(t *testing.T, l limitRanger, p *corev1.Pod) error {
	t.Helper()
	a := &Attributes{Operation: "CREATE", Resource: podsResource, Namespace: "ns", Name: p.Name, Object: p}
	if err := l.Admit(context.Background(), a); err != nil {
		return err
	}
	return l.Validate(context.Background(), a)
}

// A pod with no resources gets the defaults (requests defaultRequest,
// limits default), with upstream's annotation; what a pod sets is kept.
func TestLimitRangerDefaultsContainers(t *testing.T) {
	l := limitRangerWith(specLimitRange())
	p := limitedPod(corev1.ResourceRequirements{})
	if err := admitLimited(t, l, p); err != nil {
		t.Fatal(err)
	}
	got := p.Spec.Containers[0].Resources
	if !equalResources(got.Requests, resources("cpu", "200m", "memory", "20000Mi")) || !equalResources(got.Limits, resources("cpu", "300m", "memory", "30000Mi")) {
		t.Errorf("defaulted to %v", got)
	}
	if want := "LimitRanger plugin set: cpu, memory request for container c0; cpu, memory limit for container c0"; p.Annotations[limitRangerAnnotation] != want {
		t.Errorf("annotation %q, want %q", p.Annotations[limitRangerAnnotation], want)
	}
	partial := limitedPod(corev1.ResourceRequirements{Requests: resources("cpu", "300m"), Limits: resources("cpu", "500m")})
	if err := admitLimited(t, l, partial); err != nil {
		t.Fatal(err)
	}
	got = partial.Spec.Containers[0].Resources
	if !equalResources(got.Requests, resources("cpu", "300m", "memory", "20000Mi")) || !equalResources(got.Limits, resources("cpu", "500m", "memory", "30000Mi")) {
		t.Errorf("partly defaulted to %v", got)
	}
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// Beyond max, under min or over the ratio is 403 Forbidden, with
// upstream's messages.
func TestLimitRangerRefusesWhatIsOutOfRange(t *testing.T) {
	l := limitRangerWith(specLimitRange())
	for _, c := range []struct {
		res  corev1.ResourceRequirements
		want string
	}{
		{corev1.ResourceRequirements{Requests: resources("cpu", "600m"), Limits: resources("cpu", "600m")}, "maximum cpu usage per Container is 500m, but limit is 600m"},
		{corev1.ResourceRequirements{Requests: resources("cpu", "50m"), Limits: resources("cpu", "100m")}, "minimum cpu usage per Container is 100m, but request is 50m"},
		{corev1.ResourceRequirements{Requests: resources("cpu", "100m"), Limits: resources("cpu", "500m")}, "cpu max limit to request ratio per Container is 4, but provided ratio is 5.000000"},
	} {
		err := admitLimited(t, l, limitedPod(c.res))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want 403 with %q", c.res, err, c.want)
		}
	}
	two := limitedPod(corev1.ResourceRequirements{Requests: resources("cpu", "600m", "memory", "600Gi"), Limits: resources("cpu", "600m", "memory", "600Gi")})
	if err := admitLimited(t, l, two); err == nil || !strings.HasPrefix(strings.TrimPrefix(err.Error(), `pods "p" is forbidden: `), "[") {
		t.Errorf("two breaches: %v, want both in brackets", err)
	}
}

// A Pod-type item bounds the containers' sum; a claim's storage request
// lies within the PersistentVolumeClaim item.
func TestLimitRangerPodAndClaimItems(t *testing.T) {
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "ns"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypePod, Max: resources("cpu", "1")}}}}
	l := limitRangerWith(lr, specLimitRange())
	half := corev1.ResourceRequirements{Requests: resources("cpu", "400m"), Limits: resources("cpu", "400m")}
	if err := admitLimited(t, l, limitedPod(half, half)); err != nil {
		t.Errorf("two containers of 400m: %v", err)
	}
	err := admitLimited(t, l, limitedPod(half, half, half))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "maximum cpu usage per Pod is 1, but limit is 1200m") {
		t.Errorf("three containers of 400m: %v", err)
	}
	claim := func(size string) error {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: resources("storage", size)}}}
		return l.Validate(context.Background(), &Attributes{Operation: "CREATE", Resource: corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"),
			Namespace: "ns", Name: "c", Object: pvc})
	}
	if err := claim("5Gi"); err != nil {
		t.Errorf("a 5Gi claim: %v", err)
	}
	if err := claim("20Gi"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi") {
		t.Errorf("a 20Gi claim: %v", err)
	}
}

// Pods of a namespace with no LimitRange, and pod updates, are left alone.
func TestLimitRangerLeavesOthersAlone(t *testing.T) {
	l := limitRangerWith(specLimitRange())
	p := limitedPod(corev1.ResourceRequirements{})
	p.Namespace = "other"
	a := &Attributes{Operation: "CREATE", Resource: podsResource, Namespace: "other", Name: "p", Object: p}
	if err := l.Admit(context.Background(), a); err != nil || p.Spec.Containers[0].Resources.Requests != nil {
		t.Errorf("another namespace's pod: %v, %v", err, p.Spec.Containers[0].Resources)
	}
	big := limitedPod(corev1.ResourceRequirements{Limits: resources("cpu", "2")})
	a = &Attributes{Operation: "UPDATE", Resource: podsResource, Namespace: "ns", Name: "p", Object: big, OldObject: big}
	if err := l.Validate(context.Background(), a); err != nil {
		t.Errorf("a pod update: %v", err)
	}
}

// Each way a request or limit can break a min or max, with upstream's
// message.
func TestWithinItemMinAndMax(t *testing.T) {
	q := resource.MustParse
	item := corev1.LimitRangeItem{
		Min: corev1.ResourceList{corev1.ResourceCPU: q("100m")},
		Max: corev1.ResourceList{corev1.ResourceCPU: q("1")},
	}
	for _, tc := range []struct {
		requests, limits corev1.ResourceList
		want             []string
	}{
		{nil, nil, []string{
			"minimum cpu usage per Container is 100m.  No request is specified",
			"maximum cpu usage per Container is 1.  No limit is specified"}},
		{corev1.ResourceList{corev1.ResourceCPU: q("200m")}, corev1.ResourceList{corev1.ResourceCPU: q("50m")}, []string{
			"minimum cpu usage per Container is 100m, but limit is 50m"}},
		{corev1.ResourceList{corev1.ResourceCPU: q("2")}, corev1.ResourceList{corev1.ResourceCPU: q("500m")}, []string{
			"maximum cpu usage per Container is 1, but request is 2"}},
		{corev1.ResourceList{corev1.ResourceCPU: q("50m")}, corev1.ResourceList{corev1.ResourceCPU: q("2")}, []string{
			"minimum cpu usage per Container is 100m, but request is 50m",
			"maximum cpu usage per Container is 1, but limit is 2"}},
		{corev1.ResourceList{corev1.ResourceCPU: q("100m")}, corev1.ResourceList{corev1.ResourceCPU: q("1")}, nil},
	} {
		var got []string
		for _, err := range withinItem(item, "Container", tc.requests, tc.limits) {
			got = append(got, err.Error())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("requests %v, limits %v: %q, want %q", tc.requests, tc.limits, got, tc.want)
		}
	}
}
