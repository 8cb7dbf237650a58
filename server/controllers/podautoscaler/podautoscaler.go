// Package podautoscaler is kelp's HorizontalPodAutoscaler controller,
// upstream's pkg/controller/podautoscaler (reconcileAutoscaler) as far as
// it goes without metrics: every SyncPeriod each HPA reads its target's
// /scale (a scale client over a discovery RESTMapper, so any kind with a
// scale subresource works, custom resources too), brings a target below
// minReplicas or above maxReplicas into range with upstream's events and
// conditions, leaves a target scaled to zero alone (ScalingDisabled), and
// otherwise would compute replicas from metrics. kelp serves no metrics
// API (metrics.k8s.io, custom.metrics.k8s.io, external.metrics.k8s.io:
// it proxies to no extension API server), so that step fails the way
// upstream's does when those APIs answer nothing: ScalingActive False with
// upstream's reason (FailedGetResourceMetric, ...), a message saying no
// metrics API is served, and a Warning event. Metric-based scaling is not
// implemented.
package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
)

// SyncPeriod is upstream's --horizontal-pod-autoscaler-sync-period: how
// often each HPA is looked at again.
const SyncPeriod = 15 * time.Second

// The errors the metrics clients give in place of upstream's answers from
// the three metrics APIs, none of which kelp serves.
var (
	errNoResourceMetrics = errors.New("unable to fetch metrics from resource metrics API: no metrics API (metrics.k8s.io) is served in this cluster; kelp does not implement metric-based autoscaling")
	errNoCustomMetrics   = errors.New("unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) is served in this cluster; kelp does not implement metric-based autoscaling")
	errNoExternalMetrics = errors.New("unable to fetch metrics from external metrics API: no external metrics API (external.metrics.k8s.io) is served in this cluster; kelp does not implement metric-based autoscaling")
)

// Controller is the HPA controller.
type Controller struct {
	hpas     kubernetes.Interface
	scales   scale.ScalesGetter
	mapper   apimeta.ResettableRESTMapper
	lister   autoscalinglisters.HorizontalPodAutoscalerLister
	recorder record.EventRecorder
	period   time.Duration
	queue    workqueue.TypedRateLimitingInterface[string]
	loop     controllers.Loop
	now      func() time.Time
}

// New wires the controller to the factory's HPA informer; cfg makes the
// scale client. Every HPA is synced again period after its last sync.
func New(cfg *rest.Config, client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder, period time.Duration) (*Controller, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cached := memory.NewMemCacheClient(disc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		return nil, err
	}
	inf := factory.Autoscaling().V2().HorizontalPodAutoscalers()
	c := &Controller{
		hpas: client, scales: scales, mapper: mapper, lister: inf.Lister(), recorder: recorder, period: period,
		// Upstream's fixed-interval limiter: a retry, like a resync, comes
		// one period later, never sooner.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig[string](fixedInterval(period),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "horizontalpodautoscaler"}),
		now: time.Now,
	}
	c.loop = controllers.Loop{Name: "horizontal-pod-autoscaler", Queue: c.queue, Synced: []cache.InformerSynced{inf.Informer().HasSynced}, Sync: c.sync}
	_, err = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { controllers.Enqueue(c.queue, obj) },
		UpdateFunc: func(old, cur interface{}) {
			o, ok1 := old.(*autoscalingv2.HorizontalPodAutoscaler)
			n, ok2 := cur.(*autoscalingv2.HorizontalPodAutoscaler)
			// A spec change (a new generation) is looked at now; a status
			// write, the controller's own included, waits for the period,
			// else each status write would trigger the next sync.
			if ok1 && ok2 && o.Generation != n.Generation {
				controllers.Enqueue(c.queue, cur)
				return
			}
			if key, err := cache.MetaNamespaceKeyFunc(cur); err == nil {
				c.queue.AddRateLimited(key)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.queue.Forget(key)
			}
		},
	})
	return c, err
}

// Run syncs HPAs until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) { c.loop.Run(ctx, workers) }

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	hpa, err := c.lister.HorizontalPodAutoscalers(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = c.reconcile(ctx, hpa)
	// Every HPA is looked at again one period later, whatever this sync
	// found (a failed sync is retried by the loop, at the same interval).
	if err == nil {
		c.queue.AddRateLimited(key)
	}
	return err
}

// reconcile is upstream's reconcileAutoscaler without the metric-based
// replica computation.
func (c *Controller) reconcile(ctx context.Context, shared *autoscalingv2.HorizontalPodAutoscaler) error {
	hpa := shared.DeepCopy()
	original := hpa.Status.DeepCopy()
	ref := hpa.Spec.ScaleTargetRef
	reference := fmt.Sprintf("%s/%s/%s", ref.Kind, hpa.Namespace, ref.Name)

	sc, gr, err := c.getScale(ctx, hpa)
	if err != nil {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedGetScale", err.Error())
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale", "the HPA controller was unable to get the target's current scale: %v", err)
		c.updateStatusIfNeeded(ctx, original, hpa)
		return fmt.Errorf("failed to query scale subresource for %s: %w", reference, err)
	}
	setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	current := sc.Spec.Replicas
	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	// HPAScaleToZero is on by default in 1.37: a target the HPA itself
	// scaled to zero (ScaledToZero True) is scaled from zero by its
	// object or external metrics; one scaled to zero by someone else is
	// left alone.
	objectOrExternal := hasObjectOrExternalMetrics(hpa)
	scaledToZero := conditionTrue(hpa, autoscalingv2.ScaledToZero)

	var desired int32
	reason := ""
	rescale := true
	needsMetrics := true
	switch {
	case current == 0:
		if !((minReplicas != 0 && scaledToZero) || (scaledToZero && objectOrExternal)) {
			needsMetrics, rescale = false, false
			setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
		}
	case current > hpa.Spec.MaxReplicas:
		reason, desired, needsMetrics = "Current number of replicas above Spec.MaxReplicas", hpa.Spec.MaxReplicas, false
	case current < minReplicas:
		reason, desired, needsMetrics = "Current number of replicas below Spec.MinReplicas", minReplicas, false
	}

	if needsMetrics {
		// No metric can be read (see the package comment): upstream's path
		// when every metric fails.
		statuses, err := c.computeReplicasForMetrics(hpa, sc)
		setStatus(hpa, current, hpa.Status.DesiredReplicas, statuses, false, c.now())
		c.updateStatusIfNeeded(ctx, original, hpa)
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedComputeMetricsReplicas", err.Error())
		return fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %w", reference, err)
	}

	if rescale {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			sc.Spec.Replicas = desired
			_, err := c.scales.Scales(hpa.Namespace).Update(ctx, gr, sc, metav1.UpdateOptions{})
			if err == nil {
				return nil
			}
			if latest, getErr := c.scales.Scales(hpa.Namespace).Get(ctx, gr, ref.Name, metav1.GetOptions{}); getErr == nil {
				sc = latest
			}
			return err
		})
		if err != nil {
			c.recorder.Eventf(hpa, corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", desired, reason, err.Error())
			setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", "the HPA controller was unable to update the target scale: %v", err)
			setStatus(hpa, current, hpa.Status.DesiredReplicas, nil, false, c.now())
			c.updateStatusIfNeeded(ctx, original, hpa)
			return fmt.Errorf("failed to rescale %s: %w", reference, err)
		}
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale", "the HPA controller was able to update the target scale to %d", desired)
		c.recorder.Eventf(hpa, corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", desired, reason)
		logrus.Infof("horizontal-pod-autoscaler: %s/%s rescaled %s from %d to %d: %s", hpa.Namespace, hpa.Name, reference, current, desired, reason)
		if current > 0 && desired == 0 && minReplicas == 0 && objectOrExternal {
			setCondition(hpa, autoscalingv2.ScaledToZero, corev1.ConditionTrue, "ScaledToZero", "the HPA controller scaled the workload to zero")
		} else {
			setCondition(hpa, autoscalingv2.ScaledToZero, corev1.ConditionFalse, "NotScaledToZero", "the HPA controller did not scale the workload to zero")
		}
	} else {
		desired = current
	}
	setStatus(hpa, current, desired, nil, rescale, c.now())
	return c.updateStatusIfNeeded(ctx, original, hpa)
}

// getScale reads the target's /scale through each REST mapping of its
// kind in turn, as upstream's scaleForResourceMappings; a kind discovery
// does not know yet (a CRD just made) is looked up afresh once.
func (c *Controller) getScale(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv1.Scale, schema.GroupResource, error) {
	ref := hpa.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, schema.GroupResource{}, err
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	mappings, err := c.mapper.RESTMappings(gk)
	if apimeta.IsNoMatchError(err) {
		c.mapper.Reset()
		mappings, err = c.mapper.RESTMappings(gk)
	}
	if err != nil {
		return nil, schema.GroupResource{}, err
	}
	var firstErr error
	for i, m := range mappings {
		gr := m.Resource.GroupResource()
		sc, err := c.scales.Scales(hpa.Namespace).Get(ctx, gr, ref.Name, metav1.GetOptions{})
		if err == nil {
			return sc, gr, nil
		}
		if i == 0 {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("unrecognized resource")
	}
	return nil, schema.GroupResource{}, firstErr
}

// computeReplicasForMetrics is upstream's with every metric unreadable:
// the target's selector is checked first (its own conditions), then each
// metric fails with its type's reason and an event; the first failure's
// condition is set. The statuses are upstream's too: one empty status per
// metric, since none was read.
func (c *Controller) computeReplicasForMetrics(hpa *autoscalingv2.HorizontalPodAutoscaler, sc *autoscalingv1.Scale) ([]autoscalingv2.MetricStatus, error) {
	if sc.Status.Selector == "" {
		const msg = "selector is required"
		c.recorder.Event(hpa, corev1.EventTypeWarning, "SelectorRequired", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector")
		return nil, errors.New(msg)
	}
	if _, err := labels.Parse(sc.Status.Selector); err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		c.recorder.Event(hpa, corev1.EventTypeWarning, "InvalidSelector", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "%s", msg)
		return nil, errors.New(msg)
	}
	statuses := make([]autoscalingv2.MetricStatus, len(hpa.Spec.Metrics))
	var first error
	var firstCondition autoscalingv2.HorizontalPodAutoscalerCondition
	for _, spec := range hpa.Spec.Metrics {
		reason, inner, outer := metricFailure(hpa.Namespace, spec)
		// upstream's getUnableComputeReplicaCountCondition: an event per
		// failed metric, the condition of the first.
		c.recorder.Event(hpa, corev1.EventTypeWarning, reason, inner.Error())
		if first == nil {
			first = outer
			firstCondition = autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse,
				Reason: reason, Message: fmt.Sprintf("the HPA was unable to compute the replica count: %v", inner)}
		}
	}
	if first == nil {
		// No metrics at all: defaulting gives every HPA one, so only a
		// stored object from elsewhere lacks them.
		first = errors.New("no metrics are specified")
		firstCondition = autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse,
			Reason: "InvalidMetricSourceType", Message: "the HPA was unable to compute the replica count: no metrics are specified"}
	}
	setCondition(hpa, firstCondition.Type, firstCondition.Status, firstCondition.Reason, "%s", firstCondition.Message)
	n := len(hpa.Spec.Metrics)
	return statuses, fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %w", n, n, first)
}

// metricFailure is how upstream's computeReplicasForMetric fails for one
// metric when its metrics API answers nothing: the condition and event
// reason, the error the condition and event carry, and the error returned.
func metricFailure(namespace string, spec autoscalingv2.MetricSpec) (reason string, inner, outer error) {
	switch {
	case spec.Type == autoscalingv2.ResourceMetricSourceType && spec.Resource != nil:
		inner = resourceFailure(spec.Resource.Name, spec.Resource.Target)
		return "FailedGetResourceMetric", inner, fmt.Errorf("failed to get %s resource metric value: %w", spec.Resource.Name, inner)
	case spec.Type == autoscalingv2.ContainerResourceMetricSourceType && spec.ContainerResource != nil:
		inner = resourceFailure(spec.ContainerResource.Name, spec.ContainerResource.Target)
		return "FailedGetContainerResourceMetric", inner, fmt.Errorf("failed to get %s container metric value: %w", spec.ContainerResource.Container, inner)
	case spec.Type == autoscalingv2.PodsMetricSourceType && spec.Pods != nil:
		if _, err := metav1.LabelSelectorAsSelector(spec.Pods.Metric.Selector); err != nil {
			return "FailedGetPodsMetric", err, fmt.Errorf("failed to get pods metric value: %w", err)
		}
		inner = fmt.Errorf("unable to get metric %s: %w", spec.Pods.Metric.Name, errNoCustomMetrics)
		return "FailedGetPodsMetric", inner, fmt.Errorf("failed to get pods metric value: %w", inner)
	case spec.Type == autoscalingv2.ObjectMetricSourceType && spec.Object != nil:
		if _, err := metav1.LabelSelectorAsSelector(spec.Object.Metric.Selector); err != nil {
			return "FailedGetObjectMetric", err, fmt.Errorf("failed to get object metric value: %w", err)
		}
		o := spec.Object.DescribedObject
		inner = fmt.Errorf("unable to get metric %s on %s %s/%s: %w", spec.Object.Metric.Name, o.Kind, namespace, o.Name, errNoCustomMetrics)
		return "FailedGetObjectMetric", inner, fmt.Errorf("failed to get object metric value: %w", inner)
	case spec.Type == autoscalingv2.ExternalMetricSourceType && spec.External != nil:
		inner = fmt.Errorf("unable to get external metric %s/%s/%+v: %w", namespace, spec.External.Metric.Name, spec.External.Metric.Selector, errNoExternalMetrics)
		return "FailedGetExternalMetric", inner, fmt.Errorf("failed to get %s external metric: %w", spec.External.Metric.Name, inner)
	}
	inner = fmt.Errorf("unknown metric source type %q", string(spec.Type))
	return "InvalidMetricSourceType", inner, inner
}

func resourceFailure(name corev1.ResourceName, target autoscalingv2.MetricTarget) error {
	err := fmt.Errorf("unable to get metrics for resource %s: %w", name, errNoResourceMetrics)
	if target.AverageValue != nil {
		return fmt.Errorf("failed to get %s usage: %w", name, err)
	}
	if target.AverageUtilization == nil {
		return errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
	}
	return fmt.Errorf("failed to get %s utilization: %w", name, err)
}

// setStatus is upstream's: replicas, metrics and the generation observed;
// lastScaleTime moves only when the target was rescaled.
func setStatus(hpa *autoscalingv2.HorizontalPodAutoscaler, current, desired int32, metrics []autoscalingv2.MetricStatus, rescaled bool, now time.Time) {
	gen := hpa.Generation
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: &gen,
		CurrentReplicas:    current,
		DesiredReplicas:    desired,
		LastScaleTime:      hpa.Status.LastScaleTime,
		CurrentMetrics:     metrics,
		Conditions:         hpa.Status.Conditions,
	}
	if rescaled {
		t := metav1.NewTime(now)
		hpa.Status.LastScaleTime = &t
	}
}

// updateStatusIfNeeded writes the status when it changed. A failed write is
// an event and an error, as upstream, and the next sync tries again.
func (c *Controller) updateStatusIfNeeded(ctx context.Context, original *autoscalingv2.HorizontalPodAutoscalerStatus, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if apiequality.Semantic.DeepEqual(original, &hpa.Status) {
		return nil
	}
	if _, err := c.hpas.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa, metav1.UpdateOptions{}); err != nil {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %w", hpa.Name, err)
	}
	return nil
}

// setCondition is upstream's: the condition of the type is added or
// updated, its transition time moving only when its status changes.
func setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType, status corev1.ConditionStatus, reason, message string, args ...interface{}) {
	var cond *autoscalingv2.HorizontalPodAutoscalerCondition
	for i := range hpa.Status.Conditions {
		if hpa.Status.Conditions[i].Type == typ {
			cond = &hpa.Status.Conditions[i]
			break
		}
	}
	if cond == nil {
		hpa.Status.Conditions = append(hpa.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{Type: typ})
		cond = &hpa.Status.Conditions[len(hpa.Status.Conditions)-1]
	}
	if cond.Status != status {
		cond.LastTransitionTime = metav1.Now()
	}
	cond.Status = status
	cond.Reason = reason
	cond.Message = fmt.Sprintf(message, args...)
}

func conditionTrue(hpa *autoscalingv2.HorizontalPodAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType) bool {
	for _, c := range hpa.Status.Conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasObjectOrExternalMetrics(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	for _, m := range hpa.Spec.Metrics {
		if m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType {
			return true
		}
	}
	return false
}

// fixedInterval is upstream's FixedItemIntervalRateLimiter: every requeue
// waits the same interval.
type fixedInterval time.Duration

func (f fixedInterval) When(string) time.Duration { return time.Duration(f) }
func (fixedInterval) NumRequeues(string) int      { return 1 }
func (fixedInterval) Forget(string)               {}
