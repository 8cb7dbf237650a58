package apiserver

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kelp-project/kelp/server/apiserver/registry"
	"github.com/kelp-project/kelp/server/apiserver/storage"
)

var crdGVR = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// crdServing keeps the served table in step with the CRDs: it follows the
// CRD watch cache, serves a CRD's versions once its names are accepted
// (the naming controller decides that, server/controllers/crd), then marks
// it Established, as upstream's CRD handler queues a served CRD to its
// establishing controller. It is the one writer of custom entries in the
// table; built-in entries are never replaced.
type crdServing struct {
	s   *Server
	ctx context.Context
	// served is what each CRD (by name) serves now; only run's goroutine
	// touches it.
	served map[string]*crdServed
	// converters builds conversion webhooks' converters, the first time a
	// CRD asks for one (crdconversion.go).
	converters webhookConverterFactory
}

type crdServed struct {
	uid         types.UID
	fingerprint string // what the served resources were built from
	gvrs        []schema.GroupVersionResource
	store       *storage.Store
	storeKey    string
}

func (s *Server) startCRDServing(ctx context.Context) {
	s.crds = &crdServing{s: s, ctx: ctx, served: map[string]*crdServed{}, converters: newWebhookConverterFactory(s)}
	s.crdOpenAPI = newCRDOpenAPI()
	go s.crds.run(ctx)
}

// run lists and then watches the CRDs, resyncing everything whenever the
// watch ends (a relist cannot miss a deletion: what is served but no
// longer listed goes).
func (c *crdServing) run(ctx context.Context) {
	crds := c.s.live().resources[crdGVR].store
	for ctx.Err() == nil {
		res, err := crds.List(ctx, storage.ListOptions{ResourceVersion: "0"})
		if err != nil {
			logrus.WithError(err).Warn("CRDs: list failed")
			c.pause(ctx)
			continue
		}
		listed := map[string]bool{}
		for _, item := range res.Items {
			crd := item.(*apiextensionsv1.CustomResourceDefinition)
			listed[crd.Name] = true
			c.sync(crd)
		}
		for name := range c.served {
			if !listed[name] {
				c.remove(name)
			}
		}
		w, err := crds.Watch(ctx, storage.ListOptions{ResourceVersion: strconv.FormatInt(res.ResourceVersion, 10)})
		if err != nil {
			c.pause(ctx)
			continue
		}
		for ev := range w.ResultChan() {
			crd, ok := ev.Object.(*apiextensionsv1.CustomResourceDefinition)
			if !ok {
				break // an error event: relist
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				c.sync(crd)
			case watch.Deleted:
				c.remove(crd.Name)
			}
		}
		w.Stop()
	}
}

func (c *crdServing) pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(100 * time.Millisecond):
	}
}

// sync serves what crd asks for now.
func (c *crdServing) sync(crd *apiextensionsv1.CustomResourceDefinition) {
	if !apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) {
		c.remove(crd.Name)
		return
	}
	terminating := apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating)
	fingerprint := fmt.Sprintf("%s/%d/%v/%v", crd.UID, crd.Generation, crd.Status.AcceptedNames, terminating)
	old := c.served[crd.Name]
	if old == nil || old.fingerprint != fingerprint {
		if err := c.serve(crd, old, fingerprint); err != nil {
			logrus.WithError(err).Errorf("CRD %s: not served", crd.Name)
			return
		}
	}
	if !apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) && !terminating {
		c.establish(crd.Name, crd.UID)
	}
}

// serve builds the CRD's resources and publishes them in one table change,
// replacing what the CRD served before.
func (c *crdServing) serve(crd *apiextensionsv1.CustomResourceDefinition, old *crdServed, fingerprint string) error {
	resources, err := registry.CustomResources(crd)
	if err != nil {
		return err
	}
	if len(resources) == 0 {
		c.remove(crd.Name)
		return nil
	}
	storageVersion := resources[0].Custom.StorageVersion
	gr := resources[0].GroupResource()
	storageGVK := schema.GroupVersionKind{Group: crd.Spec.Group, Version: storageVersion, Kind: crd.Status.AcceptedNames.Kind}
	// A new generation gets a new store: its watch cache holds objects
	// decoded with the schema's current defaults (watches end and clients
	// watch again, as upstream replaces a changed CRD's storage).
	storeKey := fmt.Sprintf("%s/%d/%s/%s/%s", crd.UID, crd.Generation, gr, storageGVK, crd.Spec.Scope)
	next := &crdServed{uid: crd.UID, fingerprint: fingerprint, storeKey: storeKey}
	// A webhook's converter is built per CRD generation, as its store is
	// (the client config is in the spec).
	var conv *crdConverter
	if usesConversionWebhook(crd) {
		if conv, err = c.converters.converter(crd); err != nil {
			return err
		}
	}
	if old != nil && old.storeKey == storeKey {
		next.store = old.store
	} else {
		var tr storage.Transformer
		if c.s.cfg.Transformers != nil {
			tr = c.s.cfg.Transformers(gr)
		}
		attrs := resources[0]
		decoded, err := registry.CustomStorageDefaulter(crd, resources)
		if err != nil {
			return err
		}
		if conv != nil {
			decoded = storedDefaulter(storageGVK, decoded)
		}
		next.store, err = storage.New(c.ctx, storage.Config{
			Client: c.s.cfg.Etcd, Resource: gr, Prefix: attrs.Prefix(), Kind: storageGVK,
			NewFunc: func() runtime.Object {
				u := &unstructured.Unstructured{Object: map[string]interface{}{}}
				u.SetGroupVersionKind(storageGVK)
				return u
			},
			Attrs: attrs.Attrs, Transformer: tr, JSON: true, Decoded: decoded, MixedVersions: conv != nil, Feed: c.s.feed,
		})
		if err != nil {
			return err
		}
	}
	var oldGVRs []schema.GroupVersionResource
	if old != nil {
		oldGVRs = old.gvrs
	}
	err = c.s.changeTable(func(t *servedTable) error {
		for _, gvr := range oldGVRs {
			t.unserve(gvr)
		}
		if old != nil && old.store != next.store {
			delete(t.stores, old.store.GroupResource())
		}
		for _, r := range resources {
			if cur, ok := t.resources[r.GVR]; ok {
				// Built-ins win; another CRD cannot hold the same
				// group and plural (the CRD's name is plural.group).
				logrus.Warnf("CRD %s: %s", crd.Name, errBuiltin(cur.GVR))
				continue
			}
			var st objectStore = next.store
			switch {
			case conv != nil:
				st = newWebhookVersionStore(next.store, conv, r.GVK(), storageGVK, r.Default)
			case r.GVR.Version != storageVersion:
				st = versionStore(next.store, r.GVK(), storageGVK, r.Default)
			}
			t.serve(&served{Resource: r, store: st})
			next.gvrs = append(next.gvrs, r.GVR)
		}
		t.stores[gr] = next.store
		sortCustomVersions(t)
		return nil
	})
	if err != nil {
		return err
	}
	if old != nil && old.store != next.store {
		old.store.Stop()
	}
	c.served[crd.Name] = next
	c.s.crdOpenAPI.crdChanged(crd.Name, crd, resources[0].Custom.Encoded)
	return nil
}

// remove stops serving a CRD's resources; its objects stay in etcd (the
// cleanup finalizer deletes them before a CRD goes).
func (c *crdServing) remove(name string) {
	old := c.served[name]
	if old == nil {
		return
	}
	delete(c.served, name)
	_ = c.s.changeTable(func(t *servedTable) error {
		for _, gvr := range old.gvrs {
			t.unserve(gvr)
		}
		delete(t.stores, old.store.GroupResource())
		return nil
	})
	old.store.Stop()
	c.s.crdOpenAPI.crdChanged(name, nil, nil)
}

// establish sets the Established condition through the CRD's storage,
// now that its resources are in the table (what upstream's establishing
// controller does for a single server, without its delay).
func (c *crdServing) establish(name string, uid types.UID) {
	crds := c.s.live().resources[crdGVR]
	_, _, err := crds.store.Update(c.ctx, crds.store.Key("", name), func(cur runtime.Object) (runtime.Object, error) {
		crd := cur.(*apiextensionsv1.CustomResourceDefinition).DeepCopy()
		if crd.UID != uid {
			return nil, fmt.Errorf("CRD %s was replaced", name)
		}
		if apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			return cur, nil
		}
		registry.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue,
			Reason: "InitialNamesAccepted", Message: "the initial names have been accepted",
		})
		return crd, nil
	}, false)
	if err != nil {
		logrus.WithError(err).Warnf("CRD %s: setting Established", name)
	}
}

// versionStore serves one version of a CRD from its storage version's
// store: with conversion None, versions differ only in apiVersion, and an
// object read through a version is then pruned and defaulted by that
// version's schema (def), as upstream's converting codec does.
func versionStore(st *storage.Store, served, stored schema.GroupVersionKind, def func(runtime.Object)) objectStore {
	set := func(gvk schema.GroupVersionKind, def func(runtime.Object)) func(runtime.Object) runtime.Object {
		return func(obj runtime.Object) runtime.Object {
			// Objects from the watch cache are shared: copy before setting.
			out := obj.DeepCopyObject()
			out.GetObjectKind().SetGroupVersionKind(gvk)
			if def != nil {
				def(out)
			}
			return out
		}
	}
	return convertingStore{Store: st, to: set(stored, nil), from: set(served, def)}
}

// sortCustomVersions orders the custom group-versions after the built-in
// ones, by group, each group's versions in upstream's kube-aware order
// (v2 before v1 before v1beta1), the first of them preferred.
func sortCustomVersions(t *servedTable) {
	custom := func(gv schema.GroupVersion) bool {
		for _, sv := range t.byGroup[gv.String()] {
			if sv.Custom == nil {
				return false
			}
		}
		return true
	}
	var builtin, crds []schema.GroupVersion
	for _, gv := range t.groupVersions {
		if custom(gv) {
			crds = append(crds, gv)
		} else {
			builtin = append(builtin, gv)
		}
	}
	sort.SliceStable(crds, func(i, j int) bool {
		if crds[i].Group != crds[j].Group {
			return crds[i].Group < crds[j].Group
		}
		return version.CompareKubeAwareVersionStrings(crds[i].Version, crds[j].Version) > 0
	})
	t.groupVersions = append(builtin, crds...)
}

// customTypeConverter is the apply schema of the custom kind served now at
// gvk (nil: none, and fields are deduced).
func (s *Server) customTypeConverter(gvk schema.GroupVersionKind) managedfields.TypeConverter {
	for _, sv := range s.live().byGroup[gvk.GroupVersion().String()] {
		if sv.Kind == gvk.Kind && sv.Custom != nil && sv.Custom.TypeConverter != nil {
			return sv.Custom.TypeConverter
		}
	}
	return nil
}
