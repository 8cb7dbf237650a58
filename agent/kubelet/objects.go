package kubelet

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// objectTTL is how long a Secret or ConfigMap read for a pod is reused: a
// sync of several pods (or containers) that share one reads it once, and
// every later sync (at least every syncFrequency) reads it again, so
// volumes follow changes within about a minute, as upstream's.
const objectTTL = resyncInterval / 2

// objectCache holds the Secrets or ConfigMaps the node's pods use, each
// read with its own GET. The Node authorizer lets a node read only the
// objects its pods reference, one by one, never list them all, so the
// kubelet cannot use cluster-wide informers for them (upstream's kubelet
// reads them per object too).
type objectCache[T any] struct {
	get func(ctx context.Context, namespace, name string) (T, error)

	mu    sync.Mutex
	items map[string]cachedObject[T] // namespace/name
}

type cachedObject[T any] struct {
	obj     T
	fetched time.Time
}

func newObjectCache[T any](get func(ctx context.Context, namespace, name string) (T, error)) *objectCache[T] {
	return &objectCache[T]{get: get, items: map[string]cachedObject[T]{}}
}

func secretCache(c kubernetes.Interface) *objectCache[*corev1.Secret] {
	return newObjectCache(func(ctx context.Context, ns, name string) (*corev1.Secret, error) {
		return c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	})
}

func configMapCache(c kubernetes.Interface) *objectCache[*corev1.ConfigMap] {
	return newObjectCache(func(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
		return c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	})
}

func claimCache(c kubernetes.Interface) *objectCache[*corev1.PersistentVolumeClaim] {
	return newObjectCache(func(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
		return c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	})
}

// volumeCache reads PersistentVolumes (cluster-scoped: the namespace is
// ignored), which the Node authorizer lets a node get when one of its pods
// uses a claim bound to them.
func volumeCache(c kubernetes.Interface) *objectCache[*corev1.PersistentVolume] {
	return newObjectCache(func(ctx context.Context, _, name string) (*corev1.PersistentVolume, error) {
		return c.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	})
}

// Get returns the object, read again unless the copy held was read less
// than objectTTL ago and not before notBefore: a pod's first sync passes
// the time its worker started, so a new pod never starts on a copy read
// before it existed (upstream's kubelet refreshes on pod registration).
//
// A missing object, or one the node may no longer read, is forgotten and
// its error returned (not cached: it may be created any moment). Any other
// error (the API server restarting) serves the last copy, if there is one,
// so running pods keep their volumes and restarted containers their env.
func (c *objectCache[T]) Get(ctx context.Context, namespace, name string, notBefore time.Time) (T, error) {
	key := namespace + "/" + name
	now := time.Now()
	c.mu.Lock()
	e, ok := c.items[key]
	c.mu.Unlock()
	if ok && now.Sub(e.fetched) < objectTTL && !e.fetched.Before(notBefore) {
		return e.obj, nil
	}
	obj, err := c.get(ctx, namespace, name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if ok && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
			return e.obj, nil
		}
		delete(c.items, key)
		var zero T
		return zero, err
	}
	c.items[key] = cachedObject[T]{obj: obj, fetched: now}
	// Objects no pod has asked for in a while (their pods are gone) are
	// dropped: every sync of a pod that uses one asks again.
	for k, it := range c.items {
		if now.Sub(it.fetched) > 10*resyncInterval {
			delete(c.items, k)
		}
	}
	return obj, nil
}

// workerStart is when the kubelet started working on pod (zero if it has
// no worker).
func (k *Kubelet) workerStart(pod *corev1.Pod) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if w := k.workers[pod.UID]; w != nil {
		return w.created
	}
	return time.Time{}
}

// secret and configMap read what pod references, for its env and volumes;
// claim and volume the PersistentVolumeClaims of its volumes and the
// volumes bound to them.
func (k *Kubelet) secret(ctx context.Context, pod *corev1.Pod, name string) (*corev1.Secret, error) {
	return k.secrets.Get(ctx, pod.Namespace, name, k.workerStart(pod))
}

func (k *Kubelet) configMap(ctx context.Context, pod *corev1.Pod, name string) (*corev1.ConfigMap, error) {
	return k.configs.Get(ctx, pod.Namespace, name, k.workerStart(pod))
}

// claim reads a claim again whenever the copy held is not bound yet: the
// pod waits for its binding, which no pod event announces.
func (k *Kubelet) claim(ctx context.Context, pod *corev1.Pod, name string) (*corev1.PersistentVolumeClaim, error) {
	c, err := k.claims.Get(ctx, pod.Namespace, name, k.workerStart(pod))
	if err == nil && (c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName == "") {
		return k.claims.Get(ctx, pod.Namespace, name, time.Now())
	}
	return c, err
}

func (k *Kubelet) volume(ctx context.Context, pod *corev1.Pod, name string) (*corev1.PersistentVolume, error) {
	return k.volumes.Get(ctx, "", name, k.workerStart(pod))
}
