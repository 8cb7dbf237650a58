// Package namespace implements kelp's namespace controller: it empties
// namespaces that are being deleted and then removes the "kubernetes"
// finalizer from spec.finalizers so that the API server can drop the
// namespace object.
//
// The controller is an ordinary API client. Discovery tells it which
// namespaced resources exist; the metadata client lists and deletes them
// generically, so custom resources are handled like built-in ones.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
)

// FinalizerKubernetes is the spec.finalizers entry owned by this controller.
const FinalizerKubernetes = corev1.FinalizerKubernetes

// Condition types and reasons written to status.conditions of a
// terminating namespace (same strings as upstream).
const (
	reasonDiscoveryFailed     = "DiscoveryFailed"
	reasonDiscoverySucceeded  = "ResourcesDiscovered"
	reasonParsingFailed       = "GroupVersionParsingFailed"
	reasonParsingSucceeded    = "ParsedGroupVersions"
	reasonContentDeleteFailed = "ContentDeletionFailed"
	reasonContentDeleted      = "ContentDeleted"
	reasonContentRemaining    = "SomeResourcesRemain"
	reasonContentRemoved      = "ContentRemoved"
	reasonFinalizersRemaining = "SomeFinalizersRemain"
	reasonFinalizersRemoved   = "ContentHasNoFinalizers"
)

// remainingRequeue is the minimum delay before a namespace whose content is
// still going away is looked at again.
const remainingRequeue = 2 * time.Second

// Controller empties terminating namespaces and finalizes them.
type Controller struct {
	client    kubernetes.Interface
	discovery discovery.DiscoveryInterface
	metadata  metadata.Interface

	nsLister corelisters.NamespaceLister
	nsSynced cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]

	// now is replaceable in tests.
	now func() time.Time
}

// New returns a namespace controller. disco is used to find the namespaced
// resources (ServerPreferredNamespacedResources), meta to list and delete
// their objects, client for the namespace itself (status, finalize).
func New(client kubernetes.Interface, disco discovery.DiscoveryInterface, meta metadata.Interface, factory informers.SharedInformerFactory) *Controller {
	nsInformer := factory.Core().V1().Namespaces()
	c := &Controller{
		client:    client,
		discovery: disco,
		metadata:  meta,
		nsLister:  nsInformer.Lister(),
		nsSynced:  nsInformer.Informer().HasSynced,
		queue:     controllers.NewQueue("namespace"),
		now:       time.Now,
	}
	_, _ = nsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
	})
	return c
}

// NewForConfig builds the discovery and metadata clients from cfg and
// returns New(client, ...).
func NewForConfig(cfg *rest.Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("namespace controller: discovery client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("namespace controller: metadata client: %w", err)
	}
	return New(client, disco, meta, factory), nil
}

func (c *Controller) enqueue(obj interface{}) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok || ns.DeletionTimestamp == nil {
		return
	}
	c.queue.Add(ns.Name)
}

// Run waits for the namespace informer to sync and runs workers until ctx
// is done. The factory must be started by the caller.
func (c *Controller) Run(ctx context.Context, workers int) {
	loop := controllers.Loop{Name: "namespace", Queue: c.queue, Synced: []cache.InformerSynced{c.nsSynced}, Sync: c.sync}
	loop.Run(ctx, workers)
}

// ContentRemainingError reports that a namespace still has content after a
// deletion pass; Estimate is when it is worth looking again.
// It is not a failure: the loop looks again after Estimate.
type ContentRemainingError struct {
	Estimate time.Duration
	Message  string
}

func (e *ContentRemainingError) Error() string {
	return fmt.Sprintf("namespace content remaining (recheck in %s): %s", e.Estimate, e.Message)
}

// sync drives one namespace towards removal.
func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.nsLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil {
		return nil
	}
	// The lister may lag; act on the freshest copy.
	ns, err = c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil || !hasFinalizer(ns, FinalizerKubernetes) {
		return nil
	}
	if ns.Status.Phase != corev1.NamespaceTerminating {
		ns, err = c.updateStatus(ctx, name, func(st *corev1.NamespaceStatus) { st.Phase = corev1.NamespaceTerminating })
		if err != nil {
			return err
		}
	}

	if err := c.deleteAllContent(ctx, ns); err != nil {
		return err
	}
	return c.finalize(ctx, name)
}

// deleteAllContent deletes every object in the namespace and reports a
// *ContentRemainingError while some still exist.
func (c *Controller) deleteAllContent(ctx context.Context, ns *corev1.Namespace) error {
	conds := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{}
	setCond := func(t corev1.NamespaceConditionType, failed bool, reason, msg string) {
		st := corev1.ConditionFalse
		if failed {
			st = corev1.ConditionTrue
		}
		conds[t] = corev1.NamespaceCondition{Type: t, Status: st, Reason: reason, Message: msg}
	}

	var errs []error
	lists, discErr := discovery.ServerPreferredNamespacedResources(c.discovery)
	if discErr != nil {
		errs = append(errs, discErr)
		setCond(corev1.NamespaceDeletionDiscoveryFailure, true, reasonDiscoveryFailed, discErr.Error())
	} else {
		setCond(corev1.NamespaceDeletionDiscoveryFailure, false, reasonDiscoverySucceeded, "All resources successfully discovered")
	}
	if discErr != nil && len(lists) == 0 {
		_ = c.setConditions(ctx, ns.Name, conds)
		return discErr
	}

	resources, parseErrs := deletableResources(lists)
	if len(parseErrs) > 0 {
		errs = append(errs, parseErrs...)
		setCond(corev1.NamespaceDeletionGVParsingFailure, true, reasonParsingFailed, joinErrs(parseErrs))
	} else {
		setCond(corev1.NamespaceDeletionGVParsingFailure, false, reasonParsingSucceeded, "All legacy kube types successfully parsed")
	}

	// Pods go first, and nothing else goes while one remains (upstream's
	// OrderedNamespaceDeletion, GA in 1.34): a pod being torn down still
	// reads its ConfigMaps, Secrets and service account, and a
	// NetworkPolicy still guards it.
	slices.SortStableFunc(resources, func(a, b resource) int {
		switch {
		case a.gvr == b.gvr || a.gvr != podsGVR && b.gvr != podsGVR:
			return 0
		case a.gvr == podsGVR:
			return -1
		}
		return 1
	})
	var deleteErrs []error
	remaining := map[string]int{}  // "resource.group" -> count
	finalizers := map[string]int{} // finalizer -> count
	var estimate time.Duration
	podsLeft := false
	for _, r := range resources {
		if podsLeft && r.gvr != podsGVR {
			break
		}
		res, err := c.deleteResource(ctx, ns.Name, r)
		if r.gvr == podsGVR {
			podsLeft = err != nil || res.count > 0
		}
		if err != nil {
			deleteErrs = append(deleteErrs, err)
			continue
		}
		if res.count > 0 {
			remaining[groupResource(r.gvr)] += res.count
		}
		for f, n := range res.finalizers {
			finalizers[f] += n
		}
		if res.estimate > estimate {
			estimate = res.estimate
		}
	}
	if len(deleteErrs) > 0 {
		errs = append(errs, deleteErrs...)
		setCond(corev1.NamespaceDeletionContentFailure, true, reasonContentDeleteFailed,
			"Failed to delete all resource types, "+fmt.Sprint(len(deleteErrs))+" remaining: "+joinErrs(deleteErrs))
	} else {
		setCond(corev1.NamespaceDeletionContentFailure, false, reasonContentDeleted, "All content successfully deleted, may be waiting on finalization")
	}
	if len(remaining) > 0 {
		setCond(corev1.NamespaceContentRemaining, true, reasonContentRemaining, "Some resources are remaining: "+countSummary(remaining, "instances"))
	} else {
		setCond(corev1.NamespaceContentRemaining, false, reasonContentRemoved, "All content successfully removed")
	}
	if len(finalizers) > 0 {
		setCond(corev1.NamespaceFinalizersRemaining, true, reasonFinalizersRemaining, "Some content in the namespace has finalizers remaining: "+countSummary(finalizers, "resource instances"))
	} else {
		setCond(corev1.NamespaceFinalizersRemaining, false, reasonFinalizersRemoved, "All content-preserving finalizers finished")
	}

	if err := c.setConditions(ctx, ns.Name, conds); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(remaining) > 0 {
		if estimate < remainingRequeue {
			estimate = remainingRequeue
		}
		return &ContentRemainingError{Estimate: estimate, Message: countSummary(remaining, "instances")}
	}
	return nil
}

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

type resource struct {
	gvr              schema.GroupVersionResource
	deleteCollection bool
}

// deletableResources returns the resources that can be listed and deleted,
// in a stable order.
func deletableResources(lists []*metav1.APIResourceList) ([]resource, []error) {
	var out []resource
	var errs []error
	seen := sets.New[schema.GroupVersionResource]()
	for _, l := range lists {
		if l == nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			errs = append(errs, fmt.Errorf("parsing group version %q: %w", l.GroupVersion, err))
			continue
		}
		for _, r := range l.APIResources {
			if !r.Namespaced || strings.Contains(r.Name, "/") {
				continue // cluster-scoped or a subresource
			}
			verbs := sets.New[string](r.Verbs...)
			if !verbs.HasAll("list", "delete") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			if seen.Has(gvr) {
				continue
			}
			seen.Insert(gvr)
			out = append(out, resource{gvr: gvr, deleteCollection: verbs.Has("deletecollection")})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gvr.String() < out[j].gvr.String() })
	return out, errs
}

type deleteResult struct {
	count      int
	finalizers map[string]int
	estimate   time.Duration
}

// deleteResource deletes all objects of one resource in namespace ns and
// reports what is still there afterwards.
func (c *Controller) deleteResource(ctx context.Context, ns string, r resource) (deleteResult, error) {
	client := c.metadata.Resource(r.gvr).Namespace(ns)
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}

	collectionDone := false
	if r.deleteCollection {
		err := client.DeleteCollection(ctx, opts, metav1.ListOptions{})
		switch {
		case err == nil:
			collectionDone = true
		case apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err):
			// Fall back to one by one.
		default:
			return deleteResult{}, fmt.Errorf("deletecollection %s: %w", r.gvr, err)
		}
	}

	list, err := client.List(ctx, metav1.ListOptions{})
	if apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err) {
		return deleteResult{}, nil // resource vanished or is not listable
	}
	if err != nil {
		return deleteResult{}, fmt.Errorf("list %s: %w", r.gvr, err)
	}

	res := deleteResult{finalizers: map[string]int{}}
	var errs []error
	for i := range list.Items {
		item := &list.Items[i]
		if !collectionDone && item.DeletionTimestamp == nil {
			o := opts
			o.Preconditions = &metav1.Preconditions{UID: &item.UID}
			switch err := client.Delete(ctx, item.Name, o); {
			case err == nil:
			case apierrors.IsNotFound(err):
				continue // gone already
			case apierrors.IsConflict(err):
				// Replaced by a new object with the same name; counted as
				// remaining, the next pass deletes it.
			default:
				errs = append(errs, fmt.Errorf("delete %s %s/%s: %w", r.gvr, ns, item.Name, err))
			}
		}
		// Whatever was in the list may still exist (graceful deletion,
		// finalizers): count it; the next pass lists again.
		res.count++
		for _, f := range item.Finalizers {
			res.finalizers[f]++
		}
		if g := item.DeletionGracePeriodSeconds; g != nil {
			if d := time.Duration(*g) * time.Second; d > res.estimate {
				res.estimate = d
			}
		}
	}
	if len(errs) > 0 {
		return res, errors.Join(errs...)
	}
	if !collectionDone || res.count == 0 {
		return c.recount(ctx, client, res)
	}
	return res, nil
}

// recount lists once more after individual deletes so that objects that
// went away immediately are not reported as remaining.
func (c *Controller) recount(ctx context.Context, client metadata.ResourceInterface, prev deleteResult) (deleteResult, error) {
	if prev.count == 0 {
		return prev, nil
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err) {
		return deleteResult{}, nil
	}
	if err != nil {
		return prev, err
	}
	res := deleteResult{finalizers: map[string]int{}}
	for i := range list.Items {
		item := &list.Items[i]
		res.count++
		for _, f := range item.Finalizers {
			res.finalizers[f]++
		}
		if g := item.DeletionGracePeriodSeconds; g != nil {
			if d := time.Duration(*g) * time.Second; d > res.estimate {
				res.estimate = d
			}
		}
	}
	return res, nil
}

// finalize removes FinalizerKubernetes from spec.finalizers through the
// finalize subresource.
func (c *Controller) finalize(ctx context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if !hasFinalizer(ns, FinalizerKubernetes) {
			return nil
		}
		ns = ns.DeepCopy()
		var kept []corev1.FinalizerName
		for _, f := range ns.Spec.Finalizers {
			if f != FinalizerKubernetes {
				kept = append(kept, f)
			}
		}
		ns.Spec.Finalizers = kept
		_, err = c.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

func (c *Controller) updateStatus(ctx context.Context, name string, mutate func(*corev1.NamespaceStatus)) (*corev1.Namespace, error) {
	var out *corev1.Namespace
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ns, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ns = ns.DeepCopy()
		mutate(&ns.Status)
		out, err = c.client.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{})
		return err
	})
	return out, err
}

// setConditions writes conds into status.conditions, touching
// LastTransitionTime only when a condition's status changes, and skips the
// write when nothing changed.
func (c *Controller) setConditions(ctx context.Context, name string, conds map[corev1.NamespaceConditionType]corev1.NamespaceCondition) error {
	ns, err := c.nsLister.Get(name)
	if err == nil && !conditionsChange(ns.Status.Conditions, conds) {
		return nil
	}
	now := metav1.NewTime(c.now())
	_, err = c.updateStatus(ctx, name, func(st *corev1.NamespaceStatus) {
		for t, want := range conds {
			found := false
			for i := range st.Conditions {
				cur := &st.Conditions[i]
				if cur.Type != t {
					continue
				}
				found = true
				if cur.Status != want.Status {
					cur.LastTransitionTime = now
				}
				cur.Status, cur.Reason, cur.Message = want.Status, want.Reason, want.Message
			}
			if !found {
				want.LastTransitionTime = now
				st.Conditions = append(st.Conditions, want)
			}
		}
		sort.SliceStable(st.Conditions, func(i, j int) bool { return st.Conditions[i].Type < st.Conditions[j].Type })
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func conditionsChange(cur []corev1.NamespaceCondition, want map[corev1.NamespaceConditionType]corev1.NamespaceCondition) bool {
	for t, w := range want {
		found := false
		for _, c := range cur {
			if c.Type == t {
				found = true
				if c.Status != w.Status || c.Reason != w.Reason || c.Message != w.Message {
					return true
				}
			}
		}
		if !found {
			return true
		}
	}
	return false
}

func hasFinalizer(ns *corev1.Namespace, f corev1.FinalizerName) bool {
	for _, x := range ns.Spec.Finalizers {
		if x == f {
			return true
		}
	}
	return false
}

func groupResource(gvr schema.GroupVersionResource) string {
	return gvr.GroupResource().String()
}

func countSummary(m map[string]int, unit string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s has %d %s", k, m[k], unit))
	}
	return strings.Join(parts, ", ")
}

func joinErrs(errs []error) string {
	s := make([]string, 0, len(errs))
	for _, e := range errs {
		s = append(s, e.Error())
	}
	return strings.Join(s, "; ")
}

// RequeueDelay tells the loop when to look again.
func (e *ContentRemainingError) RequeueDelay() time.Duration { return e.Estimate }
