package kubelet

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
)

// maxTrustBundleSelector is upstream's bound on a clusterTrustBundle
// projection's label selector, written out.
const maxTrustBundleSelector = 100 * 1024

// trustBundles answers the clusterTrustBundle projections of the node's
// pods, as upstream's kubelet ClusterTrustBundle manager: every
// certificates.k8s.io/v1 ClusterTrustBundle is followed by one informer
// (trust anchors are public: the Node authorizer lets a node list and
// watch them all), started by the first pod that asks, so a node whose
// pods use none keeps no watch. A projection's file holds the distinct
// certificates of the bundles it names, as header-less CERTIFICATE
// blocks in an order random per kubelet yet stable while it runs, so a
// file changes only when its bundles do (upstream sorts, shuffles and
// caches the result until a bundle changes). changed is called after a
// bundle is added, updated or deleted, so the pods using bundles rewrite
// their volumes at once.
type trustBundles struct {
	client  kubernetes.Interface
	changed func()
	// order is the per-kubelet key of the anchors' order.
	order maphash.Seed

	informer *lazyInformer[certlisters.ClusterTrustBundleLister]
}

func newTrustBundles(client kubernetes.Interface, changed func()) *trustBundles {
	b := &trustBundles{client: client, changed: changed, order: maphash.MakeSeed()}
	b.informer = newLazyInformer("ClusterTrustBundle", func(ctx context.Context) (cache.SharedIndexInformer, certlisters.ClusterTrustBundleLister) {
		factory := informers.NewSharedInformerFactory(b.client, 0)
		inf := factory.Certificates().V1().ClusterTrustBundles()
		notify := func(any) {
			if b.changed != nil {
				b.changed()
			}
		}
		_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: notify, DeleteFunc: notify,
			UpdateFunc: func(_, obj any) { notify(obj) },
		})
		factory.Start(ctx.Done())
		return inf.Informer(), inf.Lister()
	})
	return b
}

// byName is the anchors of the bundle named name; a missing bundle is an
// error unless optional, when the file is empty.
func (b *trustBundles) byName(ctx context.Context, name string, optional bool) ([]byte, error) {
	lister, err := b.informer.get(ctx)
	if err != nil {
		return nil, err
	}
	bundle, err := lister.Get(name)
	if apierrors.IsNotFound(err) && optional {
		return []byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("while getting ClusterTrustBundle: %w", err)
	}
	return b.anchors([]*certificatesv1.ClusterTrustBundle{bundle}), nil
}

// bySigner is the anchors of the bundles of signerName that selector
// picks (nil picks none, empty all); picking none is an error unless
// optional, when the file is empty.
func (b *trustBundles) bySigner(ctx context.Context, signerName string, selector *metav1.LabelSelector, optional bool) ([]byte, error) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("while parsing label selector: %w", err)
	}
	if n := len(sel.String()); n > maxTrustBundleSelector {
		return nil, fmt.Errorf("label selector length (%d) is larger than %d", n, maxTrustBundleSelector)
	}
	lister, err := b.informer.get(ctx)
	if err != nil {
		return nil, err
	}
	all, err := lister.List(sel)
	if err != nil {
		return nil, fmt.Errorf("while listing ClusterTrustBundles matching label selector %v: %w", selector, err)
	}
	var picked []*certificatesv1.ClusterTrustBundle
	for _, bundle := range all {
		if bundle.Spec.SignerName == signerName {
			picked = append(picked, bundle)
		}
	}
	if len(picked) == 0 {
		if optional {
			return []byte{}, nil
		}
		return nil, errors.New("combination of signerName and labelSelector matched zero ClusterTrustBundles")
	}
	return b.anchors(picked), nil
}

// anchors is the distinct certificates of bundles, each re-encoded as a
// header-less CERTIFICATE block (validation admits no other), ordered by
// their keyed hash: a shuffle no pod can rely on, the same for the same
// set for as long as this kubelet runs.
func (b *trustBundles) anchors(bundles []*certificatesv1.ClusterTrustBundle) []byte {
	seen := map[string]bool{}
	var ders [][]byte
	for _, bundle := range bundles {
		rest := []byte(bundle.Spec.TrustBundle)
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			if !seen[string(block.Bytes)] {
				seen[string(block.Bytes)] = true
				ders = append(ders, block.Bytes)
			}
		}
	}
	slices.SortFunc(ders, func(x, y []byte) int {
		hx, hy := maphash.Bytes(b.order, x), maphash.Bytes(b.order, y)
		switch {
		case hx < hy:
			return -1
		case hx > hy:
			return 1
		}
		return bytes.Compare(x, y)
	})
	out := []byte{}
	for _, der := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}

// trustBundleFiles is a clusterTrustBundle projection: its bundle, or its
// signer's selected bundles, in one file at its path. The file is 0600
// when the pod has an fsGroup, which then makes it group-readable, as
// upstream's projection does for its credential-like sources.
func (k *Kubelet) trustBundleFiles(ctx context.Context, pod *corev1.Pod, src *corev1.ClusterTrustBundleProjection, def *int32) (map[string]volumeFile, error) {
	optional := src.Optional != nil && *src.Optional
	var data []byte
	var err error
	switch {
	case src.Name != nil:
		data, err = k.trustBundles.byName(ctx, *src.Name, optional)
	case src.SignerName != nil:
		data, err = k.trustBundles.bySigner(ctx, *src.SignerName, src.LabelSelector, optional)
	default:
		err = errors.New("ClusterTrustBundle projection requires either name or signerName to be set")
	}
	if err != nil {
		return nil, err
	}
	mode := fileMode(nil, def)
	if _, ok := fsGroupOf(pod); ok {
		mode = os.FileMode(0o600)
	}
	return map[string]volumeFile{src.Path: {data, mode}}, nil
}

// usesTrustBundles reports whether a volume of pod projects a
// ClusterTrustBundle.
func usesTrustBundles(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ClusterTrustBundle != nil {
				return true
			}
		}
	}
	return false
}

// trustBundlesChanged wakes the workers of the pods that project
// ClusterTrustBundles: a bundle was added, changed or deleted, and their
// files (or a pod waiting for a bundle) follow at once rather than at the
// next periodic sync.
func (k *Kubelet) trustBundlesChanged() {
	k.mu.Lock()
	workers := make([]*podWorker, 0, len(k.workers))
	for _, w := range k.workers {
		workers = append(workers, w)
	}
	k.mu.Unlock()
	for _, w := range workers {
		w.mu.Lock()
		pod := w.pod
		w.mu.Unlock()
		if pod != nil && usesTrustBundles(pod) {
			w.kick()
		}
	}
}
