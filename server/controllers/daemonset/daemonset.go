// Package daemonset is kelp's DaemonSet controller, as upstream's
// pkg/controller/daemon: one pod per eligible node (nodeSelector, required
// node affinity, taints against the template's tolerations plus the
// automatic daemon tolerations). Pods are created with a required
// matchFields affinity on the node's name and bound by the default
// scheduler. Template changes roll out by RollingUpdate (maxUnavailable or
// maxSurge) or OnDelete, each template kept as a ControllerRevision so
// kubectl's rollout history and undo work. Informers on DaemonSets, Pods,
// Nodes and ControllerRevisions feed one rate-limited queue of DaemonSet
// keys; expectations keep a burst of stale watch events from doubling
// creates or deletes.
package daemonset

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kelp-project/kelp/server/controllers"
	"github.com/kelp-project/kelp/server/controllers/history"
)

const (
	// burstPods caps the creates and the deletes of one sync (upstream's
	// burstReplicas).
	burstPods = 250

	// Event reasons, as upstream.
	SuccessfulCreateReason   = "SuccessfulCreate"
	FailedCreateReason       = "FailedCreate"
	SuccessfulDeleteReason   = "SuccessfulDelete"
	FailedDeleteReason       = "FailedDelete"
	FailedDaemonPodReason    = "FailedDaemonPod"
	SucceededDaemonPodReason = "SucceededDaemonPod"
	SelectingAllReason       = "SelectingAll"

	// Backoff of deleting a failed daemon pod on the same node: a kubelet
	// that keeps rejecting the pod must not make the two fight in a hot
	// loop (upstream: 1 s doubling to 15 min).
	failedPodInitialBackoff = time.Second
	failedPodMaxBackoff     = 15 * time.Minute
)

var controllerKind = apps.SchemeGroupVersion.WithKind("DaemonSet")

// Controller is the DaemonSet controller.
type Controller struct {
	client   kubernetes.Interface
	factory  informers.SharedInformerFactory
	recorder record.EventRecorder

	dsLister   appslisters.DaemonSetLister
	podLister  corelisters.PodLister
	nodeLister corelisters.NodeLister
	revLister  appslisters.ControllerRevisionLister
	history    history.Store
	synced     []cache.InformerSynced

	queue         workqueue.TypedRateLimitingInterface[string]
	expectations  *controllers.Expectations
	pods          *controllers.PodOwners[*apps.DaemonSet]
	failedBackoff *flowcontrol.Backoff

	now func() time.Time
}

// New wires the controller to the factory's informers. Run starts the
// factory (idempotent) and waits for its caches.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *Controller {
	dsInf := factory.Apps().V1().DaemonSets()
	podInf := factory.Core().V1().Pods()
	nodeInf := factory.Core().V1().Nodes()
	revInf := factory.Apps().V1().ControllerRevisions()
	c := &Controller{
		client:        client,
		factory:       factory,
		recorder:      recorder,
		dsLister:      dsInf.Lister(),
		podLister:     podInf.Lister(),
		nodeLister:    nodeInf.Lister(),
		revLister:     revInf.Lister(),
		history:       history.Store{Client: client, Lister: revInf.Lister()},
		synced:        []cache.InformerSynced{dsInf.Informer().HasSynced, podInf.Informer().HasSynced, nodeInf.Informer().HasSynced, revInf.Informer().HasSynced},
		queue:         controllers.NewQueue("daemonset"),
		expectations:  controllers.NewExpectations(nil),
		failedBackoff: flowcontrol.NewBackOff(failedPodInitialBackoff, failedPodMaxBackoff),
		now:           time.Now,
	}
	c.pods = &controllers.PodOwners[*apps.DaemonSet]{
		Name:            "daemonset",
		Queue:           c.queue,
		Expectations:    c.expectations,
		Get:             func(ns, name string) (*apps.DaemonSet, error) { return c.dsLister.DaemonSets(ns).Get(name) },
		Resolve:         c.resolveControllerRef,
		List:            func(ns string) ([]*apps.DaemonSet, error) { return c.dsLister.DaemonSets(ns).List(labels.Everything()) },
		Selector:        func(ds *apps.DaemonSet) *metav1.LabelSelector { return ds.Spec.Selector },
		MinReadySeconds: func(ds *apps.DaemonSet) int32 { return ds.Spec.MinReadySeconds },
	}
	_, _ = dsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur interface{}) { c.enqueue(cur) },
		DeleteFunc: c.pods.DeleteOwner,
	})
	_, _ = podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.pods.AddPod,
		UpdateFunc: c.pods.UpdatePod,
		DeleteFunc: c.pods.DeletePod,
	})
	_, _ = nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { c.enqueueAll() },
		UpdateFunc: c.updateNode,
		DeleteFunc: func(interface{}) { c.enqueueAll() },
	})
	// A revision deleted by hand is recreated at once.
	_, _ = revInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if rev, ok := obj.(*apps.ControllerRevision); ok {
				if ds := c.resolveControllerRef(rev.Namespace, metav1.GetControllerOf(rev)); ds != nil {
					c.enqueue(ds)
				}
			}
		},
	})
	return c
}

// Run starts the informers, waits for cache sync, and runs workers until
// ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.factory.Start(ctx.Done())
	// Backoff entries of nodes and DaemonSets long gone would otherwise
	// pile up; GC drops those idle for twice the maximum delay.
	go wait.Until(c.failedBackoff.GC, time.Minute, ctx.Done())
	loop := controllers.Loop{Name: "daemonset", Queue: c.queue, Synced: c.synced, Sync: c.sync}
	loop.Run(ctx, workers)
}

// ---- event handlers ----

func (c *Controller) enqueue(obj interface{}) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) enqueueAll() {
	all, err := c.dsLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ds := range all {
		c.enqueue(ds)
	}
}

// updateNode reacts only to what decides placement. Heartbeats change a
// node's status every few seconds; a resync of every DaemonSet for each
// would be wasted work.
func (c *Controller) updateNode(old, cur interface{}) {
	o, ok1 := old.(*v1.Node)
	n, ok2 := cur.(*v1.Node)
	if !ok1 || !ok2 {
		return
	}
	if apiequality.Semantic.DeepEqual(o.Labels, n.Labels) && apiequality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) &&
		o.Spec.Unschedulable == n.Spec.Unschedulable {
		return
	}
	c.enqueueAll()
}

// resolveControllerRef returns the cached DaemonSet ref points at, or nil
// if it is not one (kind, name and UID must match).
func (c *Controller) resolveControllerRef(ns string, ref *metav1.OwnerReference) *apps.DaemonSet {
	if ref == nil || ref.Kind != controllerKind.Kind {
		return nil
	}
	ds, err := c.dsLister.DaemonSets(ns).Get(ref.Name)
	if err != nil || ds.UID != ref.UID {
		return nil
	}
	return ds
}

// ---- reconcile ----

func (c *Controller) sync(ctx context.Context, key string) error {
	ds, sel, err := c.pods.Start(key)
	if ds == nil {
		return err
	}
	if sel.Empty() {
		c.recorder.Eventf(ds, v1.EventTypeWarning, SelectingAllReason, "This daemon set is selecting all pods. A non-empty selector is required.")
		return nil
	}
	// Being deleted: the garbage collector takes the pods.
	if ds.DeletionTimestamp != nil {
		return nil
	}
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		return err
	}
	cur, old, err := c.revisions(ctx, ds, sel)
	if err != nil {
		return fmt.Errorf("daemonset %s: revisions: %w", key, err)
	}
	hash := cur.Labels[revisionHashLabel]

	if !c.expectations.Satisfied(key) {
		// Creates or deletes still on their way: report, do not act.
		pods, err := c.podsByNode(ctx, ds, sel, false)
		if err != nil {
			return err
		}
		return c.writeStatus(ctx, ds, nodes, pods, hash, false)
	}

	pods, err := c.podsByNode(ctx, ds, sel, false)
	if err != nil {
		return err
	}
	p := placementOf(ds)
	var errs []error
	if err := c.manage(ctx, ds, nodes, pods, p, hash); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && c.expectations.Satisfied(key) && ds.Spec.UpdateStrategy.Type == apps.RollingUpdateDaemonSetStrategyType {
		if err := c.rollingUpdate(ctx, ds, nodes, pods, p, hash); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.pruneRevisions(ctx, ds, old, pods); err != nil {
		errs = append(errs, err)
	}
	// The status counts what the cache shows after this sync's writes are
	// observed; the next event recomputes it.
	if err := c.writeStatus(ctx, ds, nodes, pods, hash, true); err != nil {
		errs = append(errs, err)
	}
	return utilerrors.NewAggregate(errs)
}

// podsByNode claims ds's pods (adopting orphans its selector picks,
// releasing owned ones it no longer picks) and groups them by the node
// they are for. Terminal pods already being deleted are left out unless
// includeGone: the controller has nothing more to do with them.
func (c *Controller) podsByNode(ctx context.Context, ds *apps.DaemonSet, sel labels.Selector, includeGone bool) (map[string][]*v1.Pod, error) {
	all, err := c.podLister.Pods(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	claimed, err := c.claimPods(ctx, ds, sel, all)
	if err != nil {
		return nil, err
	}
	out := map[string][]*v1.Pod{}
	for _, pod := range claimed {
		if !includeGone && pod.DeletionTimestamp != nil && (pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded) {
			continue
		}
		node, err := targetNode(pod)
		if err != nil {
			continue
		}
		out[node] = append(out[node], pod)
	}
	return out, nil
}

// claimPods returns ds's pods among pods, adopting orphans its selector
// picks and releasing owned ones it no longer picks.
func (c *Controller) claimPods(ctx context.Context, ds *apps.DaemonSet, sel labels.Selector, pods []*v1.Pod) ([]*v1.Pod, error) {
	claim := &controllers.PodClaim{
		Client: c.client, Owner: ds, Kind: controllerKind, Selector: sel,
		CanAdopt: controllers.RecheckOwner(ds, controllerKind.Kind, func() (metav1.Object, error) {
			return c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
		}),
	}
	return claim.Claim(ctx, pods)
}

// manage brings each node to what it should have: a pod where one should
// run and none is, none where none may stay, failed and succeeded pods
// replaced, extra pods pruned. Unscheduled pods for nodes that no longer
// exist go too; bound ones on a deleted node are the pod GC's.
func (c *Controller) manage(ctx context.Context, ds *apps.DaemonSet, nodes []*v1.Node, pods map[string][]*v1.Pod, p placement, hash string) error {
	var create, del []string
	exists := make(map[string]bool, len(nodes))
	for _, node := range nodes {
		exists[node.Name] = true
		cr, dl := c.nodeWork(ds, node, pods, p, hash)
		create = append(create, cr...)
		del = append(del, dl...)
	}
	for node, ps := range pods {
		if exists[node] {
			continue
		}
		for _, pod := range ps {
			if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
				del = append(del, pod.Name)
			}
		}
	}
	return c.syncNodes(ctx, ds, del, create, hash)
}

// nodeWork is upstream's podsShouldBeOnNode for one node.
func (c *Controller) nodeWork(ds *apps.DaemonSet, node *v1.Node, byNode map[string][]*v1.Pod, p placement, hash string) (create, del []string) {
	shouldRun, shouldContinue := p.shouldRun(node)
	pods, exists := byNode[node.Name]
	switch {
	case shouldRun && !exists:
		return []string{node.Name}, nil
	case shouldContinue:
		var running []*v1.Pod
		for _, pod := range pods {
			if pod.DeletionTimestamp != nil {
				continue
			}
			switch pod.Status.Phase {
			case v1.PodFailed:
				backoffKey := string(ds.UID) + "/" + node.Name
				now := c.now()
				if c.failedBackoff.IsInBackOffSinceUpdate(backoffKey, now) {
					key, _ := cache.MetaNamespaceKeyFunc(ds)
					c.queue.AddAfter(key, c.failedBackoff.Get(backoffKey))
					continue
				}
				c.failedBackoff.Next(backoffKey, now)
				c.recorder.Eventf(ds, v1.EventTypeWarning, FailedDaemonPodReason, "Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, node.Name)
				del = append(del, pod.Name)
			case v1.PodSucceeded:
				c.recorder.Eventf(ds, v1.EventTypeNormal, SucceededDaemonPodReason, "Found succeeded daemon pod %s/%s on node %s, will try to delete it", pod.Namespace, pod.Name, node.Name)
				del = append(del, pod.Name)
			default:
				running = append(running, pod)
			}
		}
		if !allowsSurge(ds) {
			// One pod per node: keep the oldest.
			if len(running) > 1 {
				sortOldestFirst(running)
				for _, pod := range running[1:] {
					del = append(del, pod.Name)
				}
			}
			return create, del
		}
		if len(running) <= 1 {
			if len(running) == 0 && shouldRun {
				create = append(create, node.Name)
			}
			return create, del
		}
		// Surging: an old and a new pod may share the node only while the
		// new one is not yet available and the old one still Ready.
		sortOldestFirst(running)
		var oldestNew, oldestOld *v1.Pod
		for _, pod := range running {
			isNew := pod.Labels[revisionHashLabel] == hash
			switch {
			case isNew && oldestNew == nil:
				oldestNew = pod
			case !isNew && oldestOld == nil:
				oldestOld = pod
			default:
				del = append(del, pod.Name)
			}
		}
		if oldestNew != nil && oldestOld != nil {
			if !podutils.IsPodReady(oldestOld) || podutils.IsPodAvailable(oldestNew, ds.Spec.MinReadySeconds, metav1.NewTime(c.now())) {
				del = append(del, oldestOld.Name)
			}
		}
	case exists:
		for _, pod := range pods {
			if pod.DeletionTimestamp == nil {
				del = append(del, pod.Name)
			}
		}
	}
	return create, del
}

// sortOldestFirst orders pods oldest first, Running before others at the
// same time (upstream's podByCreationTimestampAndPhase).
func sortOldestFirst(pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if ra, rb := a.Status.Phase == v1.PodRunning, b.Status.Phase == v1.PodRunning; ra != rb {
			return ra
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// syncNodes creates a pod for each node in create and deletes the named
// pods, at most burstPods of each. Creates go in slow-start batches
// (1, 2, 4, ...) so a create that always fails (quota, a bad template)
// costs a few calls, not one per node. Expectations are set before acting:
// the informer may deliver a pod before Create returns.
func (c *Controller) syncNodes(ctx context.Context, ds *apps.DaemonSet, del, create []string, hash string) error {
	key, err := cache.MetaNamespaceKeyFunc(ds)
	if err != nil {
		return err
	}
	create = create[:min(len(create), burstPods)]
	del = del[:min(len(del), burstPods)]
	delKeys := make([]string, len(del))
	for i, n := range del {
		delKeys[i] = ds.Namespace + "/" + n
	}
	c.expectations.Expect(key, len(create), delKeys)

	template := podTemplate(ds, hash)
	ref := metav1.NewControllerRef(ds, controllerKind)
	var (
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	pos := 0
	for batch := min(len(create), 1); batch > 0; batch = min(2*batch, len(create)-pos) {
		before := len(errs)
		var wg sync.WaitGroup
		for _, node := range create[pos : pos+batch] {
			wg.Add(1)
			go func(node string) {
				defer wg.Done()
				if err := c.createPod(ctx, ds, template, ref, node); err != nil {
					c.expectations.CreationsObserved(key, 1)
					if !apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
						fail(err)
					}
				}
			}(node)
		}
		wg.Wait()
		pos += batch
		if len(errs) > before {
			// The rest were never tried, so will never be observed.
			for range len(create) - pos {
				c.expectations.CreationsObserved(key, 1)
			}
			break
		}
	}

	var wg sync.WaitGroup
	for i, name := range del {
		wg.Add(1)
		go func(name, podKey string) {
			defer wg.Done()
			err := c.client.CoreV1().Pods(ds.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
			if err == nil {
				c.recorder.Eventf(ds, v1.EventTypeNormal, SuccessfulDeleteReason, "Deleted pod: %s", name)
				return
			}
			c.expectations.DeletionObserved(key, podKey)
			if !apierrors.IsNotFound(err) {
				c.recorder.Eventf(ds, v1.EventTypeWarning, FailedDeleteReason, "Error deleting: %v", err)
				fail(err)
			}
		}(name, delKeys[i])
	}
	wg.Wait()
	return utilerrors.NewAggregate(errs)
}

func (c *Controller) createPod(ctx context.Context, ds *apps.DaemonSet, template *v1.PodTemplateSpec, ref *metav1.OwnerReference, node string) error {
	t := template.DeepCopy()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ds.Namespace,
			GenerateName:    ds.Name + "-",
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*ref},
		},
		Spec: t.Spec,
	}
	pod.Spec.Affinity = bindToNode(pod.Spec.Affinity, node)
	created, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if !apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			c.recorder.Eventf(ds, v1.EventTypeWarning, FailedCreateReason, "Error creating: %v", err)
		}
		return err
	}
	c.recorder.Eventf(ds, v1.EventTypeNormal, SuccessfulCreateReason, "Created pod: %s", created.Name)
	return nil
}

// ---- status ----

// calculateStatus counts, per node that should run a daemon pod, its
// oldest pod; a pod on a node that should not run one is misscheduled.
func (c *Controller) calculateStatus(ds *apps.DaemonSet, nodes []*v1.Node, pods map[string][]*v1.Pod, hash string, observe bool) apps.DaemonSetStatus {
	st := *ds.Status.DeepCopy()
	p := placementOf(ds)
	gen := templateGeneration(ds)
	now := metav1.NewTime(c.now())
	var desired, current, misscheduled, ready, available, updated int32
	for _, node := range nodes {
		shouldRun, _ := p.shouldRun(node)
		onNode := pods[node.Name]
		if !shouldRun {
			if len(onNode) > 0 {
				misscheduled++
			}
			continue
		}
		desired++
		if len(onNode) == 0 {
			continue
		}
		current++
		sorted := append([]*v1.Pod(nil), onNode...)
		sortOldestFirst(sorted)
		pod := sorted[0]
		if podutils.IsPodReady(pod) {
			ready++
			if podutils.IsPodAvailable(pod, ds.Spec.MinReadySeconds, now) {
				available++
			}
		}
		if isUpdated(pod, hash, gen) {
			updated++
		}
	}
	st.DesiredNumberScheduled = desired
	st.CurrentNumberScheduled = current
	st.NumberMisscheduled = misscheduled
	st.NumberReady = ready
	st.NumberAvailable = available
	st.UpdatedNumberScheduled = updated
	st.NumberUnavailable = desired - available
	if observe {
		st.ObservedGeneration = ds.Generation
	}
	return st
}

// writeStatus writes status through /status only when it changed, once
// more against a fresh copy on conflict. observe marks the generation as
// acted on (not when expectations held the sync back): kubectl's rollout
// status trusts the counts only once observedGeneration catches up.
func (c *Controller) writeStatus(ctx context.Context, ds *apps.DaemonSet, nodes []*v1.Node, pods map[string][]*v1.Pod, hash string, observe bool) error {
	st := c.calculateStatus(ds, nodes, pods, hash, observe)
	if !apiequality.Semantic.DeepEqual(ds.Status, st) {
		cur := ds.DeepCopy()
		for attempt := 0; ; attempt++ {
			collisions := cur.Status.CollisionCount
			cur.Status = st
			cur.Status.CollisionCount = collisions
			_, err := c.client.AppsV1().DaemonSets(cur.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			if err == nil {
				break
			}
			if attempt == 1 {
				return err
			}
			if cur, err = c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
	}
	if observe && ds.Spec.MinReadySeconds > 0 && st.NumberReady != st.NumberAvailable {
		key, _ := cache.MetaNamespaceKeyFunc(ds)
		c.queue.AddAfter(key, time.Duration(ds.Spec.MinReadySeconds)*time.Second)
	}
	return nil
}
