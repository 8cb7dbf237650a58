package serviceaccount

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kelp-project/kelp/server/controllers"
)

const (
	// RootCAConfigMapName is the ConfigMap published in every namespace.
	RootCAConfigMapName = "kube-root-ca.crt"
	// RootCAKey is its data key holding the PEM bundle.
	RootCAKey = "ca.crt"
	// DescriptionAnnotation is set on the ConfigMap like upstream does.
	DescriptionAnnotation = "kubernetes.io/description"
	description           = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. " +
		"No other usage is guaranteed across distributions of Kubernetes clusters."
)

// RootCAPublisher keeps ConfigMap kube-root-ca.crt with the cluster CA in
// every active namespace, recreating it when deleted and restoring its data
// when edited.
type RootCAPublisher struct {
	loop     controllers.Loop
	client   kubernetes.Interface
	caPEM    string
	nsLister corelisters.NamespaceLister
	cmLister corelisters.ConfigMapLister
}

// NewRootCAPublisher returns the root CA publisher for caPEM. The factory
// must be started by the caller.
func NewRootCAPublisher(client kubernetes.Interface, factory informers.SharedInformerFactory, caPEM []byte) *RootCAPublisher {
	nsInf := factory.Core().V1().Namespaces()
	cmInf := factory.Core().V1().ConfigMaps()
	p := &RootCAPublisher{
		loop:     controllers.Loop{Name: "root-ca-cert-publisher", Queue: controllers.NewQueue("root-ca-cert-publisher")},
		client:   client,
		caPEM:    string(caPEM),
		nsLister: nsInf.Lister(),
		cmLister: cmInf.Lister(),
	}
	p.loop.Synced = []cache.InformerSynced{nsInf.Informer().HasSynced, cmInf.Informer().HasSynced}
	p.loop.Sync = p.sync
	_, _ = nsInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.enqueueNamespace,
		UpdateFunc: func(_, obj interface{}) { p.enqueueNamespace(obj) },
	})
	_, _ = cmInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) { p.enqueueConfigMap(obj) },
		DeleteFunc: p.enqueueConfigMap,
	})
	return p
}

// Run runs workers until ctx is done.
func (p *RootCAPublisher) Run(ctx context.Context, workers int) { p.loop.Run(ctx, workers) }

func (p *RootCAPublisher) enqueueNamespace(obj interface{}) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		p.loop.Queue.Add(ns.Name)
	}
}

func (p *RootCAPublisher) enqueueConfigMap(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Name != RootCAConfigMapName {
		return
	}
	p.loop.Queue.Add(cm.Namespace)
}

func (p *RootCAPublisher) sync(ctx context.Context, name string) error {
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
	cm, err := p.cmLister.ConfigMaps(name).Get(RootCAConfigMapName)
	if apierrors.IsNotFound(err) {
		_, err = p.client.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:        RootCAConfigMapName,
				Namespace:   name,
				Annotations: map[string]string{DescriptionAnnotation: description},
			},
			Data: map[string]string{RootCAKey: p.caPEM},
		}, metav1.CreateOptions{})
		if err != nil && !ignorableCreateError(err) {
			return err
		}
		return nil
	}
	if err != nil {
		return err
	}
	if len(cm.Data) == 1 && cm.Data[RootCAKey] == p.caPEM && len(cm.BinaryData) == 0 &&
		cm.Annotations[DescriptionAnnotation] == description {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = map[string]string{RootCAKey: p.caPEM}
	cm.BinaryData = nil
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[DescriptionAnnotation] = description
	// A conflict means the lister is stale; the update event requeues us.
	_, err = p.client.CoreV1().ConfigMaps(name).Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
