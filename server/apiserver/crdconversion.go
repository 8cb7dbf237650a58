package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kelp-project/kelp/server/apiserver/admission/webhook"
	"github.com/kelp-project/kelp/server/apiserver/storage"
)

// CRD conversion webhooks (spec.conversion.strategy Webhook). The
// converter is upstream's (apiextensions-apiserver's pkg/apiserver/conversion:
// ConversionReview v1 or v1beta1 in the CRD's order of preference, the CA
// bundle, a service or URL target, the 30 s timeout, the checks of the
// response and its errors), its service references resolved as the
// admission webhooks resolve them. It is built only for a CRD that asks,
// the factory behind it when the first such CRD is served: a CRD
// converting None pays nothing for it.
//
// A webhook CRD's store keeps each object in the version it was written
// in (storage.Config.MixedVersions): objects written before the storage
// version changed stay in the old version until rewritten, and only the
// webhook can convert them, with errors a reader must see. So every
// served version of such a CRD, the storage version too, reads through a
// webhookVersionStore, which converts what is not in its version, and
// writes convert to the storage version first.

// webhookConverterFactory is upstream's factory of CR converters, made on
// first use; its client manager caches one REST client per webhook
// config.
type webhookConverterFactory func() (*conversion.CRConverterFactory, error)

func newWebhookConverterFactory(s *Server) webhookConverterFactory {
	return sync.OnceValues(func() (*conversion.CRConverterFactory, error) {
		services := webhook.NewServiceResolver(s.getter(corev1.SchemeGroupVersion.WithResource("services")))
		// No authentication-info wrapper: kelp has no egress selector
		// or proxy to put between the API server and a webhook.
		return conversion.NewCRConverterFactory(services, nil)
	})
}

// usesConversionWebhook reports whether crd converts between its versions
// by webhook.
func usesConversionWebhook(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter
}

// crdConverter is the CRD's webhook converter, in upstream's two forms:
// safe copies its input, unsafe may not (it is given only lists built for
// the call).
type crdConverter struct {
	safe, unsafe runtime.ObjectConvertor
}

func (f webhookConverterFactory) converter(crd *apiextensionsv1.CustomResourceDefinition) (*crdConverter, error) {
	hook := crd.Spec.Conversion.Webhook
	// Defaulting gives a service its port and validation requires a
	// client config; a CRD stored otherwise is refused, not a panic.
	if hook == nil || hook.ClientConfig == nil || (hook.ClientConfig.Service != nil && hook.ClientConfig.Service.Port == nil) {
		return nil, fmt.Errorf("conversion webhook without a complete client config")
	}
	factory, err := f()
	if err != nil {
		return nil, err
	}
	safe, unsafe, err := factory.NewConverter(crd)
	if err != nil {
		return nil, err
	}
	return &crdConverter{safe: safe, unsafe: unsafe}, nil
}

// storedDefaulter is the storage decoder's defaulting for a webhook CRD's
// store: objects of the storage version are defaulted once as they leave
// etcd, as the store of a CRD converting None does; objects of another
// version are defaulted by the version they are read through, after
// conversion.
func storedDefaulter(storageGVK schema.GroupVersionKind, def func(runtime.Object)) func(runtime.Object) {
	if def == nil {
		return nil
	}
	return func(obj runtime.Object) {
		if obj.GetObjectKind().GroupVersionKind() == storageGVK {
			def(obj)
		}
	}
}

// conversionFailed is the Status of a failed conversion: upstream's API
// server hands its converter's error on as a 500 of reason Unknown with
// the converter's message ("conversion webhook for <kind> failed: ...").
func conversionFailed(err error) error {
	return &apierrors.StatusError{ErrStatus: statusFailure(http.StatusInternalServerError, metav1.StatusReasonUnknown, err.Error())}
}

// webhookVersionStore serves one version of a webhook CRD from its store.
type webhookVersionStore struct {
	*storage.Store
	conv           *crdConverter
	served, stored schema.GroupVersionKind
	// def prunes and defaults an object by the served version's schema,
	// as upstream's codec does after converting.
	def func(runtime.Object)
}

func newWebhookVersionStore(st *storage.Store, conv *crdConverter, served, stored schema.GroupVersionKind, def func(runtime.Object)) objectStore {
	return webhookVersionStore{Store: st, conv: conv, served: served, stored: stored, def: def}
}

// inServed returns obj, which is in the served version, ready to be
// served. Storage-version objects were defaulted on decode and are
// returned as they are (shared with the watch cache); an object left in
// another version that happens to be the served one is copied and
// defaulted.
func (w webhookVersionStore) inServed(obj runtime.Object) runtime.Object {
	if w.served == w.stored || w.def == nil {
		return obj
	}
	out := obj.DeepCopyObject()
	w.def(out)
	return out
}

// fromStorage converts one stored object to the served version.
func (w webhookVersionStore) fromStorage(obj runtime.Object) (runtime.Object, error) {
	if obj.GetObjectKind().GroupVersionKind().GroupVersion() == w.served.GroupVersion() {
		return w.inServed(obj), nil
	}
	out, err := w.conv.safe.ConvertToVersion(obj, w.served.GroupVersion())
	if err != nil {
		return nil, conversionFailed(err)
	}
	if w.def != nil {
		w.def(out)
	}
	return out, nil
}

// toStorage converts an object of the served version to the storage
// version, as upstream encodes a custom resource for etcd.
func (w webhookVersionStore) toStorage(obj runtime.Object) (runtime.Object, error) {
	if obj.GetObjectKind().GroupVersionKind().GroupVersion() == w.stored.GroupVersion() {
		return obj, nil
	}
	out, err := w.conv.safe.ConvertToVersion(obj, w.stored.GroupVersion())
	if err != nil {
		return nil, conversionFailed(err)
	}
	return out, nil
}

// fromStorageAll converts a list's items in place, those not in the served
// version in one ConversionReview, as upstream converts a list: its items
// may be of several stored versions.
func (w webhookVersionStore) fromStorageAll(items []runtime.Object) error {
	var stale []int
	batch := &unstructured.UnstructuredList{}
	batch.SetGroupVersionKind(w.served.GroupVersion().WithKind(w.served.Kind + "List"))
	for i, item := range items {
		if item.GetObjectKind().GroupVersionKind().GroupVersion() == w.served.GroupVersion() {
			items[i] = w.inServed(item)
			continue
		}
		u, ok := item.(*unstructured.Unstructured)
		if !ok {
			return conversionFailed(fmt.Errorf("stored %T is not a custom resource", item))
		}
		stale = append(stale, i)
		// A shallow copy: the converter copies the list before it
		// changes anything, so the cached objects stay untouched.
		batch.Items = append(batch.Items, *u)
	}
	if len(stale) == 0 {
		return nil
	}
	out, err := w.conv.unsafe.ConvertToVersion(batch, w.served.GroupVersion())
	if err != nil {
		return conversionFailed(err)
	}
	converted, ok := out.(*unstructured.UnstructuredList)
	if !ok || len(converted.Items) != len(stale) {
		return conversionFailed(fmt.Errorf("conversion of %d %s returned %T", len(stale), w.served.Kind, out))
	}
	for j, i := range stale {
		obj := &converted.Items[j]
		if w.def != nil {
			w.def(obj)
		}
		items[i] = obj
	}
	return nil
}

// predicate evaluates selectors against the served version (its
// selectable fields). An object that does not convert matches nothing.
func (w webhookVersionStore) predicate(p storage.Predicate) storage.Predicate {
	attrs := p.Attrs
	if attrs != nil {
		p.Attrs = func(obj runtime.Object) (labels.Set, fields.Set, error) {
			out, err := w.fromStorage(obj)
			if err != nil {
				return nil, nil, err
			}
			return attrs(out)
		}
	}
	return p
}

func (w webhookVersionStore) Get(ctx context.Context, key string) (runtime.Object, error) {
	obj, err := w.Store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return w.fromStorage(obj)
}

func (w webhookVersionStore) List(ctx context.Context, o storage.ListOptions) (*storage.ListResult, error) {
	o.Predicate = w.predicate(o.Predicate)
	res, err := w.Store.List(ctx, o)
	if err != nil {
		return nil, err
	}
	out := *res
	out.Items = append([]runtime.Object(nil), res.Items...)
	if err := w.fromStorageAll(out.Items); err != nil {
		return nil, err
	}
	return &out, nil
}

// Watch converts each event's object; one that does not convert ends the
// watch with an error event carrying the Status (the client lists again),
// as upstream's watch ends when it cannot encode an event.
func (w webhookVersionStore) Watch(ctx context.Context, o storage.ListOptions) (watch.Interface, error) {
	o.Predicate = w.predicate(o.Predicate)
	inner, err := w.Store.Watch(ctx, o)
	if err != nil {
		return nil, err
	}
	out := make(chan watch.Event)
	done := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(done); inner.Stop() }) }
	go func() {
		defer close(out)
		defer stop()
		for ev := range inner.ResultChan() {
			switch ev.Type {
			case watch.Error:
			case watch.Bookmark:
				// A bookmark is an empty object with a resourceVersion:
				// nothing for the webhook, only the served kind.
				obj := ev.Object.DeepCopyObject()
				obj.GetObjectKind().SetGroupVersionKind(w.served)
				ev.Object = obj
			default:
				obj, err := w.fromStorage(ev.Object)
				if err != nil {
					st := toStatus(err)
					ev = watch.Event{Type: watch.Error, Object: st}
				} else {
					ev.Object = obj
				}
			}
			select {
			case out <- ev:
			case <-done:
				return
			}
			if ev.Type == watch.Error {
				return
			}
		}
	}()
	return &convertedWatch{ch: out, stop: stop}, nil
}

type convertedWatch struct {
	ch   chan watch.Event
	stop func()
}

func (c *convertedWatch) Stop()                          { c.stop() }
func (c *convertedWatch) ResultChan() <-chan watch.Event { return c.ch }

func (w webhookVersionStore) Create(ctx context.Context, key string, obj runtime.Object, dryRun bool) (runtime.Object, error) {
	in, err := w.toStorage(obj)
	if err != nil {
		return nil, err
	}
	out, err := w.Store.Create(ctx, key, in, dryRun)
	if err != nil {
		return nil, err
	}
	return w.fromStorage(out)
}

func (w webhookVersionStore) Update(ctx context.Context, key string, fn storage.UpdateFunc, dryRun bool) (runtime.Object, bool, error) {
	out, deleted, err := w.Store.Update(ctx, key, func(cur runtime.Object) (runtime.Object, error) {
		served, err := w.fromStorage(cur)
		if err != nil {
			return nil, err
		}
		next, err := fn(served)
		if err != nil {
			return nil, err
		}
		return w.toStorage(next)
	}, dryRun)
	if err != nil {
		return nil, false, err
	}
	obj, err := w.fromStorage(out)
	if err != nil {
		return nil, false, err
	}
	return obj, deleted, nil
}
