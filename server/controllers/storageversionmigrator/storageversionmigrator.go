// Package storageversionmigrator is upstream's storage version migrator
// (kube-controller-manager's storage-version-migrator-controller: the
// migration runner, resource version and migration controllers of
// pkg/controller/storageversionmigrator, as one loop). A
// StorageVersionMigration names a resource; the migrator rewrites every
// stored object of it with a no-op update, so each is stored again in the
// current storage version and encryption key:
//
//  1. the oldest migration of a resource that is neither running nor
//     finished becomes Running (one at a time per resource); a CRD's
//     StorageMigrating condition turns True;
//  2. status.resourceVersion records the resource's list revision, the
//     checkpoint: objects written after it are already current;
//  3. every object at or below the checkpoint gets a merge patch of its
//     apiVersion, kind and resourceVersion (a conflict or a deletion means
//     someone else rewrote it); then Succeeded, or Failed on an error that
//     is not transient, and Running goes False ("MigrationCompleted"). A
//     CRD whose generation did not change meanwhile is left with its
//     storage version alone in status.storedVersions.
//
// Upstream reads the objects from the garbage collector's caches; kelp's
// collector keeps no such cache, so the migrator lists them (metadata only,
// in pages) from the API. It runs one worker: promotion compares the
// migrations of a resource, which two workers could do at once.
package storageversionmigrator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsapply "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	svmlisters "k8s.io/client-go/listers/storagemigration/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/kelp-project/kelp/server/controllers"
)

// Name is upstream's controller name, also the field manager of its
// patches and the role it runs under (system:controller:<Name>).
const Name = "storage-version-migrator-controller"

// Upstream's reasons and messages.
const (
	runningReason   = "MigrationRunning"
	succeededReason = "StorageVersionMigrationSucceeded"
	failedReason    = "StorageVersionMigrationFailed"
	// discoveryGrace is how long a migration waits for its resource to
	// appear in discovery (a CRD just created) before it fails.
	discoveryGrace = time.Minute
	listPage       = 500
)

// verbsRequired are what a resource must serve to be migrated.
var verbsRequired = []string{"update", "patch", "list"}

// Controller runs StorageVersionMigrations.
type Controller struct {
	client    kubernetes.Interface
	crds      apiextensionsclient.Interface
	metadata  metadata.Interface
	dynamic   dynamic.Interface
	discovery discovery.CachedDiscoveryInterface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	factory   informers.SharedInformerFactory
	lister    svmlisters.StorageVersionMigrationLister
	synced    cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	now       func() time.Time
}

// NewForConfig builds the clients the migrator needs from cfg and wires it
// to the factory's StorageVersionMigration informer.
func NewForConfig(cfg *rest.Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	crds, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return New(client, crds, md, dyn, memory.NewMemCacheClient(dc), factory), nil
}

// New wires the controller to its clients and the factory's informer.
func New(client kubernetes.Interface, crds apiextensionsclient.Interface, md metadata.Interface, dyn dynamic.Interface,
	disco discovery.CachedDiscoveryInterface, factory informers.SharedInformerFactory) *Controller {
	inf := factory.Storagemigration().V1().StorageVersionMigrations()
	c := &Controller{client: client, crds: crds, metadata: md, dynamic: dyn, discovery: disco,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(disco), factory: factory,
		lister: inf.Lister(), synced: inf.Informer().HasSynced, queue: controllers.NewQueue(Name), now: time.Now}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { controllers.Enqueue(c.queue, obj) },
		UpdateFunc: func(_, cur interface{}) { controllers.Enqueue(c.queue, cur) },
		// A migration that goes lets the next one of its resource run.
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if svm, ok := obj.(*svmv1.StorageVersionMigration); ok {
				c.enqueueResource(svm.Spec.Resource)
			}
		},
	})
	return c
}

// Run starts the informer and runs the worker until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	c.factory.Start(ctx.Done())
	loop := controllers.Loop{Name: Name, Queue: c.queue, Synced: []cache.InformerSynced{c.synced}, Sync: c.sync}
	loop.Run(ctx, 1)
}

func (c *Controller) enqueueResource(gr metav1.GroupResource) {
	svms, _ := c.lister.List(labels.Everything())
	for _, s := range svms {
		if s.Spec.Resource == gr {
			c.queue.Add(s.Name)
		}
	}
}

func isTrue(svm *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType) bool {
	return meta.IsStatusConditionTrue(svm.Status.Conditions, string(t))
}

func running(svm *svmv1.StorageVersionMigration) bool {
	return isTrue(svm, svmv1.MigrationRunning)
}

func terminal(svm *svmv1.StorageVersionMigration) bool {
	return isTrue(svm, svmv1.MigrationSucceeded) || isTrue(svm, svmv1.MigrationFailed)
}

// delayed asks the loop to look again after a while, not as a failure.
type delayed struct {
	reason string
	after  time.Duration
}

func (d *delayed) Error() string               { return d.reason }
func (d *delayed) RequeueDelay() time.Duration { return d.after }

func (c *Controller) sync(ctx context.Context, name string) error {
	cached, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	svm := cached.DeepCopy()
	switch {
	case terminal(svm):
		if running(svm) {
			return c.complete(ctx, svm)
		}
		return nil
	case !running(svm):
		return c.promote(ctx, svm)
	case svm.Status.ResourceVersion == "":
		return c.checkpoint(ctx, svm)
	default:
		return c.migrate(ctx, svm)
	}
}

// promote makes svm Running unless another migration of its resource runs
// or an older one waits (upstream's migration runner).
func (c *Controller) promote(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, o := range all {
		if o.Name == svm.Name || o.Spec.Resource != svm.Spec.Resource {
			continue
		}
		if running(o) && !terminal(o) {
			return nil // its completion enqueues this one
		}
		if !running(o) && !terminal(o) && older(o, svm) {
			return nil // that one goes first
		}
	}
	if crd, ok, err := c.crdFor(ctx, svm.Spec.Resource); err != nil {
		return err
	} else if ok {
		if err := c.setCRDMigrating(ctx, crd.Name, apiextensionsv1.ConditionTrue, runningReason, fmt.Sprintf("Migration %s is running", svm.Name), nil); err != nil {
			return err
		}
	}
	setCondition(svm, svmv1.MigrationRunning, metav1.ConditionTrue, runningReason, runningMessage(nil, nil, nil))
	return c.updateStatus(ctx, svm)
}

func older(a, b *svmv1.StorageVersionMigration) bool {
	if i := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); i != 0 {
		return i < 0
	}
	return a.Name < b.Name
}

// complete turns Running False on a finished migration, finishes its CRD's
// migration, and lets the next migration of the resource start.
func (c *Controller) complete(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	if crd, ok, err := c.crdFor(ctx, svm.Spec.Resource); err != nil {
		return err
	} else if ok {
		if err := c.finishCRD(ctx, crd.Name, isTrue(svm, svmv1.MigrationSucceeded)); err != nil {
			return err
		}
	}
	meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{
		Type: string(svmv1.MigrationRunning), Status: metav1.ConditionFalse,
		Reason: "MigrationCompleted", Message: "Migration completed", ObservedGeneration: svm.Generation,
	})
	if err := c.updateStatus(ctx, svm); err != nil {
		return err
	}
	c.enqueueResource(svm.Spec.Resource)
	return nil
}

// checkpoint records the resource's current list revision (upstream's
// resource version controller).
func (c *Controller) checkpoint(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	gvr, res, err := c.resolve(ctx, svm)
	if err != nil || res == nil {
		return err
	}
	if !sets.New(res.Verbs...).HasAll(verbsRequired...) {
		return c.fail(ctx, svm, fmt.Sprintf("resource %q does not support discovery operations: %v", gvr.String(), verbsRequired))
	}
	list, err := c.metadata.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return fmt.Errorf("error getting latest resourceVersion for %s: %w", gvr.String(), err)
	}
	rv := list.GetResourceVersion()
	if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
		return c.fail(ctx, svm, fmt.Sprintf("latest resourceVersion for %s is not valid: %v", gvr.String(), err))
	}
	svm.Status.ResourceVersion = rv
	return c.updateStatus(ctx, svm)
}

// resolve maps the migration's resource through discovery. A resource
// discovery does not (yet) show is retried for a minute after the
// migration's creation, then the migration fails; res is nil then.
func (c *Controller) resolve(ctx context.Context, svm *svmv1.StorageVersionMigration) (schema.GroupVersionResource, *metav1.APIResource, error) {
	gr := svm.Spec.Resource
	gvrs, err := c.mapper.ResourcesFor(schema.GroupVersionResource{Group: gr.Group, Resource: gr.Resource})
	if err != nil && !meta.IsNoMatchError(err) {
		return schema.GroupVersionResource{}, nil, err
	}
	for _, gvr := range gvrs {
		if gvr.Group != gr.Group || gvr.Resource != gr.Resource {
			continue
		}
		list, err := c.discovery.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
		if err != nil {
			return gvr, nil, err
		}
		for i := range list.APIResources {
			if list.APIResources[i].Name == gvr.Resource {
				return gvr, &list.APIResources[i], nil
			}
		}
	}
	if c.now().Before(svm.CreationTimestamp.Add(discoveryGrace)) {
		c.mapper.Reset() // discovery may predate the resource
		return schema.GroupVersionResource{}, nil, &delayed{reason: "resource " + gr.String() + " not in discovery yet", after: 5 * time.Second}
	}
	return schema.GroupVersionResource{}, nil, c.fail(ctx, svm, "resource does not exist in discovery")
}

// migrate rewrites every object of the resource stored at or below the
// checkpoint with a no-op patch, then marks the migration Succeeded.
func (c *Controller) migrate(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	gvr, res, err := c.resolve(ctx, svm)
	if err != nil || res == nil {
		return err
	}
	checkpoint := svm.Status.ResourceVersion
	apiVersion, kind := gvr.GroupVersion().WithKind(res.Kind).ToAPIVersionAndKind()
	var candidates []metav1.PartialObjectMetadata
	total := 0
	opts := metav1.ListOptions{Limit: listPage}
	for {
		page, err := c.metadata.Resource(gvr).List(ctx, opts)
		if err != nil {
			return err
		}
		total += len(page.Items)
		for _, o := range page.Items {
			cmp, err := resourceversion.CompareResourceVersion(o.ResourceVersion, checkpoint)
			if err != nil {
				return c.fail(ctx, svm, "migration encountered unhandled error: "+err.Error())
			}
			if cmp <= 0 { // written later: already in the current storage version
				candidates = append(candidates, o)
			}
		}
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	left := len(candidates)
	for _, o := range candidates {
		patch, _ := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"resourceVersion": o.ResourceVersion}})
		_, err := c.dynamic.Resource(gvr).Namespace(o.Namespace).Patch(ctx, o.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: Name})
		switch {
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			// Written or deleted since it was listed: nothing left to migrate.
		case transient(err):
			setCondition(svm, svmv1.MigrationRunning, metav1.ConditionTrue, runningReason, runningMessage(&left, &total, err))
			_ = c.updateStatus(ctx, svm)
			return err
		case err != nil:
			logrus.WithError(err).Warnf("%s: migrating %s %s/%s", Name, gvr, o.Namespace, o.Name)
			setCondition(svm, svmv1.MigrationRunning, metav1.ConditionTrue, runningReason, runningMessage(&left, &total, nil))
			return c.fail(ctx, svm, fmt.Sprintf("%d/%d not yet migrated. migration encountered unhandled error: %s", left, total, err))
		}
		left--
	}
	setCondition(svm, svmv1.MigrationRunning, metav1.ConditionTrue, runningReason, runningMessage(&left, &total, nil))
	setCondition(svm, svmv1.MigrationSucceeded, metav1.ConditionTrue, succeededReason, "Migration completed")
	return c.updateStatus(ctx, svm)
}

// transient errors leave the migration Running and are retried.
func transient(err error) bool {
	return err != nil && (utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) || utilnet.IsProbableEOF(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTimeout(err))
}

// fail sets Failed with upstream's message for the stage that failed.
func (c *Controller) fail(ctx context.Context, svm *svmv1.StorageVersionMigration, msg string) error {
	setCondition(svm, svmv1.MigrationFailed, metav1.ConditionTrue, failedReason, msg)
	return c.updateStatus(ctx, svm)
}

func setCondition(svm *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{Type: string(t), Status: status, Reason: reason, Message: msg})
}

// runningMessage is upstream's message of the Running condition.
func runningMessage(left, total *int, transientErr error) string {
	msg := "The migration is running"
	if left != nil && total != nil && *total > 0 {
		if *left > 0 {
			msg += fmt.Sprintf(", %d/%d objects not yet migrated", *left, *total)
		} else {
			msg += fmt.Sprintf(", %d objects verified migrated", *total)
		}
	}
	if transientErr != nil {
		msg += "; transient error: " + transientErr.Error()
	}
	return msg
}

func (c *Controller) updateStatus(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	_, err := c.client.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{})
	return err
}

// crdFor is the CRD serving gr, named <resource>.<group>, if any.
func (c *Controller) crdFor(ctx context.Context, gr metav1.GroupResource) (*apiextensionsv1.CustomResourceDefinition, bool, error) {
	if gr.Group == "" {
		return nil, false, nil
	}
	crd, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, gr.Resource+"."+gr.Group, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	return crd, err == nil, err
}

// setCRDMigrating applies the CRD's StorageMigrating condition (observed
// at its current generation) and, if storedVersions is given, its stored
// versions, by server-side apply as upstream.
func (c *Controller) setCRDMigrating(ctx context.Context, name string, status apiextensionsv1.ConditionStatus, reason, msg string,
	storedVersions func(*apiextensionsv1.CustomResourceDefinition) []string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := apiextensionsapply.CustomResourceDefinitionStatus().WithConditions(
			apiextensionsapply.CustomResourceDefinitionCondition().WithType(apiextensionsv1.StorageMigrating).
				WithStatus(status).WithLastTransitionTime(metav1.NewTime(c.now())).WithReason(reason).WithMessage(msg).
				WithObservedGeneration(crd.Generation))
		if storedVersions != nil {
			if v := storedVersions(crd); len(v) > 0 {
				st.WithStoredVersions(v...)
			}
		}
		cfg := apiextensionsapply.CustomResourceDefinition(name).WithResourceVersion(crd.ResourceVersion).WithStatus(st)
		_, err = c.crds.ApiextensionsV1().CustomResourceDefinitions().ApplyStatus(ctx, cfg, metav1.ApplyOptions{FieldManager: "migration-runner-controller", Force: true})
		return err
	})
}

// finishCRD turns the CRD's StorageMigrating condition False; after a
// success, and if the CRD has not changed since the migration began
// (the condition's observedGeneration), its storedVersions become the
// storage version alone.
func (c *Controller) finishCRD(ctx context.Context, name string, success bool) error {
	reason, msg := "MigrationFailed", "The migration has failed"
	var stored func(*apiextensionsv1.CustomResourceDefinition) []string
	if success {
		reason, msg = "MigrationSucceeded", "The migration has succeeded"
		stored = func(crd *apiextensionsv1.CustomResourceDefinition) []string {
			cond := crdCondition(crd, apiextensionsv1.StorageMigrating)
			if cond == nil || cond.ObservedGeneration != crd.Generation {
				return nil
			}
			i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Storage })
			if i < 0 {
				return nil
			}
			return []string{crd.Spec.Versions[i].Name}
		}
		crd, err := c.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if stored(crd) != nil {
			msg += " and the stored versions have been updated"
		} else {
			msg += " but the stored versions have not been updated due to a generation mismatch"
		}
	}
	return c.setCRDMigrating(ctx, name, apiextensionsv1.ConditionFalse, reason, msg, stored)
}

func crdCondition(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == t {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}
