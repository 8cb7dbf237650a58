package serviceaccount

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kelp-project/kelp/server/controllers"
)

// perNamespace is the shape both controllers here share: one object named
// objName in every active namespace, keyed by namespace name. A namespace
// event, or an update or delete of that object, makes ensure run for the
// namespace again.
type perNamespace struct {
	loop     controllers.Loop
	nsLister corelisters.NamespaceLister
	ensure   func(ctx context.Context, ns string) error
}

func newPerNamespace(name string, nsInf coreinformers.NamespaceInformer, obj cache.SharedIndexInformer, objName string,
	ensure func(ctx context.Context, ns string) error) *perNamespace {
	p := &perNamespace{nsLister: nsInf.Lister(), ensure: ensure}
	p.loop = controllers.Loop{Name: name, Queue: controllers.NewQueue(name),
		Synced: []cache.InformerSynced{nsInf.Informer().HasSynced, obj.HasSynced}, Sync: p.sync}
	_, _ = nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.enqueueNamespace,
		UpdateFunc: func(_, o interface{}) { p.enqueueNamespace(o) },
	})
	enqueueObject := func(o interface{}) {
		if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = t.Obj
		}
		if acc, err := meta.Accessor(o); err == nil && acc.GetName() == objName {
			p.loop.Queue.Add(acc.GetNamespace())
		}
	}
	_, _ = obj.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, o interface{}) { enqueueObject(o) },
		DeleteFunc: enqueueObject,
	})
	return p
}

// Run runs workers until ctx is done.
func (p *perNamespace) Run(ctx context.Context, workers int) { p.loop.Run(ctx, workers) }

func (p *perNamespace) enqueueNamespace(o interface{}) {
	if ns, ok := o.(*corev1.Namespace); ok {
		p.loop.Queue.Add(ns.Name)
	}
}

func (p *perNamespace) sync(ctx context.Context, name string) error {
	ns, err := p.nsLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !namespaceActive(ns) {
		return nil
	}
	return p.ensure(ctx, name)
}

// namespaceActive reports whether objects should be ensured in ns.
func namespaceActive(ns *corev1.Namespace) bool {
	return ns.DeletionTimestamp == nil && ns.Status.Phase != corev1.NamespaceTerminating
}
