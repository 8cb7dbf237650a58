package integration

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// waitIPAddress waits until the IPAddress named ip exists (want true) or
// is gone (want false), and returns it when it exists.
func waitIPAddress(t *testing.T, cs kubernetes.Interface, ip string, want bool) *networkingv1.IPAddress {
	t.Helper()
	var got *networkingv1.IPAddress
	err := wait.PollUntilContextTimeout(ctxT(t), 20*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		a, err := cs.NetworkingV1().IPAddresses().Get(ctx, ip, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return !want, nil
		}
		got = a
		return want && err == nil, err
	})
	if err != nil {
		t.Fatalf("IPAddress %s present=%v: %v", ip, want, err)
	}
	return got
}

// assertServiceIP checks that the IPAddress ip is the allocator's record
// of Service ns/name.
func assertServiceIP(t *testing.T, a *networkingv1.IPAddress, ns, name string) {
	t.Helper()
	want := networkingv1.ParentReference{Resource: "services", Namespace: ns, Name: name}
	if a.Spec.ParentRef == nil || *a.Spec.ParentRef != want {
		t.Errorf("IPAddress %s parentRef %+v, want %+v", a.Name, a.Spec.ParentRef, want)
	}
	if a.Labels[networkingv1.LabelManagedBy] != "ipallocator.k8s.io" || a.Labels[networkingv1.LabelIPAddressFamily] != "IPv4" {
		t.Errorf("IPAddress %s labels %v", a.Name, a.Labels)
	}
	if a.UID == "" || a.CreationTimestamp.IsZero() || a.ResourceVersion == "" {
		t.Errorf("IPAddress %s metadata %+v", a.Name, a.ObjectMeta)
	}
}

// The default ServiceCIDR is --service-cidr and Ready; every Service
// cluster IP is an IPAddress naming its Service, gone with the Service or
// its cluster IP; an IPAddress a user creates reserves its IP; both kinds
// get upstream's validation; a lost IPAddress is restored at start.
func TestServiceCIDRAndIPAddress(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)

	def, err := cs.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(def.Spec.CIDRs, []string{"10.43.0.0/16"}) || !slices.Contains(def.Finalizers, "networking.k8s.io/service-cidr-finalizer") {
		t.Errorf("default ServiceCIDR %+v", def)
	}
	if !meta.IsStatusConditionTrue(def.Status.Conditions, networkingv1.ServiceCIDRConditionReady) {
		t.Errorf("default ServiceCIDR conditions %+v", def.Status.Conditions)
	}
	status, err := cs.NetworkingV1().RESTClient().Get().AbsPath("/apis/networking.k8s.io/v1/servicecidrs/kubernetes/status").DoRaw(ctx)
	if err != nil || !strings.Contains(string(status), `"kind":"ServiceCIDR"`) || !strings.Contains(string(status), string(def.UID)) {
		t.Errorf("GET servicecidrs/kubernetes/status: %v %s", err, status)
	}
	assertServiceIP(t, waitIPAddress(t, cs, "10.43.0.1", true), "default", "kubernetes")

	// A Service's cluster IP is its IPAddress.
	svc := func(name, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	}
	web, err := cs.CoreV1().Services("default").Create(ctx, svc("web", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertServiceIP(t, waitIPAddress(t, cs, web.Spec.ClusterIP, true), "default", "web")
	out := s.mustKubectl("get", "ipaddresses", web.Spec.ClusterIP)
	if !strings.Contains(out, "PARENTREF") || !strings.Contains(out, "services/default/web") {
		t.Errorf("kubectl get ipaddress:\n%s", out)
	}
	out = s.mustKubectl("get", "servicecidrs")
	if !strings.Contains(out, "CIDRS") || !strings.Contains(out, "kubernetes   10.43.0.0/16") {
		t.Errorf("kubectl get servicecidrs:\n%s", out)
	}
	if err := cs.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIPAddress(t, cs, web.Spec.ClusterIP, false)

	// Turning ExternalName gives the cluster IP back.
	ext, err := cs.CoreV1().Services("default").Create(ctx, svc("ext", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	extIP := ext.Spec.ClusterIP
	waitIPAddress(t, cs, extIP, true)
	ext.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}
	if _, err := cs.CoreV1().Services("default").Update(ctx, ext, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitIPAddress(t, cs, extIP, false)
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc("takes-ext", extIP), metav1.CreateOptions{}); err != nil {
		t.Errorf("the IP an ExternalName Service gave back: %v", err)
	}

	// A user's IPAddress reserves its IP until it is deleted.
	reserved := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.43.5.5"},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Group: "gateway.networking.k8s.io", Resource: "gateways", Namespace: "default", Name: "gw"}}}
	if _, err := cs.NetworkingV1().IPAddresses().Create(ctx, reserved, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().Services("default").Create(ctx, svc("wants-reserved", "10.43.5.5"), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "provided 10.43.5.5 is already allocated") {
		t.Errorf("a Service asking for a reserved IP: %v", err)
	}
	if err := cs.NetworkingV1().IPAddresses().Delete(ctx, "10.43.5.5", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc("wants-reserved", "10.43.5.5"), metav1.CreateOptions{}); err != nil {
		t.Errorf("the IP once its IPAddress is gone: %v", err)
	}
	assertServiceIP(t, waitIPAddress(t, cs, "10.43.5.5", true), "default", "wants-reserved")
	// The same create again fails on the name, and its undo leaves the
	// first Service's IP held.
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc("wants-reserved", "10.43.5.5"), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("a repeated create: %v, want AlreadyExists", err)
	}
	assertServiceIP(t, waitIPAddress(t, cs, "10.43.5.5", true), "default", "wants-reserved")
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc("thief", "10.43.5.5"), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("an IP held by a Service whose create was repeated: %v, want 422", err)
	}

	// Upstream's validation, as 422s with field errors.
	for _, tc := range []struct {
		name, field string
		create      func() error
	}{
		{"IPAddress not in canonical form", "metadata.name", func() error {
			_, err := cs.NetworkingV1().IPAddresses().Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.043.0.9"},
				Spec: networkingv1.IPAddressSpec{ParentRef: reserved.Spec.ParentRef}}, metav1.CreateOptions{})
			return err
		}},
		{"IPAddress without parentRef", "spec.parentRef", func() error {
			_, err := cs.NetworkingV1().IPAddresses().Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.43.0.9"}}, metav1.CreateOptions{})
			return err
		}},
		{"IPAddress parentRef changed", "spec.parentRef", func() error {
			_, err := cs.NetworkingV1().IPAddresses().Patch(ctx, "10.43.5.5", types.MergePatchType, []byte(`{"spec":{"parentRef":{"name":"other"}}}`), metav1.PatchOptions{})
			return err
		}},
		{"ServiceCIDR of one family twice", "spec.cidrs", func() error {
			_, err := cs.NetworkingV1().ServiceCIDRs().Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "two-v4"},
				Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.50.0.0/16", "10.51.0.0/16"}}}, metav1.CreateOptions{})
			return err
		}},
		{"ServiceCIDR range changed", "spec.cidrs[0]", func() error {
			_, err := cs.NetworkingV1().ServiceCIDRs().Patch(ctx, "kubernetes", types.MergePatchType, []byte(`{"spec":{"cidrs":["10.44.0.0/16"]}}`), metav1.PatchOptions{})
			return err
		}},
	} {
		err := tc.create()
		var status apierrors.APIStatus
		if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil ||
			!slices.ContainsFunc(status.Status().Details.Causes, func(c metav1.StatusCause) bool { return c.Field == tc.field }) {
			t.Errorf("%s: %v, want 422 Invalid at %s", tc.name, err, tc.field)
		}
	}

	// A user's ServiceCIDR is served but not allocated from: no Ready
	// condition, a warning on create, and no finalizer holding its delete.
	extra, err := cs.NetworkingV1().ServiceCIDRs().Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"203.0.113.0/24"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(extra.Status.Conditions) != 0 || len(extra.Finalizers) != 0 {
		t.Errorf("a user's ServiceCIDR: %+v", extra)
	}
	if out, err := s.kubectlIn(`{"apiVersion":"networking.k8s.io/v1","kind":"ServiceCIDR","metadata":{"name":"extra2"},"spec":{"cidrs":["198.51.100.0/24"]}}`,
		nil, "create", "-f", "-"); err != nil || !strings.Contains(out, "Warning: kelp allocates Service cluster IPs only from the default ServiceCIDR") {
		t.Errorf("kubectl create servicecidr: %v\n%s", err, out)
	}
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc("in-extra", "203.0.113.10"), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a cluster IP in a user's ServiceCIDR: %v, want 422 (kelp allocates only from the default range)", err)
	}
	if err := cs.NetworkingV1().ServiceCIDRs().Delete(ctx, "extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.NetworkingV1().ServiceCIDRs().Get(ctx, "extra", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a user's ServiceCIDR after delete: %v", err)
	}

	// An IPAddress deleted under its Service is restored at the next start.
	if err := cs.NetworkingV1().IPAddresses().Delete(ctx, "10.43.5.5", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.restart()
	cs = s.client()
	assertServiceIP(t, waitIPAddress(t, cs, "10.43.5.5", true), "default", "wants-reserved")
	assertServiceIP(t, waitIPAddress(t, cs, "10.43.0.1", true), "default", "kubernetes")
	list, err := cs.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 { // kubernetes and extra2
		t.Errorf("ServiceCIDRs after restart: %v %d", err, len(list.Items))
	}
}
