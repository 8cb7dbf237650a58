package apiserver

import (
	"context"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelp-project/kelp/server/apiserver/storage"
)

// The Node authorizer relates a node to the objects it may read through
// the pods bound to it; this is its read of those pods and claims, from
// the watch caches. A kind-specific adapter, kept out of the generic files
// like bootstrap.go and kubeletproxy.go.

// nodeObjects is the Node authorizer's view of pods and claims: the
// watch caches, as admission's getter reads them.
type nodeObjects struct{ s *Server }

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

func (n nodeObjects) PodsOnNode(namespace, node string) ([]*corev1.Pod, error) {
	sv, ok := n.s.live().resources[podsGVR]
	if !ok {
		return nil, fmt.Errorf("pods are not served")
	}
	// resourceVersion 0 is served from the watch cache, never from etcd:
	// a node asking for objects it has no claim to costs no etcd read.
	res, err := sv.store.List(context.Background(), storage.ListOptions{Namespace: namespace, ResourceVersion: "0",
		Predicate: storage.Predicate{Attrs: sv.Attrs, Field: fields.OneTermEqualSelector("spec.nodeName", node)}})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(res.Items))
	for _, obj := range res.Items {
		if p, ok := obj.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

func (n nodeObjects) Pod(namespace, name string) (*corev1.Pod, error) {
	return getAs[*corev1.Pod](n.s, podsGVR, namespace, name)
}

func (n nodeObjects) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return getAs[*corev1.PersistentVolumeClaim](n.s, schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}, namespace, name)
}

func (n nodeObjects) PodCertificateRequest(namespace, name string) (*certificatesv1.PodCertificateRequest, error) {
	return getAs[*certificatesv1.PodCertificateRequest](n.s, certificatesv1.SchemeGroupVersion.WithResource("podcertificaterequests"), namespace, name)
}
