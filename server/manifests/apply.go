package manifests

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
)

// apply applies one file's content and prunes what it no longer holds,
// then records the outcome. A file that does not parse changes nothing
// but its record's error. It reports whether something failed that may
// pass, so the file is tried again.
func (d *Deployer) apply(ctx context.Context, name, hash string, data []byte, rec *record) (transient bool) {
	var old []ref
	if rec != nil {
		old = rec.Objects
	}
	objs, err := Decode(data)
	if err != nil {
		msg := fmt.Sprintf("%s does not parse: %v", name, err)
		logrus.Errorf("manifests: %s", msg)
		cm := d.writeRecord(ctx, &record{File: name, Objects: old, Error: msg})
		d.event(cm, corev1.EventTypeWarning, "ParseFailed", msg)
		return false
	}
	// Namespaces and CRDs first: the objects that come after may live in
	// them.
	sort.SliceStable(objs, func(i, j int) bool { return applyRank(objs[i]) < applyRank(objs[j]) })
	oldByKey := map[string]ref{}
	for _, r := range old {
		r = d.normalize(r)
		oldByKey[r.key()] = r
	}
	// An object another manifest created and this one now holds (moved
	// from one file to another) is still one kelp created.
	for n, other := range d.records {
		if n == name {
			continue
		}
		for _, r := range other.Objects {
			if r = d.normalize(r); r.Created {
				if _, ok := oldByKey[r.key()]; !ok {
					oldByKey[r.key()] = r
				}
			}
		}
	}
	var applied []ref
	var errs []string
	keep := map[string]bool{}
	// A packaged file's objects are kelp's even when an earlier kelp made
	// them before the file existed (local-path at bootstrap, kube-dns by
	// the controller manager), so disabling it deletes them.
	packaged := IsPackaged(name)
	for _, o := range objs {
		r, err := d.applyObject(ctx, o, oldByKey, packaged)
		if !keep[r.key()] {
			// Recorded even when refused: it is in the file, so it is
			// not to be pruned, and a later success keeps its Created.
			applied = append(applied, r)
			keep[r.key()] = true
		}
		if err != nil {
			msg := fmt.Sprintf("%s: %s: %v", name, r, err)
			logrus.Errorf("manifests: %s", msg)
			errs = append(errs, msg)
			transient = transient || mayPass(err)
		}
	}
	prune, leave := toPrune(normalized(old, d), keep, d.othersKeys(name))
	for _, r := range leave {
		if !keep[r.key()] {
			logrus.Infof("manifests: %s no longer holds %s; left in place, as kelp did not create it (or another manifest holds it)", name, r)
		}
	}
	for _, r := range prune {
		if err := d.deleteObject(ctx, r); err != nil {
			msg := fmt.Sprintf("%s: deleting %s: %v", name, r, err)
			logrus.Errorf("manifests: %s", msg)
			errs = append(errs, msg)
			transient = transient || mayPass(err)
			applied = append(applied, r) // still to prune
			continue
		}
		logrus.Infof("manifests: %s: deleted %s", name, r)
	}
	next := &record{File: name, Objects: applied}
	if len(errs) == 0 {
		next.SHA256 = hash
	} else {
		next.Error = strings.Join(errs, "\n")
	}
	cm := d.writeRecord(ctx, next)
	for _, e := range errs {
		d.event(cm, corev1.EventTypeWarning, "ApplyFailed", e)
	}
	if len(errs) == 0 {
		logrus.Infof("manifests: applied %s (%d objects)", name, len(objs))
		d.event(cm, corev1.EventTypeNormal, "Applied", fmt.Sprintf("applied %s: %d objects", name, len(objs)))
	}
	return transient
}

// removeFile prunes everything a removed file created and then drops
// its record; what cannot be deleted yet stays recorded, to be tried
// again.
func (d *Deployer) removeFile(ctx context.Context, name string) {
	rec := d.records[name]
	prune, _ := toPrune(normalized(rec.Objects, d), nil, d.othersKeys(name))
	var left []ref
	var errs []string
	transient := false
	for _, r := range prune {
		if err := d.deleteObject(ctx, r); err != nil {
			errs = append(errs, fmt.Sprintf("%s removed: deleting %s: %v", name, r, err))
			transient = transient || mayPass(err)
			left = append(left, r)
			continue
		}
		logrus.Infof("manifests: %s removed: deleted %s", name, r)
	}
	delete(d.attempted, name)
	if len(left) == 0 {
		err := d.core.CoreV1().ConfigMaps(recordNamespace).Delete(ctx, recordName(name), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			logrus.WithError(err).Errorf("manifests: deleting the record of %s", name)
			d.retryLater(name, true)
			return
		}
		delete(d.records, name)
		delete(d.objs, name)
		delete(d.retries, name)
		return
	}
	for _, e := range errs {
		logrus.Errorf("manifests: %s", e)
	}
	cm := d.writeRecord(ctx, &record{File: name, Objects: left, Error: strings.Join(errs, "\n")})
	for _, e := range errs {
		d.event(cm, corev1.EventTypeWarning, "DeleteFailed", e)
	}
	d.retryLater(name, transient)
}

// retryLater schedules the next try of a file that failed for a reason
// that may pass, backing off; a file that succeeded, or failed for good,
// has none.
func (d *Deployer) retryLater(name string, transient bool) {
	if !transient {
		delete(d.retries, name)
		return
	}
	r := d.retries[name]
	if r == nil {
		r = &retry{delay: minRetry}
	} else if r.delay *= 2; r.delay > maxRetry {
		r.delay = maxRetry
	}
	r.at = time.Now().Add(r.delay)
	d.retries[name] = r
	logrus.Infof("manifests: %s: trying again in %s", name, r.delay)
}

// applyRank orders a file's objects for applying.
func applyRank(o *unstructured.Unstructured) int {
	switch o.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "Namespace"}:
		return 0
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return 1
	}
	return 2
}

// applyObject server-side applies o, forcing conflicts as k3s does: the
// file is the truth for the fields it sets. The ref it returns has the
// namespace the object got ("default" for a namespaced object without
// one, none for a cluster-scoped object).
func (d *Deployer) applyObject(ctx context.Context, o *unstructured.Unstructured, old map[string]ref, packaged bool) (ref, error) {
	r := refOf(o)
	ri, namespaced, err := d.resource(r)
	if err != nil {
		if prev, ok := old[r.key()]; ok {
			r.Created = prev.Created
		}
		return r, err
	}
	if !namespaced {
		o.SetNamespace("")
	} else if o.GetNamespace() == "" {
		o.SetNamespace(metav1.NamespaceDefault)
	}
	r = refOf(o)
	ri, _, _ = d.resource(r)
	switch prev, ok := old[r.key()]; {
	case packaged:
		r.Created = true
	case ok:
		r.Created = prev.Created
	default:
		// Whether the manifest creates it decides whether removing the
		// manifest may delete it.
		_, err := ri.Get(ctx, r.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			r.Created = true
		case err != nil:
			return r, err
		}
	}
	_, err = ri.Apply(ctx, r.Name, o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if apierrors.IsNotFound(err) && !d.mapperReset {
		// Its namespace may be missing, or its kind gone with its CRD
		// while discovery still names it: the retry asks discovery anew.
		d.mapperReset = true
		d.mapper.Reset()
	}
	return r, err
}

// resource is the dynamic client for r's kind and namespace. An unknown
// kind refreshes discovery once per pass: a CRD applied a moment ago may
// be served now.
func (d *Deployer) resource(r ref) (dynamic.ResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return nil, false, err
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: r.Kind}
	m, err := d.mapper.RESTMapping(gk, gv.Version)
	if meta.IsNoMatchError(err) && !d.mapperReset {
		d.mapperReset = true
		d.mapper.Reset()
		m, err = d.mapper.RESTMapping(gk, gv.Version)
	}
	if err != nil {
		return nil, false, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := r.Namespace
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		return d.dyn.Resource(m.Resource).Namespace(ns), true, nil
	}
	return d.dyn.Resource(m.Resource), false, nil
}

// normalize gives r the namespace its kind implies, when the kind is
// known: records written before a kind was served hold what the file
// said.
func (d *Deployer) normalize(r ref) ref {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return r
	}
	m, err := d.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: r.Kind}, gv.Version)
	if err != nil {
		// Another version of the kind may still be served.
		m, err = d.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: r.Kind})
		if err != nil {
			return r
		}
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		r.Namespace = ""
	} else if r.Namespace == "" {
		r.Namespace = metav1.NamespaceDefault
	}
	return r
}

func normalized(refs []ref, d *Deployer) []ref {
	out := make([]ref, len(refs))
	for i, r := range refs {
		out[i] = d.normalize(r)
	}
	return out
}

// othersKeys are the objects the other manifests hold, which pruning
// leaves alone.
func (d *Deployer) othersKeys(name string) map[string]bool {
	keys := map[string]bool{}
	for n, rec := range d.records {
		if n == name {
			continue
		}
		for _, r := range rec.Objects {
			keys[d.normalize(r).key()] = true
		}
	}
	return keys
}

// deleteObject deletes r, in the background as kubectl does (the garbage
// collector takes its dependents). Gone already, or of a kind no longer
// served, is done.
func (d *Deployer) deleteObject(ctx context.Context, r ref) error {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return nil
	}
	m, err := d.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: r.Kind})
	if meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ri := dynamic.ResourceInterface(d.dyn.Resource(m.Resource))
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = d.dyn.Resource(m.Resource).Namespace(r.Namespace)
	}
	bg := metav1.DeletePropagationBackground
	err = ri.Delete(ctx, r.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// mayPass tells errors worth another try: the API unreachable, busy or
// failing, a kind not served yet, a namespace not there yet. Not a
// refusal (invalid, forbidden), which only an edit of the file changes.
func mayPass(err error) bool {
	if meta.IsNoMatchError(err) {
		return true
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return true
	}
	code := st.Status().Code
	return code == 404 || code == 409 || code == 429 || code >= 500
}

// writeRecord applies a file's record and keeps it as the API returned
// it. Failing to write it is logged: the objects are applied, and the
// next change of the file writes it again.
func (d *Deployer) writeRecord(ctx context.Context, rec *record) *corev1.ConfigMap {
	data, err := rec.data()
	if err == nil {
		ac := corev1ac.ConfigMap(recordName(rec.File), recordNamespace).
			WithLabels(map[string]string{recordLabel: "true", "app.kubernetes.io/managed-by": FieldManager}).
			WithData(data)
		var cm *corev1.ConfigMap
		cm, err = d.core.CoreV1().ConfigMaps(recordNamespace).Apply(ctx, ac, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err == nil {
			d.records[rec.File], d.objs[rec.File] = rec, cm
			return cm
		}
	}
	logrus.WithError(err).Errorf("manifests: recording what %s applied", rec.File)
	// Kept in memory all the same, so this process prunes right.
	d.records[rec.File] = rec
	return d.objs[rec.File]
}

// event records an Event on a file's record, for `kubectl describe`.
func (d *Deployer) event(cm *corev1.ConfigMap, kind, reason, msg string) {
	if cm == nil {
		return
	}
	d.events.Event(cm, kind, reason, msg)
}
