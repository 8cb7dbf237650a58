package serviceaccount

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
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
	*perNamespace
	client   kubernetes.Interface
	caPEM    string
	cmLister corelisters.ConfigMapLister
}

// NewRootCAPublisher returns the root CA publisher for caPEM. The factory
// must be started by the caller.
func NewRootCAPublisher(client kubernetes.Interface, factory informers.SharedInformerFactory, caPEM []byte) *RootCAPublisher {
	cmInf := factory.Core().V1().ConfigMaps()
	p := &RootCAPublisher{client: client, caPEM: string(caPEM), cmLister: cmInf.Lister()}
	p.perNamespace = newPerNamespace("root-ca-cert-publisher", factory.Core().V1().Namespaces(), cmInf.Informer(), RootCAConfigMapName, p.ensure)
	return p
}

// ensure creates or repairs kube-root-ca.crt in namespace name.
func (p *RootCAPublisher) ensure(ctx context.Context, name string) error {
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
