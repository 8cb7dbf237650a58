package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kelp-project/kelp/server/apiserver/storage"
)

// objectStore is what the handlers need from storage. storage.Store is the
// plain implementation; convertingStore serves one kind from another
// kind's storage (events.k8s.io/v1 Events from core/v1 Events).
type objectStore interface {
	Key(namespace, name string) string
	Get(ctx context.Context, key string) (runtime.Object, error)
	List(ctx context.Context, o storage.ListOptions) (*storage.ListResult, error)
	Watch(ctx context.Context, o storage.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, key string, obj runtime.Object, dryRun bool) (runtime.Object, error)
	Update(ctx context.Context, key string, fn storage.UpdateFunc, dryRun bool) (runtime.Object, bool, error)
}

type convertingStore struct {
	*storage.Store
	to, from func(runtime.Object) runtime.Object
}

// predicate evaluates selectors against the served kind.
func (c convertingStore) predicate(p storage.Predicate) storage.Predicate {
	attrs := p.Attrs
	if attrs != nil {
		p.Attrs = func(obj runtime.Object) (labels.Set, fields.Set, error) { return attrs(c.from(obj)) }
	}
	return p
}

func (c convertingStore) Get(ctx context.Context, key string) (runtime.Object, error) {
	obj, err := c.Store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return c.from(obj), nil
}

func (c convertingStore) List(ctx context.Context, o storage.ListOptions) (*storage.ListResult, error) {
	o.Predicate = c.predicate(o.Predicate)
	res, err := c.Store.List(ctx, o)
	if err != nil {
		return nil, err
	}
	out := *res
	out.Items = make([]runtime.Object, len(res.Items))
	for i, item := range res.Items {
		out.Items[i] = c.from(item)
	}
	return &out, nil
}

func (c convertingStore) Watch(ctx context.Context, o storage.ListOptions) (watch.Interface, error) {
	o.Predicate = c.predicate(o.Predicate)
	w, err := c.Store.Watch(ctx, o)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if ev.Type != watch.Error {
			ev.Object = c.from(ev.Object)
		}
		return ev, true
	}), nil
}

func (c convertingStore) Create(ctx context.Context, key string, obj runtime.Object, dryRun bool) (runtime.Object, error) {
	out, err := c.Store.Create(ctx, key, c.to(obj), dryRun)
	if err != nil {
		return nil, err
	}
	return c.from(out), nil
}

func (c convertingStore) Update(ctx context.Context, key string, fn storage.UpdateFunc, dryRun bool) (runtime.Object, bool, error) {
	out, deleted, err := c.Store.Update(ctx, key, func(cur runtime.Object) (runtime.Object, error) {
		next, err := fn(c.from(cur))
		if err != nil {
			return nil, err
		}
		return c.to(next), nil
	}, dryRun)
	if err != nil {
		return nil, false, err
	}
	return c.from(out), deleted, nil
}
