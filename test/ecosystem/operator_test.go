package ecosystem

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The operator's custom resource: a Greeting whose spec.message is
// rendered into a ConfigMap, as a kubebuilder project would declare it
// (typed Go structs registered in a scheme, not unstructured).
const (
	greetingGroup     = "eco.kelp.test"
	greetingFinalizer = "eco.kelp.test/configmap"
	leaseName         = "greeting-operator"
)

// leaseDuration is the replicas' Lease duration: a waiting replica takes
// over an unrenewed Lease after this long.
const leaseDuration = 5 * time.Second

var greetingGV = schema.GroupVersion{Group: greetingGroup, Version: "v1"}

type GreetingSpec struct {
	Message string `json:"message"`
}

type GreetingStatus struct {
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	ConfigMap          string `json:"configMap,omitempty"`
}

type Greeting struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              GreetingSpec   `json:"spec,omitempty"`
	Status            GreetingStatus `json:"status,omitempty"`
}

type GreetingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Greeting `json:"items"`
}

// Hand-written deep copies (what controller-gen would generate): the
// structs hold only values and a slice.
func (g *Greeting) DeepCopyObject() runtime.Object {
	out := *g
	g.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

func (l *GreetingList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Greeting, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Greeting)
	}
	return &out
}

func operatorScheme(t *testing.T) *runtime.Scheme {
	sc := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(sc); err != nil {
		t.Fatal(err)
	}
	sc.AddKnownTypes(greetingGV, &Greeting{}, &GreetingList{})
	metav1.AddToGroupVersion(sc, greetingGV)
	return sc
}

func greetingCRD() *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "greetings." + greetingGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: greetingGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "greetings", Singular: "greeting",
				Kind: "Greeting", ListKind: "GreetingList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Required: []string{"message"},
							Properties: map[string]apiextensionsv1.JSONSchemaProps{"message": str}},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"observedGeneration": {Type: "integer", Format: "int64"},
							"configMap":          str,
						}},
					},
				}},
			}},
		},
	}
}

// greetingReconciler renders a Greeting into the ConfigMap
// greeting-<name>; its finalizer deletes that ConfigMap before the
// Greeting goes. It counts what it did, so the test can tell which
// replica worked.
type greetingReconciler struct {
	client.Client
	reconciles atomic.Int64
	finalized  atomic.Int64
}

func (r *greetingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.reconciles.Add(1)
	var g Greeting
	if err := r.Get(ctx, req.NamespacedName, &g); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cmName := "greeting-" + g.Name
	if !g.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(&g, greetingFinalizer) {
			return ctrl.Result{}, nil
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: cmName}}
		if err := r.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(&g, greetingFinalizer)
		if err := r.Update(ctx, &g); err != nil {
			return ctrl.Result{}, err
		}
		r.finalized.Add(1)
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(&g, greetingFinalizer) {
		// The update comes back through the watch as a new event; the
		// ConfigMap is written on that pass.
		return ctrl.Result{}, r.Update(ctx, &g)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: cmName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		cm.Data = map[string]string{"message": g.Spec.Message}
		return controllerutil.SetControllerReference(&g, cm, r.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}
	if g.Status.ObservedGeneration != g.Generation || g.Status.ConfigMap != cmName {
		g.Status.ObservedGeneration, g.Status.ConfigMap = g.Generation, cmName
		if err := r.Status().Update(ctx, &g); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// replica is one running manager of the operator.
type replica struct {
	mgr    ctrl.Manager
	rec    *greetingReconciler
	cancel context.CancelFunc
	done   chan error
}

func startReplica(t *testing.T, s *testServer, sc *runtime.Scheme, name string) *replica {
	t.Helper()
	// Shorter lease timings than upstream's 15 s default, so the test
	// waits seconds, yet long enough that a loaded 2-core machine does
	// not lose a renewal; release on cancel, as a rolling update of an
	// operator does.
	lease, renew, retry := leaseDuration, 4*time.Second, 500*time.Millisecond
	mgr, err := ctrl.NewManager(s.config, ctrl.Options{
		Scheme:                        sc,
		LeaderElection:                true,
		LeaderElectionID:              leaseName,
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &lease,
		RenewDeadline:                 &renew,
		RetryPeriod:                   &retry,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		// Both replicas run in this one process; controller-runtime
		// otherwise refuses a second controller of the same name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:     ctrllog.Log.WithName(name),
	})
	if err != nil {
		t.Fatalf("%s: new manager: %v", name, err)
	}
	rec := &greetingReconciler{Client: mgr.GetClient()}
	if err := ctrl.NewControllerManagedBy(mgr).For(&Greeting{}).Owns(&corev1.ConfigMap{}).Named("greeting").Complete(rec); err != nil {
		t.Fatalf("%s: controller: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{mgr: mgr, rec: rec, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *replica) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
	}
}

func (r *replica) elected() bool {
	select {
	case <-r.mgr.Elected():
		return true
	default:
		return false
	}
}

var setLoggerOnce sync.Once

// TestControllerRuntimeOperator runs an unmodified controller-runtime
// manager against kelp: leader election on a coordination.k8s.io Lease,
// the informer cache (the CRD's watch and ConfigMaps'), a finalizer and
// the status subresource, through create, update and delete of a custom
// resource; then a second replica that waits on the Lease while the first
// holds it and takes over when the first steps down.
func TestControllerRuntimeOperator(t *testing.T) {
	setLoggerOnce.Do(func() {
		// controller-runtime's log goes to stderr, errors only unless
		// KELP_TEST_VERBOSE is set (it logs every reconcile at V(0)).
		v := -1
		if os.Getenv("KELP_TEST_VERBOSE") != "" {
			v = 1
		}
		ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) },
			funcr.Options{Verbosity: v}))
	})
	s := startServer(t)
	ctx := ctxT(t)
	if _, err := s.crdClient().ApiextensionsV1().CustomResourceDefinitions().Create(ctx, greetingCRD(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating CRD: %v", err)
	}
	s.waitEstablished(ctx, "greetings."+greetingGroup)
	sc := operatorScheme(t)
	cs := s.client()

	a := startReplica(t, s, sc, "replica-a")
	eventually(t, 15*time.Second, "replica-a elected", func() (bool, string) { return a.elected(), "not elected" })
	lease, err := cs.CoordinationV1().Leases("default").Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the leader's Lease: %v", err)
	}
	holderA := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holderA == "" {
		t.Fatalf("Lease %s has no holder: %+v", leaseName, lease.Spec)
	}

	// The second replica: it must wait on the Lease, renewing nothing and
	// reconciling nothing, for longer than a lease duration.
	b := startReplica(t, s, sc, "replica-b")
	bStarted := time.Now()

	// Create: the leader adds its finalizer, writes the ConfigMap (owned
	// by the Greeting) and the status.
	c := a.mgr.GetClient() // the cache-backed client a reconciler uses
	direct, err := client.New(s.config, client.Options{Scheme: sc})
	if err != nil {
		t.Fatal(err)
	}
	g := &Greeting{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello"}, Spec: GreetingSpec{Message: "hello, kelp"}}
	if err := direct.Create(ctx, g); err != nil {
		t.Fatalf("creating Greeting: %v", err)
	}
	waitRendered(t, ctx, direct, "hello", "hello, kelp", 1)
	// The cache sees it too (the reconciler reads through it).
	eventually(t, 5*time.Second, "Greeting in replica-a's cache", func() (bool, string) {
		var got Greeting
		err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "hello"}, &got)
		return err == nil && got.Status.ObservedGeneration == 1, fmt.Sprint(err, got.Status)
	})

	// Update: a new message is a new generation, re-rendered.
	eventually(t, 5*time.Second, "updating Greeting", func() (bool, string) {
		var got Greeting
		if err := direct.Get(ctx, client.ObjectKey{Namespace: "default", Name: "hello"}, &got); err != nil {
			return false, err.Error()
		}
		got.Spec.Message = "hello again"
		err := direct.Update(ctx, &got) // a conflict with the operator's status write is retried
		return err == nil, fmt.Sprint(err)
	})
	waitRendered(t, ctx, direct, "hello", "hello again", 2)

	// Delete: the finalizer holds the Greeting until the operator has
	// deleted its ConfigMap, then both are gone.
	if err := direct.Delete(ctx, &Greeting{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello"}}); err != nil {
		t.Fatalf("deleting Greeting: %v", err)
	}
	eventually(t, 10*time.Second, "Greeting and its ConfigMap deleted", func() (bool, string) {
		var got Greeting
		gErr := direct.Get(ctx, client.ObjectKey{Namespace: "default", Name: "hello"}, &got)
		_, cmErr := cs.CoreV1().ConfigMaps("default").Get(ctx, "greeting-hello", metav1.GetOptions{})
		return apierrors.IsNotFound(gErr) && apierrors.IsNotFound(cmErr), fmt.Sprintf("greeting: %v (finalizers %v), configmap: %v", gErr, got.Finalizers, cmErr)
	})
	if n := a.rec.finalized.Load(); n != 1 {
		t.Errorf("replica-a ran the finalizer %d times, want 1", n)
	}

	// All the while the second replica waited: not elected, no reconcile,
	// and the Lease still names the first. Wait out more than a lease
	// duration since it started, so a replica that ignored the holder's
	// renewals would have taken over by now.
	time.Sleep(time.Until(bStarted.Add(leaseDuration + 1500*time.Millisecond)))
	if b.elected() {
		t.Fatalf("replica-b was elected while replica-a holds the Lease")
	}
	if n := b.rec.reconciles.Load(); n != 0 {
		t.Fatalf("replica-b reconciled %d times while not the leader", n)
	}
	lease, err = cs.CoordinationV1().Leases("default").Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != holderA {
		t.Fatalf("Lease holder %q, want replica-a's %q", h, holderA)
	}
	checkLeaseRenewed(t, lease)

	// The first steps down (releasing the Lease on cancel); the second
	// takes the Lease and reconciles.
	a.stop()
	eventually(t, 15*time.Second, "replica-b elected after replica-a stopped", func() (bool, string) { return b.elected(), "not elected" })
	lease, err = cs.CoordinationV1().Leases("default").Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h == "" || h == holderA {
		t.Fatalf("after the handover the Lease holder is %q (replica-a was %q)", h, holderA)
	}
	g2 := &Greeting{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "second"}, Spec: GreetingSpec{Message: "from b"}}
	if err := direct.Create(ctx, g2); err != nil {
		t.Fatalf("creating Greeting: %v", err)
	}
	waitRendered(t, ctx, direct, "second", "from b", 1)
	if b.rec.reconciles.Load() == 0 {
		t.Fatalf("replica-b is the leader but did not reconcile")
	}
}

// checkLeaseRenewed: the holder renews its Lease while it leads (the renew
// time is recent), so a waiting replica never finds it expired.
func checkLeaseRenewed(t *testing.T, l *coordinationv1.Lease) {
	t.Helper()
	if l.Spec.RenewTime == nil {
		t.Fatalf("Lease has no renewTime: %+v", l.Spec)
	}
	if age := time.Since(l.Spec.RenewTime.Time); age > leaseDuration {
		t.Fatalf("Lease last renewed %v ago, beyond its %v duration", age, leaseDuration)
	}
}

// waitRendered waits for the ConfigMap of Greeting name to hold msg,
// owned by the Greeting, and for the Greeting's status to report
// generation gen and its finalizer to be set.
func waitRendered(t *testing.T, ctx context.Context, c client.Client, name, msg string, gen int64) {
	t.Helper()
	eventually(t, 10*time.Second, "Greeting "+name+" rendered", func() (bool, string) {
		var g Greeting
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &g); err != nil {
			return false, err.Error()
		}
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "greeting-" + name}, &cm); err != nil {
			return false, "configmap: " + err.Error()
		}
		if cm.Data["message"] != msg {
			return false, fmt.Sprintf("configmap data %v", cm.Data)
		}
		owner := metav1.GetControllerOf(&cm)
		if owner == nil || owner.UID != g.UID || owner.Kind != "Greeting" {
			return false, fmt.Sprintf("configmap owner %+v", owner)
		}
		if !controllerutil.ContainsFinalizer(&g, greetingFinalizer) {
			return false, fmt.Sprintf("finalizers %v", g.Finalizers)
		}
		if g.Generation != gen || g.Status.ObservedGeneration != gen || g.Status.ConfigMap != "greeting-"+name {
			return false, fmt.Sprintf("generation %d, status %+v", g.Generation, g.Status)
		}
		return true, ""
	})
}
