package endpoints

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

const ns = "apps"

// newClient returns a fake clientset that, like the API server, names
// objects created with generateName and gives every write a new
// resourceVersion; the fake tracker alone would store every slice under
// the empty name and leave resourceVersion empty.
func newClient(objs ...runtime.Object) *fake.Clientset {
	cs := fake.NewSimpleClientset(objs...)
	var names, rvs atomic.Int64
	cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object)
		if ok && obj.GetName() == "" && obj.GetGenerateName() != "" {
			obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), names.Add(1)))
		}
		if ok {
			obj.SetResourceVersion(fmt.Sprint(1000 + rvs.Add(1)))
		}
		return false, nil, nil
	})
	cs.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if obj, ok := a.(k8stesting.UpdateAction).GetObject().(metav1.Object); ok {
			obj.SetResourceVersion(fmt.Sprint(1000 + rvs.Add(1)))
		}
		return false, nil, nil
	})
	return cs
}

func start(t *testing.T, cs *fake.Clientset, opts ...Option) *Controller {
	t.Helper()
	f := informers.NewSharedInformerFactory(cs, 0)
	c := New(cs, f, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		f.Shutdown()
	})
	// Tests call sync directly; it must see what the loop would see.
	if !cache.WaitForCacheSync(ctx.Done(), c.loop.Synced...) {
		t.Fatal("caches did not sync")
	}
	return c
}

func poll(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func service(name string, selector map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: map[string]string{"team": "web"}},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: ports, ClusterIP: "10.96.0.10"},
	}
}

func httpPort(target intstr.IntOrString) corev1.ServicePort {
	return corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: target}
}

func pod(name, ip string, ready bool, lbls map[string]string) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: lbls},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

var web = map[string]string{"app": "web"}

func listSlices(ctx context.Context, t *testing.T, cs *fake.Clientset, svc string) []discoveryv1.EndpointSlice {
	t.Helper()
	l, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

// oneEndpoint waits until the service has exactly one slice holding one
// endpoint that satisfies cond.
func oneEndpoint(t *testing.T, cs *fake.Clientset, svc, what string, cond func(discoveryv1.Endpoint) bool) discoveryv1.EndpointSlice {
	t.Helper()
	var got discoveryv1.EndpointSlice
	poll(t, what, func(ctx context.Context) (bool, error) {
		s := listSlices(ctx, t, cs, svc)
		if len(s) != 1 || len(s[0].Endpoints) != 1 || !cond(s[0].Endpoints[0]) {
			return false, nil
		}
		got = s[0]
		return true, nil
	})
	return got
}

func endpointsWhen(t *testing.T, cs *fake.Clientset, name, what string, cond func(*corev1.Endpoints) bool) {
	t.Helper()
	poll(t, what, func(ctx context.Context) (bool, error) {
		ep, err := cs.CoreV1().Endpoints(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && cond(ep), err
	})
}

func conds(ep discoveryv1.Endpoint) (ready, serving, terminating bool) {
	return derefOr(ep.Conditions.Ready, false), derefOr(ep.Conditions.Serving, false), derefOr(ep.Conditions.Terminating, false)
}

func writes(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		switch a.GetVerb() {
		case "create", "update", "delete", "patch":
			if r := a.GetResource().Resource; r == "endpointslices" || r == "endpoints" {
				n++
			}
		}
	}
	return n
}

func TestPodLifecycle(t *testing.T) {
	cs := newClient(service("web", web, httpPort(intstr.FromInt32(8080))), pod("web-1", "10.0.0.1", true, web))
	start(t, cs)
	ctx := context.Background()

	s := oneEndpoint(t, cs, "web", "ready endpoint", func(ep discoveryv1.Endpoint) bool {
		r, sv, term := conds(ep)
		return r && sv && !term
	})
	ep := s.Endpoints[0]
	if s.AddressType != discoveryv1.AddressTypeIPv4 || len(ep.Addresses) != 1 || ep.Addresses[0] != "10.0.0.1" ||
		derefOr(ep.NodeName, "") != "node-1" || ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" ||
		ep.TargetRef.Name != "web-1" || ep.TargetRef.Namespace != ns || ep.TargetRef.UID != "uid-web-1" {
		t.Errorf("endpoint = %+v (addressType %s)", ep, s.AddressType)
	}
	if len(s.Ports) != 1 || derefOr(s.Ports[0].Name, "?") != "http" || derefOr(s.Ports[0].Port, 0) != 8080 ||
		derefOr(s.Ports[0].Protocol, "") != corev1.ProtocolTCP {
		t.Errorf("ports = %+v", s.Ports)
	}
	if s.Labels[discoveryv1.LabelServiceName] != "web" || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy || s.Labels["team"] != "web" {
		t.Errorf("labels = %v", s.Labels)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Service" || s.OwnerReferences[0].Name != "web" ||
		!derefOr(s.OwnerReferences[0].Controller, false) || !derefOr(s.OwnerReferences[0].BlockOwnerDeletion, false) {
		t.Errorf("ownerReferences = %+v", s.OwnerReferences)
	}
	if s.GenerateName != "web-" {
		t.Errorf("generateName = %q", s.GenerateName)
	}
	endpointsWhen(t, cs, "web", "ready address", func(e *corev1.Endpoints) bool {
		return len(e.Subsets) == 1 && len(e.Subsets[0].Addresses) == 1 && len(e.Subsets[0].NotReadyAddresses) == 0 &&
			e.Subsets[0].Addresses[0].IP == "10.0.0.1" && e.Subsets[0].Addresses[0].TargetRef.Name == "web-1" &&
			derefOr(e.Subsets[0].Addresses[0].NodeName, "") == "node-1" &&
			len(e.Subsets[0].Ports) == 1 && e.Subsets[0].Ports[0].Port == 8080 && e.Subsets[0].Ports[0].Name == "http" &&
			e.Labels["team"] == "web"
	})

	// Readiness lost.
	p := pod("web-1", "10.0.0.1", false, web)
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	oneEndpoint(t, cs, "web", "not ready endpoint", func(ep discoveryv1.Endpoint) bool {
		r, sv, term := conds(ep)
		return !r && !sv && !term
	})
	endpointsWhen(t, cs, "web", "not ready address", func(e *corev1.Endpoints) bool {
		return len(e.Subsets) == 1 && len(e.Subsets[0].Addresses) == 0 && len(e.Subsets[0].NotReadyAddresses) == 1 &&
			e.Subsets[0].NotReadyAddresses[0].IP == "10.0.0.1"
	})

	// Ready again, then terminating: still serving while it drains, but not
	// ready, and gone from Endpoints.
	p = pod("web-1", "10.0.0.1", true, web)
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	oneEndpoint(t, cs, "web", "ready again", func(ep discoveryv1.Endpoint) bool { r, _, _ := conds(ep); return r })
	now := metav1.Now()
	p.DeletionTimestamp = &now
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	oneEndpoint(t, cs, "web", "terminating endpoint", func(ep discoveryv1.Endpoint) bool {
		r, sv, term := conds(ep)
		return !r && sv && term
	})
	endpointsWhen(t, cs, "web", "terminating pod dropped", func(e *corev1.Endpoints) bool { return len(e.Subsets) == 0 })

	// Terminating and not ready: not serving either.
	p = p.DeepCopy()
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	oneEndpoint(t, cs, "web", "terminating, not serving", func(ep discoveryv1.Endpoint) bool {
		r, sv, term := conds(ep)
		return !r && !sv && term
	})

	// Pod gone: one empty placeholder slice remains.
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "placeholder slice", func(ctx context.Context) (bool, error) {
		s := listSlices(ctx, t, cs, "web")
		return len(s) == 1 && len(s[0].Endpoints) == 0, nil
	})
}

func TestPublishNotReadyAddresses(t *testing.T) {
	svc := service("web", web, httpPort(intstr.FromInt32(8080)))
	svc.Spec.PublishNotReadyAddresses = true
	p := pod("web-1", "10.0.0.1", false, web)
	now := metav1.Now()
	p.DeletionTimestamp = &now
	cs := newClient(svc, p)
	start(t, cs)
	oneEndpoint(t, cs, "web", "published not-ready terminating endpoint", func(ep discoveryv1.Endpoint) bool {
		r, sv, term := conds(ep)
		return r && sv && term
	})
	endpointsWhen(t, cs, "web", "published address", func(e *corev1.Endpoints) bool {
		return len(e.Subsets) == 1 && len(e.Subsets[0].Addresses) == 1 && len(e.Subsets[0].NotReadyAddresses) == 0
	})
}

func TestExcludedPods(t *testing.T) {
	noIP := pod("web-noip", "", true, web)
	noIP.Status.PodIPs = nil
	done := pod("web-done", "10.0.0.2", false, web)
	done.Status.Phase = corev1.PodSucceeded
	other := pod("other", "10.0.0.3", true, map[string]string{"app": "other"})
	cs := newClient(service("web", web, httpPort(intstr.FromInt32(8080))), noIP, done, other, pod("web-1", "10.0.0.1", true, web))
	start(t, cs)
	oneEndpoint(t, cs, "web", "only the running selected pod", func(ep discoveryv1.Endpoint) bool {
		return ep.TargetRef.Name == "web-1"
	})
	endpointsWhen(t, cs, "web", "only the running selected pod", func(e *corev1.Endpoints) bool {
		return len(e.Subsets) == 1 && len(e.Subsets[0].Addresses) == 1 && e.Subsets[0].Addresses[0].TargetRef.Name == "web-1"
	})
}

func TestNamedTargetPort(t *testing.T) {
	a := pod("web-a", "10.0.0.1", true, web)
	b := pod("web-b", "10.0.0.2", true, web)
	b.Spec.Containers[0].Ports[0].ContainerPort = 9090
	// Same name, other protocol: must not resolve.
	c := pod("web-c", "10.0.0.3", true, web)
	c.Spec.Containers[0].Ports[0].Protocol = corev1.ProtocolUDP
	cs := newClient(service("web", web, httpPort(intstr.FromString("http"))), a, b, c)
	start(t, cs)

	byPort := map[int32][]string{}
	poll(t, "one slice per resolved port", func(ctx context.Context) (bool, error) {
		clear(byPort)
		for _, s := range listSlices(ctx, t, cs, "web") {
			port := int32(-1)
			if len(s.Ports) == 1 {
				port = derefOr(s.Ports[0].Port, 0)
			} else if len(s.Ports) == 0 {
				port = 0
			}
			for _, ep := range s.Endpoints {
				byPort[port] = append(byPort[port], ep.TargetRef.Name)
			}
		}
		return len(byPort) == 3, nil
	})
	if fmt.Sprint(byPort[8080]) != "[web-a]" || fmt.Sprint(byPort[9090]) != "[web-b]" || fmt.Sprint(byPort[0]) != "[web-c]" {
		t.Errorf("endpoints by slice port = %v", byPort)
	}
	endpointsWhen(t, cs, "web", "two subsets", func(e *corev1.Endpoints) bool {
		got := map[int32]string{}
		for _, s := range e.Subsets {
			if len(s.Ports) != 1 || len(s.Addresses) != 1 {
				return false
			}
			got[s.Ports[0].Port] = s.Addresses[0].TargetRef.Name
		}
		return len(got) == 2 && got[8080] == "web-a" && got[9090] == "web-b"
	})
}

func TestManyPods(t *testing.T) {
	objs := []runtime.Object{service("web", web, httpPort(intstr.FromInt32(8080)))}
	for i := range 250 {
		objs = append(objs, pod(fmt.Sprintf("web-%03d", i), fmt.Sprintf("10.0.%d.%d", i/200, i%200+1), true, web))
	}
	cs := newClient(objs...)
	start(t, cs)
	poll(t, "250 endpoints in 3 slices", func(ctx context.Context) (bool, error) {
		s := listSlices(ctx, t, cs, "web")
		seen := map[string]bool{}
		for _, sl := range s {
			if len(sl.Endpoints) > DefaultMaxEndpointsPerSlice {
				return false, fmt.Errorf("slice %s has %d endpoints", sl.Name, len(sl.Endpoints))
			}
			for _, ep := range sl.Endpoints {
				seen[ep.TargetRef.Name] = true
			}
		}
		return len(s) == 3 && len(seen) == 250, nil
	})
	endpointsWhen(t, cs, "web", "250 addresses", func(e *corev1.Endpoints) bool {
		return len(e.Subsets) == 1 && len(e.Subsets[0].Addresses) == 250
	})
}

func TestServiceWithoutSelectorUntouched(t *testing.T) {
	user := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "external", Namespace: ns},
		Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}}, Ports: []corev1.EndpointPort{{Port: 5432}}}},
	}
	cs := newClient(service("external", nil, httpPort(intstr.FromInt32(5432))), user, pod("web-1", "10.0.0.1", true, web))
	c := start(t, cs)
	ctx := context.Background()
	if err := c.sync(ctx, ns+"/external"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := writes(cs); n != 0 {
		t.Errorf("%d writes for a selector-less service: %v", n, cs.Actions())
	}
	if s := listSlices(ctx, t, cs, "external"); len(s) != 0 {
		t.Errorf("slices created: %+v", s)
	}
}

func TestExternalNameIgnored(t *testing.T) {
	svc := service("alias", web)
	svc.Spec.Type = corev1.ServiceTypeExternalName
	svc.Spec.ExternalName = "example.com"
	cs := newClient(svc, pod("web-1", "10.0.0.1", true, web))
	c := start(t, cs)
	if err := c.sync(context.Background(), ns+"/alias"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := writes(cs); n != 0 {
		t.Errorf("%d writes for an ExternalName service: %v", n, cs.Actions())
	}
}

func TestServiceDeleted(t *testing.T) {
	cs := newClient(service("web", web, httpPort(intstr.FromInt32(8080))), pod("web-1", "10.0.0.1", true, web))
	start(t, cs)
	ctx := context.Background()
	endpointsWhen(t, cs, "web", "endpoints", func(e *corev1.Endpoints) bool { return len(e.Subsets) == 1 })
	oneEndpoint(t, cs, "web", "slice", func(discoveryv1.Endpoint) bool { return true })
	if err := cs.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "endpoints and slices deleted", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return apierrors.IsNotFound(err) && len(listSlices(ctx, t, cs, "web")) == 0, nil
	})
}

func TestLeftoverEndpointsDeletedAtStart(t *testing.T) {
	orphan := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: ns}}
	lock := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "lock", Namespace: ns, Annotations: map[string]string{leaderAnnotation: "{}"}}}
	cs := newClient(orphan, lock)
	start(t, cs)
	poll(t, "orphaned endpoints deleted", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Endpoints(ns).Get(ctx, "gone", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if _, err := cs.CoreV1().Endpoints(ns).Get(context.Background(), "lock", metav1.GetOptions{}); err != nil {
		t.Errorf("leader lock endpoints: %v", err)
	}
}

func TestNoOpResync(t *testing.T) {
	objs := []runtime.Object{service("web", web, httpPort(intstr.FromString("http")))}
	for i := range 5 {
		p := pod(fmt.Sprintf("web-%d", i), fmt.Sprintf("10.0.0.%d", i+1), i%2 == 0, web)
		p.Spec.Containers[0].Ports[0].ContainerPort = int32(8080 + i%2)
		objs = append(objs, p)
	}
	cs := newClient(objs...)
	c := start(t, cs, WithMaxEndpointsPerSlice(2))
	ctx := context.Background()
	// 3 pods on 8080 and 2 on 8081, two per slice: 3 slices.
	poll(t, "settled", func(ctx context.Context) (bool, error) {
		n := 0
		for _, s := range listSlices(ctx, t, cs, "web") {
			n += len(s.Endpoints)
		}
		_, err := cs.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		return n == 5 && len(listSlices(ctx, t, cs, "web")) == 3 && err == nil, nil
	})
	time.Sleep(200 * time.Millisecond)
	before := writes(cs)

	if err := c.sync(ctx, ns+"/web"); err != nil {
		t.Fatal(err)
	}
	// An irrelevant pod change and a service edit both reach the loop.
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Annotations = map[string]string{"note": "x"}
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Annotations = map[string]string{"note": "x"}
	if _, err := cs.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if after := writes(cs); after != before {
		t.Errorf("no-op resync wrote %d times", after-before)
	}

	// One pod leaving touches only its own slice.
	before = writes(cs)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "web-4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "pod removed", func(ctx context.Context) (bool, error) {
		n := 0
		for _, s := range listSlices(ctx, t, cs, "web") {
			n += len(s.Endpoints)
		}
		return n == 4, nil
	})
	time.Sleep(200 * time.Millisecond)
	if d := writes(cs) - before; d != 2 {
		t.Errorf("removing one pod took %d writes, want 2 (its slice and Endpoints)", d)
	}
}

func TestPortChangeRewritesSlicesInPlace(t *testing.T) {
	objs := []runtime.Object{service("web", web, httpPort(intstr.FromInt32(8080)))}
	for i := range 3 {
		objs = append(objs, pod(fmt.Sprintf("web-%d", i), fmt.Sprintf("10.0.0.%d", i+1), true, web))
	}
	cs := newClient(objs...)
	start(t, cs, WithMaxEndpointsPerSlice(2))
	ctx := context.Background()
	port := func(want int32) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			s := listSlices(ctx, t, cs, "web")
			n := 0
			for _, sl := range s {
				if len(sl.Ports) != 1 || derefOr(sl.Ports[0].Port, 0) != want {
					return false, nil
				}
				n += len(sl.Endpoints)
			}
			return len(s) == 2 && n == 3, nil
		}
	}
	poll(t, "slices on 8080", port(8080))
	names := func() []string {
		var out []string
		for _, s := range listSlices(ctx, t, cs, "web") {
			out = append(out, s.Name)
		}
		return out
	}
	before := names()
	time.Sleep(100 * time.Millisecond)
	cs.ClearActions()

	svc, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(9090)
	if _, err := cs.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "slices on 9090", port(9090))
	endpointsWhen(t, cs, "web", "endpoints on 9090", func(e *corev1.Endpoints) bool {
		return len(e.Subsets) == 1 && len(e.Subsets[0].Ports) == 1 && e.Subsets[0].Ports[0].Port == 9090
	})
	if after := names(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("slices replaced: %v -> %v", before, after)
	}
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "endpointslices" && (a.GetVerb() == "create" || a.GetVerb() == "delete") {
			t.Errorf("unexpected %s of a slice on port change", a.GetVerb())
		}
	}
}

func TestHeadlessLabels(t *testing.T) {
	svc := service("db", web, httpPort(intstr.FromInt32(8080)))
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	svc.Labels[discoveryv1.LabelManagedBy] = "someone-else"
	p := pod("db-0", "10.0.0.1", true, web)
	p.Spec.Hostname, p.Spec.Subdomain = "db-0", "db"
	cs := newClient(svc, p)
	start(t, cs)
	s := oneEndpoint(t, cs, "db", "endpoint with hostname", func(ep discoveryv1.Endpoint) bool {
		return derefOr(ep.Hostname, "") == "db-0"
	})
	if _, ok := s.Labels[corev1.IsHeadlessService]; !ok || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
		t.Errorf("slice labels = %v", s.Labels)
	}
	endpointsWhen(t, cs, "db", "headless endpoints", func(e *corev1.Endpoints) bool {
		_, headless := e.Labels[corev1.IsHeadlessService]
		return headless && len(e.Subsets) == 1 && len(e.Subsets[0].Addresses) == 1 && e.Subsets[0].Addresses[0].Hostname == "db-0"
	})
}

func TestForeignSlicesIgnored(t *testing.T) {
	foreign := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-mirror", Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "someone-else"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.1"}}},
	}
	cs := newClient(service("web", web, httpPort(intstr.FromInt32(8080))), foreign, pod("web-1", "10.0.0.1", true, web))
	start(t, cs)
	poll(t, "own slice next to the foreign one", func(ctx context.Context) (bool, error) {
		return len(listSlices(ctx, t, cs, "web")) == 2, nil
	})
	got, err := cs.DiscoveryV1().EndpointSlices(ns).Get(context.Background(), "web-mirror", metav1.GetOptions{})
	if err != nil || len(got.Endpoints) != 1 || got.Endpoints[0].Addresses[0] != "192.0.2.1" {
		t.Errorf("foreign slice changed: %v %+v", err, got)
	}
}

func TestEndpointsOverCapacity(t *testing.T) {
	svc := service("big", web, httpPort(intstr.FromInt32(8080)))
	var pods []*corev1.Pod
	for i := range MaxEndpointsAddresses + 10 {
		// The last 20 are not ready; ready ones are kept in preference.
		pods = append(pods, pod(fmt.Sprintf("p-%04d", i), fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), i < MaxEndpointsAddresses-10, web))
	}
	subsets, truncated := buildSubsets(svc, pods)
	if !truncated || len(subsets) != 1 {
		t.Fatalf("truncated=%v subsets=%d", truncated, len(subsets))
	}
	if r, nr := len(subsets[0].Addresses), len(subsets[0].NotReadyAddresses); r != MaxEndpointsAddresses-10 || nr != 10 {
		t.Errorf("ready=%d notReady=%d", r, nr)
	}
	if _, truncated := buildSubsets(svc, pods[:MaxEndpointsAddresses]); truncated {
		t.Error("exactly at capacity reported as truncated")
	}
}
