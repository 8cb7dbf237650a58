package integration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Endpoints written by hand for a Service without a selector are mirrored
// into an EndpointSlice that follows their updates and goes with them; a
// Service with a selector gets no mirrored slice.
func TestEndpointSliceMirroring(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	const ns = "default"
	mirrorSel := discoveryv1.LabelManagedBy + "=endpointslicemirroring-controller.k8s.io"
	mirrored := func(svc string) []discoveryv1.EndpointSlice {
		l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: mirrorSel + "," + discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	svcPort := []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "external"},
		Spec:       corev1.ServiceSpec{Ports: svcPort},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "external", Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{"note": "kept"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses:         []corev1.EndpointAddress{{IP: "10.1.0.1"}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.1.0.2"}},
			Ports:             []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}},
		}},
	}
	ep, err := cs.CoreV1().Endpoints(ns).Create(ctx, ep, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a mirrored slice", func() bool { return len(mirrored("external")) == 1 })
	sl := mirrored("external")[0]
	if sl.Labels["team"] != "a" || sl.Annotations["note"] != "kept" || sl.AddressType != discoveryv1.AddressTypeIPv4 {
		t.Errorf("slice meta %+v type %s", sl.ObjectMeta, sl.AddressType)
	}
	if ref := metav1.GetControllerOf(&sl); ref == nil || ref.Kind != "Endpoints" || ref.UID != ep.UID {
		t.Errorf("slice owner %+v", sl.OwnerReferences)
	}
	if len(sl.Ports) != 1 || *sl.Ports[0].Name != "http" || *sl.Ports[0].Port != 8080 {
		t.Errorf("slice ports %+v", sl.Ports)
	}
	if len(sl.Endpoints) != 2 || sl.Endpoints[0].Addresses[0] != "10.1.0.1" || !*sl.Endpoints[0].Conditions.Ready ||
		sl.Endpoints[1].Addresses[0] != "10.1.0.2" || *sl.Endpoints[1].Conditions.Ready {
		t.Errorf("slice endpoints %+v", sl.Endpoints)
	}

	ep.Subsets[0].Addresses = []corev1.EndpointAddress{{IP: "10.1.0.3"}}
	ep.Subsets[0].NotReadyAddresses = nil
	ep.Subsets[0].Ports[0].Port = 9090
	if _, err := cs.CoreV1().Endpoints(ns).Update(ctx, ep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mirrored slice updated", func() bool {
		l := mirrored("external")
		return len(l) == 1 && len(l[0].Endpoints) == 1 && l[0].Endpoints[0].Addresses[0] == "10.1.0.3" &&
			len(l[0].Ports) == 1 && *l[0].Ports[0].Port == 9090
	})

	if err := cs.CoreV1().Endpoints(ns).Delete(ctx, "external", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mirrored slice gone", func() bool { return len(mirrored("external")) == 0 })

	// A selector Service's Endpoints are the endpoints controller's, and
	// its slices that controller's: nothing is mirrored.
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "selected"},
		Spec:       corev1.ServiceSpec{Ports: svcPort, Selector: map[string]string{"app": "selected"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The slice the endpoints controller publishes shows the Service was
	// seen by the controller manager; by then its Endpoints exist too.
	waitFor(t, "the selector Service's own slice", func() bool {
		l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=selected"})
		return err == nil && len(l.Items) > 0
	})
	waitFor(t, "the selector Service's Endpoints", func() bool {
		_, err := cs.CoreV1().Endpoints(ns).Get(ctx, "selected", metav1.GetOptions{})
		return err == nil
	})
	// The unselected case above is mirrored within one sync; give the
	// controller the same chance here and check nothing appeared.
	mirroredExternal := func() bool { return len(mirrored("external2")) == 1 }
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "external2"}, Spec: corev1.ServiceSpec{Ports: svcPort},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ep2 := ep.DeepCopy()
	ep2.ObjectMeta = metav1.ObjectMeta{Name: "external2"}
	if _, err := cs.CoreV1().Endpoints(ns).Create(ctx, ep2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a later mirrored slice", mirroredExternal)
	if l := mirrored("selected"); len(l) != 0 {
		t.Errorf("selector Service mirrored: %+v", l)
	}

	// Giving the Service a selector hands its endpoints to the endpoints
	// controller: the mirrored slice goes.
	svc2, err := cs.CoreV1().Services(ns).Get(ctx, "external2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc2.Spec.Selector = map[string]string{"app": "external2"}
	if _, err := cs.CoreV1().Services(ns).Update(ctx, svc2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mirrored slice gone after the selector was set", func() bool { return len(mirrored("external2")) == 0 })

	// So does labelling the Endpoints skip-mirror.
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "external3"}, Spec: corev1.ServiceSpec{Ports: svcPort},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ep3 := ep.DeepCopy()
	ep3.ObjectMeta = metav1.ObjectMeta{Name: "external3"}
	if ep3, err = cs.CoreV1().Endpoints(ns).Create(ctx, ep3, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "external3 mirrored", func() bool { return len(mirrored("external3")) == 1 })
	ep3.Labels = map[string]string{discoveryv1.LabelSkipMirror: "true"}
	if _, err := cs.CoreV1().Endpoints(ns).Update(ctx, ep3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mirrored slice gone after skip-mirror", func() bool { return len(mirrored("external3")) == 0 })
}
