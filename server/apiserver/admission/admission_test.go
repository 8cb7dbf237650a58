package admission

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// fakeNamespaces is an ObjectGetter over a fixed set of namespaces that
// counts its lookups.
type fakeNamespaces struct {
	items map[string]*corev1.Namespace
	err   error
	gets  []string
}

func (f *fakeNamespaces) Get(_ context.Context, namespace, name string) (runtime.Object, error) {
	f.gets = append(f.gets, namespace+"/"+name)
	if f.err != nil {
		return nil, f.err
	}
	if ns, ok := f.items[name]; ok {
		return ns.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
}

func (f *fakeNamespaces) List(context.Context, string) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, ns := range f.items {
		out = append(out, ns.DeepCopy())
	}
	return out, f.err
}

// fakeObjects is an ObjectGetter over objects keyed namespace/name that
// counts its lookups.
type fakeObjects struct {
	items map[string]runtime.Object
	gets  int
}

func (f *fakeObjects) Get(_ context.Context, namespace, name string) (runtime.Object, error) {
	f.gets++
	if o, ok := f.items[namespace+"/"+name]; ok {
		return o.DeepCopyObject(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{}, name)
}

func (f *fakeObjects) List(_ context.Context, namespace string) ([]runtime.Object, error) {
	var out []runtime.Object
	for key, o := range f.items {
		if ns, _, _ := strings.Cut(key, "/"); namespace == "" || ns == namespace {
			out = append(out, o.DeepCopyObject())
		}
	}
	return out, nil
}

// testAccounts are the ServiceAccounts the chains of these tests see:
// "default" in the namespaces they use, "builder", and "quiet", which
// opts out of token automounting.
func testAccounts() *fakeObjects {
	f := &fakeObjects{items: map[string]runtime.Object{}}
	for _, key := range []string{"/default", "default/default", "missing/default", "active/default", "terminating/default", "default/builder", "default/sa"} {
		ns, name, _ := strings.Cut(key, "/")
		f.items[key] = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	f.items["default/quiet"] = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "quiet"},
		AutomountServiceAccountToken: ptr.To(false)}
	return f
}

func newChain(t *testing.T, ns *fakeNamespaces) *Chain {
	t.Helper()
	accounts := testAccounts()
	return New(Config{
		Getter: func(gvr schema.GroupVersionResource) ObjectGetter {
			switch gvr {
			case corev1.SchemeGroupVersion.WithResource("namespaces"):
				return ns
			case corev1.SchemeGroupVersion.WithResource("serviceaccounts"):
				return accounts
			case corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithResource("nodes"):
				return &fakeObjects{}
			case storageClassesResource, runtimeClassesResource, ingressClassesResource, limitRangesResource, resourceQuotasResource, priorityClassesResource:
				return &fakeObjects{}
			}
			t.Errorf("getter asked for %s", gvr)
			return nil
		},
		DefaultNotReadyTolerationSeconds:    120,
		DefaultUnreachableTolerationSeconds: 60,
	})
}

var (
	podsGVR = corev1.SchemeGroupVersion.WithResource("pods")
	nsGVR   = corev1.SchemeGroupVersion.WithResource("namespaces")
)

func TestServiceAccountDefaulting(t *testing.T) {
	c := newChain(t, &fakeNamespaces{})
	for _, tc := range []struct {
		name        string
		op          string
		gvr         schema.GroupVersionResource
		subresource string
		sa          string
		want        string
	}{
		{name: "pod create", op: "CREATE", gvr: podsGVR, want: "default"},
		{name: "pod create with a service account", op: "CREATE", gvr: podsGVR, sa: "builder", want: "builder"},
		{name: "pod update", op: "UPDATE", gvr: podsGVR, want: ""},
		{name: "pod status update", op: "UPDATE", gvr: podsGVR, subresource: "status", want: ""},
		{name: "create through a subresource", op: "CREATE", gvr: podsGVR, subresource: "ephemeralcontainers", want: ""},
		{name: "pods of another group", op: "CREATE", gvr: schema.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "pods"}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{ServiceAccountName: tc.sa}}
			a := &Attributes{Operation: tc.op, Resource: tc.gvr, Subresource: tc.subresource, Namespace: "default", Name: "p", Object: pod}
			if err := c.Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			if pod.Spec.ServiceAccountName != tc.want {
				t.Errorf("serviceAccountName = %q, want %q", pod.Spec.ServiceAccountName, tc.want)
			}
			if pod.Spec.DeprecatedServiceAccount != tc.want {
				t.Errorf("serviceAccount = %q, want %q", pod.Spec.DeprecatedServiceAccount, tc.want)
			}
		})
	}
	// Only the deprecated field set: it names the account.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{DeprecatedServiceAccount: "builder"}}
	if err := c.Admit(context.Background(), &Attributes{Operation: "CREATE", Resource: podsGVR, Namespace: "default", Name: "p", Object: pod}); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.ServiceAccountName != "builder" || pod.Spec.DeprecatedServiceAccount != "builder" {
		t.Errorf("deprecated serviceAccount builder: %q/%q", pod.Spec.ServiceAccountName, pod.Spec.DeprecatedServiceAccount)
	}
	// A create of something else that is not a Pod is left alone.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"}}
	if err := c.Admit(context.Background(), &Attributes{Operation: "CREATE", Resource: corev1.SchemeGroupVersion.WithResource("configmaps"), Object: cm}); err != nil {
		t.Fatal(err)
	}
	// A pods create whose object is not a Pod does not panic.
	if err := c.Admit(context.Background(), &Attributes{Operation: "CREATE", Resource: podsGVR, Object: cm}); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultTolerationSeconds(t *testing.T) {
	c := newChain(t, &fakeNamespaces{})
	notReady := func(secs int64) corev1.Toleration {
		return corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs}
	}
	unreachable := func(secs int64) corev1.Toleration {
		return corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs}
	}
	other := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name string
		op   string
		in   []corev1.Toleration
		want []corev1.Toleration
	}{
		{name: "none", op: "CREATE", want: []corev1.Toleration{notReady(120), unreachable(60)}},
		{name: "unrelated toleration kept", op: "CREATE", in: []corev1.Toleration{other},
			want: []corev1.Toleration{other, notReady(120), unreachable(60)}},
		{name: "own not-ready toleration kept", op: "CREATE", in: []corev1.Toleration{notReady(5)},
			want: []corev1.Toleration{notReady(5), unreachable(60)}},
		{name: "own unreachable toleration kept", op: "CREATE", in: []corev1.Toleration{unreachable(3600)},
			want: []corev1.Toleration{unreachable(3600), notReady(120)}},
		{name: "forever, any effect", op: "CREATE",
			in:   []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}},
			want: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists}, unreachable(60)}},
		{name: "NoSchedule does not count", op: "CREATE",
			in: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			want: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				notReady(120), unreachable(60)}},
		{name: "Exists with an empty key tolerates everything", op: "CREATE",
			in:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			want: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		{name: "Exists with an empty key, NoExecute", op: "CREATE",
			in:   []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			want: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}},
		{name: "Exists with an empty key, NoSchedule only", op: "CREATE",
			in: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			want: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				notReady(120), unreachable(60)}},
		// As upstream's plugin, an update too: replacing the tolerations
		// keeps these two, so the update only adds (pod validation).
		{name: "update that replaced them", op: "UPDATE", in: []corev1.Toleration{other},
			want: []corev1.Toleration{other, notReady(120), unreachable(60)}},
		{name: "delete left alone", op: "DELETE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
				Spec: corev1.PodSpec{ServiceAccountName: "sa", Tolerations: slices.Clone(tc.in)}}
			if err := c.Admit(context.Background(), &Attributes{Operation: tc.op, Resource: podsGVR, Namespace: "default", Name: "p", Object: pod}); err != nil {
				t.Fatal(err)
			}
			if len(pod.Spec.Tolerations) != len(tc.want) || (len(tc.want) > 0 && !equality.Semantic.DeepEqual(pod.Spec.Tolerations, tc.want)) {
				t.Errorf("tolerations\n got %s\nwant %s", tolerations(pod.Spec.Tolerations), tolerations(tc.want))
			}
		})
	}

	// Each pod gets its own seconds: changing one pod's leaves another's.
	p1, p2 := &corev1.Pod{}, &corev1.Pod{}
	for _, p := range []*corev1.Pod{p1, p2} {
		if err := c.Admit(context.Background(), &Attributes{Operation: "CREATE", Resource: podsGVR, Object: p}); err != nil {
			t.Fatal(err)
		}
	}
	*p1.Spec.Tolerations[0].TolerationSeconds = 1
	if got := *p2.Spec.Tolerations[0].TolerationSeconds; got != 120 {
		t.Errorf("pods share tolerationSeconds: %d", got)
	}
	// The configured values are what is added (upstream's default is 300).
	accounts := testAccounts()
	c300 := New(Config{Getter: func(schema.GroupVersionResource) ObjectGetter { return accounts },
		DefaultNotReadyTolerationSeconds: 300, DefaultUnreachableTolerationSeconds: 300})
	p3 := &corev1.Pod{}
	if err := c300.Admit(context.Background(), &Attributes{Operation: "CREATE", Resource: podsGVR, Object: p3}); err != nil {
		t.Fatal(err)
	}
	if want := []corev1.Toleration{notReady(300), unreachable(300)}; !equality.Semantic.DeepEqual(p3.Spec.Tolerations, want) {
		t.Errorf("tolerations %s, want %s", tolerations(p3.Spec.Tolerations), tolerations(want))
	}
}

func tolerations(ts []corev1.Toleration) string {
	var out []string
	for _, t := range ts {
		secs := "-"
		if t.TolerationSeconds != nil {
			secs = strconv.FormatInt(*t.TolerationSeconds, 10)
		}
		out = append(out, t.Key+"/"+string(t.Operator)+"/"+string(t.Effect)+"/"+secs)
	}
	return "[" + strings.Join(out, " ") + "]"
}

func TestNamespaceLifecycle(t *testing.T) {
	now := metav1.Now()
	namespaces := &fakeNamespaces{items: map[string]*corev1.Namespace{
		"active":      {ObjectMeta: metav1.ObjectMeta{Name: "active"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
		"doomed":      {ObjectMeta: metav1.ObjectMeta{Name: "doomed", DeletionTimestamp: &now}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
		"just-marked": {ObjectMeta: metav1.ObjectMeta{Name: "just-marked", DeletionTimestamp: &now}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
	}}
	c := newChain(t, namespaces)
	events := corev1.SchemeGroupVersion.WithResource("events")
	eventsV1 := schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	for _, tc := range []struct {
		name      string
		op        string
		gvr       schema.GroupVersionResource
		namespace string
		objName   string
		wantCode  int32
		wantMsg   string
		wantGets  int
	}{
		{name: "create in an active namespace", op: "CREATE", gvr: podsGVR, namespace: "active", objName: "p", wantGets: 1},
		{name: "create in a missing namespace", op: "CREATE", gvr: podsGVR, namespace: "missing", objName: "p", wantGets: 1,
			wantCode: http.StatusNotFound, wantMsg: `namespaces "missing" not found`},
		{name: "event in a missing namespace", op: "CREATE", gvr: events, namespace: "missing", objName: "e", wantGets: 1,
			wantCode: http.StatusNotFound, wantMsg: `namespaces "missing" not found`},
		{name: "create in a terminating namespace", op: "CREATE", gvr: podsGVR, namespace: "doomed", objName: "p", wantGets: 1,
			wantCode: http.StatusForbidden, wantMsg: `pods "p" is forbidden: unable to create new content in namespace doomed because it is being terminated`},
		{name: "grouped create in a terminating namespace", op: "CREATE", gvr: deployments, namespace: "doomed", objName: "web", wantGets: 1,
			wantCode: http.StatusForbidden, wantMsg: `deployments.apps "web" is forbidden: unable to create new content in namespace doomed because it is being terminated`},
		{name: "create in a namespace marked for deletion", op: "CREATE", gvr: podsGVR, namespace: "just-marked", objName: "p", wantGets: 1,
			wantCode: http.StatusForbidden, wantMsg: `pods "p" is forbidden: unable to create new content in namespace just-marked because it is being terminated`},
		{name: "core event in a terminating namespace", op: "CREATE", gvr: events, namespace: "doomed", objName: "e", wantGets: 1},
		{name: "events.k8s.io event in a terminating namespace", op: "CREATE", gvr: eventsV1, namespace: "doomed", objName: "e", wantGets: 1},
		{name: "update in a terminating namespace", op: "UPDATE", gvr: podsGVR, namespace: "doomed", objName: "p"},
		{name: "delete in a terminating namespace", op: "DELETE", gvr: podsGVR, namespace: "doomed", objName: "p"},
		{name: "cluster-scoped create", op: "CREATE", gvr: corev1.SchemeGroupVersion.WithResource("nodes"), objName: "n1"},
		{name: "namespace create", op: "CREATE", gvr: nsGVR, objName: "new"},
		{name: "namespace create named like a missing one", op: "CREATE", gvr: nsGVR, objName: "missing"},
		{name: "delete team namespace", op: "DELETE", gvr: nsGVR, objName: "team-a"},
		{name: "delete terminating namespace again", op: "DELETE", gvr: nsGVR, objName: "doomed"},
		{name: "update default namespace", op: "UPDATE", gvr: nsGVR, objName: "default"},
		{name: "delete default", op: "DELETE", gvr: nsGVR, objName: "default",
			wantCode: http.StatusForbidden, wantMsg: `namespaces "default" is forbidden: this namespace may not be deleted`},
		{name: "delete kube-system", op: "DELETE", gvr: nsGVR, objName: "kube-system",
			wantCode: http.StatusForbidden, wantMsg: `namespaces "kube-system" is forbidden: this namespace may not be deleted`},
		{name: "delete kube-public", op: "DELETE", gvr: nsGVR, objName: "kube-public",
			wantCode: http.StatusForbidden, wantMsg: `namespaces "kube-public" is forbidden: this namespace may not be deleted`},
		{name: "delete kube-node-lease", op: "DELETE", gvr: nsGVR, objName: "kube-node-lease",
			wantCode: http.StatusForbidden, wantMsg: `namespaces "kube-node-lease" is forbidden: this namespace may not be deleted`},
		{name: "delete a pod named default", op: "DELETE", gvr: podsGVR, namespace: "active", objName: "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			namespaces.gets = nil
			var obj runtime.Object
			if tc.op != "DELETE" {
				obj = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.objName, Namespace: tc.namespace}}
			}
			a := &Attributes{Operation: tc.op, Resource: tc.gvr, Namespace: tc.namespace, Name: tc.objName, Object: obj}
			if tc.op == "DELETE" {
				a.OldObject = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.objName}}
			}
			err := c.Validate(context.Background(), a)
			if len(namespaces.gets) != tc.wantGets {
				t.Errorf("namespace lookups %v, want %d", namespaces.gets, tc.wantGets)
			}
			if tc.wantCode == 0 {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				t.Fatalf("err = %v, want an API status", err)
			}
			if got := status.Status().Code; got != tc.wantCode {
				t.Errorf("code = %d, want %d", got, tc.wantCode)
			}
			if err.Error() != tc.wantMsg {
				t.Errorf("message\n got %s\nwant %s", err.Error(), tc.wantMsg)
			}
		})
	}
	// Namespaces are cluster-scoped: the lookup is ("", name).
	namespaces.gets = nil
	if err := c.Validate(context.Background(), &Attributes{Operation: "CREATE", Resource: podsGVR, Namespace: "active", Name: "p"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"/active"}; !slices.Equal(namespaces.gets, want) {
		t.Errorf("lookup %v, want %v", namespaces.gets, want)
	}
}

func TestNamespaceLifecycleLookupError(t *testing.T) {
	boom := errors.New("etcd unavailable")
	c := newChain(t, &fakeNamespaces{err: boom})
	err := c.Validate(context.Background(), &Attributes{Operation: "CREATE", Resource: podsGVR, Namespace: "active", Name: "p"})
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want the lookup's error", err)
	}
	// The immortal check needs no lookup.
	err = c.Validate(context.Background(), &Attributes{Operation: "DELETE", Resource: nsGVR, Name: "default"})
	if !apierrors.IsForbidden(err) {
		t.Errorf("delete default with a failing getter: %v", err)
	}
}

// Admit runs every mutating plugin, Validate every validating one, and a
// mutating chain never looks namespaces up.
func TestChainRunsEveryPlugin(t *testing.T) {
	ns := &fakeNamespaces{}
	c := newChain(t, ns)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "missing"}}
	a := &Attributes{Operation: "CREATE", Resource: podsGVR, Namespace: "missing", Name: "p", Object: pod}
	if err := c.Admit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.ServiceAccountName != "default" || len(pod.Spec.Tolerations) != 2 {
		t.Errorf("after Admit: serviceAccountName %q, %d tolerations", pod.Spec.ServiceAccountName, len(pod.Spec.Tolerations))
	}
	if len(ns.gets) != 0 {
		t.Errorf("Admit looked up %v", ns.gets)
	}
	if err := c.Validate(context.Background(), a); !apierrors.IsNotFound(err) {
		t.Errorf("Validate: %v, want NotFound", err)
	}
}

func podWith(sa string, automount *bool) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{
		ServiceAccountName: sa, AutomountServiceAccountToken: automount,
		InitContainers: []corev1.Container{{Name: "init"}},
		Containers:     []corev1.Container{{Name: "a"}, {Name: "b", VolumeMounts: []corev1.VolumeMount{{Name: "own", MountPath: TokenMountPath}}}},
		Volumes:        []corev1.Volume{{Name: "own"}},
	}}
}

func TestServiceAccountTokenVolume(t *testing.T) {
	c := newChain(t, &fakeNamespaces{})
	admit := func(p *corev1.Pod) error {
		return c.Admit(context.Background(), &Attributes{Operation: "CREATE", Resource: podsGVR, Namespace: "default", Name: "p", Object: p})
	}
	p := podWith("", nil)
	if err := admit(p); err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.Volumes) != 2 {
		t.Fatalf("volumes %+v, want own and kube-api-access", p.Spec.Volumes)
	}
	v := p.Spec.Volumes[1]
	if !strings.HasPrefix(v.Name, "kube-api-access-") || len(v.Name) != len("kube-api-access-")+5 {
		t.Errorf("volume name %q", v.Name)
	}
	if want := TokenVolume(v.Name); !equality.Semantic.DeepEqual(v, want) {
		t.Errorf("volume %+v, want %+v", v, want)
	}
	src := v.Projected.Sources
	if src[0].ServiceAccountToken.Path != "token" || *src[0].ServiceAccountToken.ExpirationSeconds != 3607 ||
		src[1].ConfigMap.Name != "kube-root-ca.crt" || src[1].ConfigMap.Items[0].Key != "ca.crt" ||
		src[2].DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.namespace" || *v.Projected.DefaultMode != 0o644 {
		t.Errorf("sources %+v", src)
	}
	want := corev1.VolumeMount{Name: v.Name, ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}
	for _, c := range []corev1.Container{p.Spec.InitContainers[0], p.Spec.Containers[0]} {
		if len(c.VolumeMounts) != 1 || !equality.Semantic.DeepEqual(c.VolumeMounts[0], want) {
			t.Errorf("container %s mounts %+v, want %+v", c.Name, c.VolumeMounts, want)
		}
	}
	// A container that mounts its own volume there keeps it.
	if m := p.Spec.Containers[1].VolumeMounts; len(m) != 1 || m[0].Name != "own" {
		t.Errorf("container b mounts %+v", m)
	}

	// The pod's false wins over the account; the account's false counts
	// when the pod says nothing; the pod's true wins over the account's.
	for _, tc := range []struct {
		sa        string
		automount *bool
		want      bool
	}{{"builder", ptr.To(false), false}, {"quiet", nil, false}, {"quiet", ptr.To(true), true}, {"builder", nil, true}} {
		p := podWith(tc.sa, tc.automount)
		if err := admit(p); err != nil {
			t.Fatal(err)
		}
		if got := len(p.Spec.Volumes) == 2; got != tc.want {
			t.Errorf("sa %s automount %v: token volume %v, want %v", tc.sa, tc.automount, got, tc.want)
		}
	}
}

func TestServiceAccountMissing(t *testing.T) {
	accounts := testAccounts()
	plugin := newServiceAccount(accounts)
	plugin.retryInterval = func() time.Duration { return 0 }
	a := &Attributes{Operation: "CREATE", Resource: podsGVR, Namespace: "new", Name: "p", Object: podWith("app", nil)}
	err := plugin.Admit(context.Background(), a)
	const msg = `pods "p" is forbidden: error looking up service account new/app: serviceaccount "app" not found`
	if !apierrors.IsForbidden(err) || err.Error() != msg {
		t.Errorf("err = %v, want 403 %q", err, msg)
	}
	if accounts.gets != 1 {
		t.Errorf("%d lookups of a named account, want 1", accounts.gets)
	}
	// The default account is looked for again: its controller may be
	// creating it right now.
	accounts.gets = 0
	a.Object = podWith("", nil)
	if err := plugin.Admit(context.Background(), a); !apierrors.IsForbidden(err) {
		t.Errorf("err = %v, want 403", err)
	}
	if accounts.gets != 10 {
		t.Errorf("%d lookups of default, want 10", accounts.gets)
	}
}
