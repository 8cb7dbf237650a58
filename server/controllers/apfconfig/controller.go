package apfconfig

import (
	"context"
	"fmt"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	flowcontrolapply "k8s.io/client-go/applyconfigurations/flowcontrol/v1"
	flowcontrolinformers "k8s.io/client-go/informers/flowcontrol/v1"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
)

// consumerFieldManager is upstream's field manager for the Dangling
// condition (k8s.io/apiserver's ConfigConsumerAsFieldManager).
const consumerFieldManager = "api-priority-and-fairness-config-consumer-v1"

// ensureKey is the one key of the ensure loop: the whole configuration.
const ensureKey = "configuration"

// Controller keeps the configuration after start: each FlowSchema's
// Dangling condition, and upstream's configuration objects whenever one of
// them changes or goes (upstream looks every minute; here the informers'
// events say when).
type Controller struct {
	client        flowcontrolclient.FlowcontrolV1Interface
	flowSchemas   flowcontrolinformers.FlowSchemaInformer
	priorityLevel flowcontrolinformers.PriorityLevelConfigurationInformer
	dangling      workqueue.TypedRateLimitingInterface[string]
	config        workqueue.TypedRateLimitingInterface[string]
	now           func() time.Time
}

// bootstrapNames are the objects the ensure loop keeps.
var bootstrapNames = func() map[string]bool {
	m := map[string]bool{}
	for _, fs := range append(bootstrap.MandatoryFlowSchemas, bootstrap.SuggestedFlowSchemas...) {
		m["FlowSchema/"+fs.Name] = true
	}
	for _, pl := range append(bootstrap.MandatoryPriorityLevelConfigurations, bootstrap.SuggestedPriorityLevelConfigurations...) {
		m["PriorityLevelConfiguration/"+pl.Name] = true
	}
	return m
}()

func New(client flowcontrolclient.FlowcontrolV1Interface, fs flowcontrolinformers.FlowSchemaInformer, pl flowcontrolinformers.PriorityLevelConfigurationInformer) *Controller {
	c := &Controller{client: client, flowSchemas: fs, priorityLevel: pl,
		dangling: controllers.NewQueue("apf_dangling"), config: controllers.NewQueue("apf_configuration"), now: time.Now}
	// The configuration is looked at again when an object it keeps
	// changes or goes, or an object claims to be kept (the annotation
	// says auto-update) and may be one upstream no longer has.
	concerns := func(kind string, obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		if _, annotated := m.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]; annotated || bootstrapNames[kind+"/"+m.GetName()] {
			c.config.Add(ensureKey)
		}
	}
	_, _ = fs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { concerns("FlowSchema", obj); controllers.Enqueue(c.dangling, obj) },
		UpdateFunc: func(_, obj interface{}) {
			concerns("FlowSchema", obj)
			controllers.Enqueue(c.dangling, obj)
		},
		DeleteFunc: func(obj interface{}) { concerns("FlowSchema", obj) },
	})
	// A level that comes or goes changes the condition of the schemas
	// naming it.
	plChanged := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		concerns("PriorityLevelConfiguration", obj)
		if m, ok := obj.(metav1.Object); ok {
			c.enqueueSchemasOf(m.GetName())
		}
	}
	_, _ = pl.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    plChanged,
		UpdateFunc: func(_, obj interface{}) { concerns("PriorityLevelConfiguration", obj) },
		DeleteFunc: plChanged,
	})
	return c
}

func (c *Controller) enqueueSchemasOf(level string) {
	schemas, err := c.flowSchemas.Lister().List(labels.Everything())
	if err != nil {
		return
	}
	for _, fs := range schemas {
		if fs.Spec.PriorityLevelConfiguration.Name == level {
			c.dangling.Add(fs.Name)
		}
	}
}

// Run runs both loops until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	synced := []cache.InformerSynced{c.flowSchemas.Informer().HasSynced, c.priorityLevel.Informer().HasSynced}
	go (&controllers.Loop{Name: "apf_configuration", Queue: c.config, Synced: synced, Sync: c.syncConfiguration}).Run(ctx, 1)
	(&controllers.Loop{Name: "apf_dangling", Queue: c.dangling, Synced: synced, Sync: c.syncDangling}).Run(ctx, 1)
}

func (c *Controller) syncConfiguration(ctx context.Context, _ string) error {
	fsLister, plLister := c.flowSchemas.Lister(), c.priorityLevel.Lister()
	fs := flowSchemaKind(c.client.FlowSchemas(), fsLister.Get, func() ([]*flowcontrolv1.FlowSchema, error) { return fsLister.List(labels.Everything()) })
	pl := priorityLevelKind(c.client.PriorityLevelConfigurations(), plLister.Get, func() ([]*flowcontrolv1.PriorityLevelConfiguration, error) {
		return plLister.List(labels.Everything())
	})
	return ensure(ctx, fs, pl)
}

// syncDangling sets the schema's Dangling condition: True (NotFound) when
// the priority level it names does not exist, False (Found) when it does,
// with upstream's reasons and messages, by a forced server-side apply of
// the status as upstream's config consumer.
func (c *Controller) syncDangling(ctx context.Context, name string) error {
	fs, err := c.flowSchemas.Lister().Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	want := danglingCondition(fs, c.levelExists(fs.Spec.PriorityLevelConfiguration.Name))
	for _, have := range fs.Status.Conditions {
		if have.Type == want.Type && have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message {
			return nil
		}
	}
	apply := flowcontrolapply.FlowSchema(fs.Name).WithStatus(flowcontrolapply.FlowSchemaStatus().WithConditions(
		flowcontrolapply.FlowSchemaCondition().WithType(want.Type).WithStatus(want.Status).WithReason(want.Reason).
			WithMessage(want.Message).WithLastTransitionTime(metav1.NewTime(c.now()))))
	_, err = c.client.FlowSchemas().ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: consumerFieldManager, Force: true})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	return err
}

func (c *Controller) levelExists(name string) bool {
	_, err := c.priorityLevel.Lister().Get(name)
	return err == nil
}

func danglingCondition(fs *flowcontrolv1.FlowSchema, found bool) flowcontrolv1.FlowSchemaCondition {
	level := fs.Spec.PriorityLevelConfiguration.Name
	if found {
		return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionFalse, Reason: "Found",
			Message: fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q and it exists", level)}
	}
	return flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionTrue, Reason: "NotFound",
		Message: fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q but there is no such object", level)}
}
