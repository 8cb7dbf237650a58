package admission

import (
	"context"
	"errors"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	rqadmission "k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/lru"

	kelpquota "github.com/kelp-project/kelp/server/quota"
)

var resourceQuotasResource = corev1.SchemeGroupVersion.WithResource("resourcequotas")

// resourceQuotaWorkers is upstream's plugin's number of evaluators.
const resourceQuotaWorkers = 5

// resourceQuota is upstream's ResourceQuota plugin: upstream's quota
// evaluator (apiserver's admission/plugin/resourcequota: the writes of a
// namespace checked in batches by a few workers, "exceeded quota" and
// "failed quota" refusals, charges written to each quota's status.used
// with compare-and-swap and retried on conflict) over kelp's reading of
// the namespace's quotas (the watch cache, corrected by the charges this
// server wrote since) and the loopback client for the writes.
type resourceQuota struct {
	quotas    ObjectGetter
	evaluator rqadmission.Evaluator
}

func newResourceQuota(quotas ObjectGetter, loopback func() kubernetes.Interface, stop <-chan struct{}) *resourceQuota {
	if stop == nil {
		stop = make(chan struct{})
	}
	registry := generic.NewRegistry(kelpquota.NewEvaluators(nil, nil))
	access := &quotaAccess{quotas: quotas, loopback: loopback, updated: lru.New(100)}
	return &resourceQuota{quotas: quotas, evaluator: rqadmission.NewQuotaEvaluator(access, kelpquota.IgnoredResources, registry, nil, nil, resourceQuotaWorkers, stop)}
}

func (q *resourceQuota) Validate(ctx context.Context, a *Attributes) error {
	// Namespaced creates and updates only; a namespace's own create is
	// never charged.
	if a.Namespace == "" || (a.Operation != "CREATE" && a.Operation != "UPDATE") {
		return nil
	}
	// A namespace without quotas (most) has nothing to check: its writes
	// are answered here, not queued to the evaluator's workers behind the
	// namespace's other writes only to find no quota there (as no limited
	// resources are configured, upstream's evaluator lets them all pass).
	if rqs, err := q.quotas.List(ctx, a.Namespace); err == nil && len(rqs) == 0 {
		return nil
	}
	var info user.Info
	if a.User != nil {
		info = &user.DefaultInfo{Name: a.User.Name, Groups: a.User.Groups}
	}
	attrs := k8sadmission.NewAttributesRecord(a.Object, a.OldObject, schema.GroupVersionKind{}, a.Namespace, a.Name, a.Resource,
		a.Subresource, k8sadmission.Operation(a.Operation), nil, a.DryRun, info)
	return q.evaluator.Evaluate(attrs)
}

// quotaAccess is upstream's quotaAccessor over kelp's watch cache: the
// quotas of a namespace as the cache has them, each replaced by the
// version this server last wrote while the cache has not caught up.
type quotaAccess struct {
	quotas   ObjectGetter
	loopback func() kubernetes.Interface
	updated  *lru.Cache // namespace/name -> *corev1.ResourceQuota
}

func (q *quotaAccess) UpdateQuotaStatus(newQuota *corev1.ResourceQuota) error {
	var client kubernetes.Interface
	if q.loopback != nil {
		client = q.loopback()
	}
	if client == nil {
		return errors.New("resource quota admission: the API server's loopback client is not ready yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := client.CoreV1().ResourceQuotas(newQuota.Namespace).UpdateStatus(ctx, newQuota, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	q.updated.Add(newQuota.Namespace+"/"+newQuota.Name, out)
	return nil
}

func (q *quotaAccess) GetQuotas(namespace string) ([]corev1.ResourceQuota, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	objs, err := q.quotas.List(ctx, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]corev1.ResourceQuota, 0, len(objs))
	for _, o := range objs {
		rq, ok := o.(*corev1.ResourceQuota)
		if !ok {
			continue
		}
		out = append(out, *q.newest(rq))
	}
	return out, nil
}

// newest is the cached quota, or the one this server wrote if that is
// newer.
func (q *quotaAccess) newest(rq *corev1.ResourceQuota) *corev1.ResourceQuota {
	key := rq.Namespace + "/" + rq.Name
	v, ok := q.updated.Get(key)
	if !ok {
		return rq
	}
	written := v.(*corev1.ResourceQuota)
	if written.UID != rq.UID || resourceVersion(rq) >= resourceVersion(written) {
		q.updated.Remove(key)
		return rq
	}
	return written
}

func resourceVersion(rq *corev1.ResourceQuota) uint64 {
	n, _ := strconv.ParseUint(rq.ResourceVersion, 10, 64)
	return n
}
