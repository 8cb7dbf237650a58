package scheduler

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

type recordedEvent struct {
	obj     runtime.Object
	kind    string
	reason  string
	message string
}

// testRecorder collects events without blocking.
type testRecorder struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (r *testRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, recordedEvent{obj, eventtype, reason, message})
}

func (r *testRecorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

func (r *testRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

// eventsFor returns "type reason message" strings for the named pod.
func (r *testRecorder) eventsFor(name string) []recordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recordedEvent
	for _, e := range r.events {
		if m, ok := e.obj.(metav1.Object); ok && m.GetName() == name {
			out = append(out, e)
		}
	}
	return out
}

type testEnv struct {
	t        testing.TB
	client   *fake.Clientset
	sched    *Scheduler
	recorder *testRecorder
	cancel   context.CancelFunc
	done     chan struct{}
	binds    atomic.Int64
	// unobserved counts binding writes the pod informer has not delivered
	// yet. The fake tracker's watch channel holds 100 events and panics
	// when full, so the bind reactor applies backpressure on it.
	unobserved atomic.Int64

	failMu    sync.Mutex
	failBinds map[string]int // pod name -> remaining injected bind failures
}

// newTestEnv starts a scheduler over a fake clientset holding objs. The
// fake clientset's Bind is a no-op, so a reactor emulates the apiserver's
// pods/binding: set spec.nodeName and PodScheduled=True, 409 if bound.
func newTestEnv(t testing.TB, objs ...runtime.Object) *testEnv {
	client := fake.NewSimpleClientset(objs...)
	env := &testEnv{t: t, client: client, recorder: &testRecorder{}, done: make(chan struct{}), failBinds: map[string]int{}}
	var bindMu sync.Mutex
	client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := action.(k8stesting.CreateAction)
		if !ok || action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := ca.GetObject().(*v1.Binding)
		env.failMu.Lock()
		if env.failBinds[b.Name] > 0 {
			env.failBinds[b.Name]--
			env.failMu.Unlock()
			return true, nil, apierrors.NewInternalError(fmt.Errorf("injected bind failure"))
		}
		env.failMu.Unlock()
		for env.unobserved.Load() >= 50 {
			time.Sleep(50 * time.Microsecond)
		}
		bindMu.Lock()
		defer bindMu.Unlock()
		obj, err := client.Tracker().Get(podsGVR, b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		if pod.Spec.NodeName != "" {
			return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), b.Name, fmt.Errorf("pod is already assigned to node %q", pod.Spec.NodeName))
		}
		pod.Spec.NodeName = b.Target.Name
		conds := pod.Status.Conditions[:0]
		for _, c := range pod.Status.Conditions {
			if c.Type != v1.PodScheduled {
				conds = append(conds, c)
			}
		}
		pod.Status.Conditions = append(conds, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue})
		if err := client.Tracker().Update(podsGVR, pod, b.Namespace); err != nil {
			return true, nil, err
		}
		env.unobserved.Add(1)
		env.binds.Add(1)
		return true, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	env.sched = New(client, factory, env.recorder, DefaultBackoff)
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			if oldObj.(*v1.Pod).Spec.NodeName == "" && newObj.(*v1.Pod).Spec.NodeName != "" {
				env.unobserved.Add(-1)
			}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	env.cancel = cancel
	go func() {
		defer close(env.done)
		env.sched.Run(ctx)
		factory.Shutdown()
	}()
	t.Cleanup(env.stop)
	return env
}

func (e *testEnv) stop() {
	e.cancel()
	<-e.done
}

func (e *testEnv) getPod(name string) *v1.Pod {
	e.t.Helper()
	p, err := e.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get pod %s: %v", name, err)
	}
	return p
}

// waitFor polls cond until it holds or the timeout passes.
func (e *testEnv) waitFor(timeout time.Duration, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *testEnv) waitBound(name string, timeout time.Duration) string {
	e.t.Helper()
	var node string
	e.waitFor(timeout, "pod "+name+" bound", func() bool {
		node = e.getPod(name).Spec.NodeName
		return node != ""
	})
	return node
}

// waitFailed waits for a FailedScheduling event for pod and returns its message.
func (e *testEnv) waitFailed(name string, timeout time.Duration) string {
	e.t.Helper()
	var msg string
	e.waitFor(timeout, "FailedScheduling for "+name, func() bool {
		for _, ev := range e.recorder.eventsFor(name) {
			if ev.reason == "FailedScheduling" && ev.kind == v1.EventTypeWarning {
				msg = ev.message
				return true
			}
		}
		return false
	})
	return msg
}

func (e *testEnv) createNode(n *v1.Node) {
	e.t.Helper()
	if _, err := e.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *testEnv) createPod(p *v1.Pod) {
	e.t.Helper()
	if _, err := e.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

type nodeOpt func(*v1.Node)

func makeNode(name, cpu, mem string, opts ...nodeOpt) *v1.Node {
	alloc := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse(cpu),
		v1.ResourceMemory:           resource.MustParse(mem),
		v1.ResourcePods:             resource.MustParse("110"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-" + name), Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: v1.NodeStatus{
			Capacity:    alloc.DeepCopy(),
			Allocatable: alloc,
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func withTaint(key, value string, effect v1.TaintEffect) nodeOpt {
	return func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func withLabel(k, v string) nodeOpt { return func(n *v1.Node) { n.Labels[k] = v } }

func withReady(s v1.ConditionStatus) nodeOpt {
	return func(n *v1.Node) { n.Status.Conditions[0].Status = s }
}

type podOpt func(*v1.Pod)

func makePod(name, cpu, mem string, opts ...podOpt) *v1.Pod {
	req := v1.ResourceList{}
	if cpu != "" {
		req[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		req[v1.ResourceMemory] = resource.MustParse(mem)
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{
			SchedulerName: v1.DefaultSchedulerName,
			Containers:    []v1.Container{{Name: "c", Image: "busybox", Resources: v1.ResourceRequirements{Requests: req}}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ownedBy(uid string) podOpt {
	return func(p *v1.Pod) {
		ctrl := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: types.UID(uid), Controller: &ctrl}}
	}
}

func onNode(node string) podOpt { return func(p *v1.Pod) { p.Spec.NodeName = node } }

func withHostPort(port int32) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, v1.ContainerPort{ContainerPort: 80, HostPort: port})
	}
}

func withToleration(key, value string, effect v1.TaintEffect) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: key, Operator: v1.TolerationOpEqual, Value: value, Effect: effect})
	}
}

func withNodeSelector(k, v string) podOpt {
	return func(p *v1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector[k] = v
	}
}
