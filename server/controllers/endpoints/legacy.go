package endpoints

import (
	"context"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kelp-project/kelp/server/controllers"
)

type subset struct {
	ports           []resolvedPort
	ready, notReady []corev1.EndpointAddress
}

// buildSubsets is the Endpoints view of pods: one subset per distinct
// resolved port list, addresses sorted so that equal inputs give equal
// objects and resyncs compare equal. Terminating pods are left out: old
// consumers of Endpoints cannot tell them from ready ones. With
// publishNotReadyAddresses every pod, terminating or not, is an address.
// The result holds at most MaxEndpointsAddresses addresses, ready ones
// kept in preference; truncated says whether any were cut.
func buildSubsets(svc *corev1.Service, pods []*corev1.Pod) (out []corev1.EndpointSubset, truncated bool) {
	family := serviceFamilies(svc)[0]
	publish := svc.Spec.PublishNotReadyAddresses
	// A headless Service without ports still resolves to its pods in DNS,
	// so its pods are published with no ports; otherwise a pod with none
	// of the Service's ports has nothing to offer it.
	portless := len(svc.Spec.Ports) == 0 && svc.Spec.ClusterIP == corev1.ClusterIPNone
	subs := map[string]*subset{}
	for _, pod := range pods {
		ip := podIP(pod, family)
		if ip == "" || (pod.DeletionTimestamp != nil && !publish) {
			continue
		}
		ports := podPorts(svc, pod)
		if len(ports) == 0 && !portless {
			continue
		}
		k := portsKey(ports)
		s := subs[k]
		if s == nil {
			s = &subset{ports: ports}
			subs[k] = s
		}
		addr := legacyAddress(svc, pod, ip)
		if publish || podutils.IsPodReady(pod) {
			s.ready = append(s.ready, addr)
		} else {
			s.notReady = append(s.notReady, addr)
		}
	}
	keys := slices.Sorted(maps.Keys(subs))
	budget := MaxEndpointsAddresses
	take := func(addrs []corev1.EndpointAddress) []corev1.EndpointAddress {
		slices.SortFunc(addrs, func(a, b corev1.EndpointAddress) int {
			if c := strings.Compare(a.IP, b.IP); c != 0 {
				return c
			}
			return strings.Compare(a.TargetRef.Name, b.TargetRef.Name)
		})
		if len(addrs) > budget {
			truncated = true
			addrs = addrs[:budget]
		}
		budget -= len(addrs)
		return addrs
	}
	for _, k := range keys {
		subs[k].ready = take(subs[k].ready)
	}
	for _, k := range keys {
		subs[k].notReady = take(subs[k].notReady)
	}
	for _, k := range keys {
		s := subs[k]
		if len(s.ready)+len(s.notReady) == 0 {
			continue
		}
		out = append(out, corev1.EndpointSubset{Addresses: s.ready, NotReadyAddresses: s.notReady, Ports: legacyPorts(s.ports)})
	}
	return out, truncated
}

// endpointsLabels are the Service's labels, with the headless marker
// reflecting the Service rather than whatever the Service's labels say.
func endpointsLabels(svc *corev1.Service) map[string]string {
	out := maps.Clone(svc.Labels)
	if out == nil {
		out = map[string]string{}
	}
	delete(out, corev1.IsHeadlessService)
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		out[corev1.IsHeadlessService] = ""
	}
	return out
}

func (c *Controller) syncEndpoints(ctx context.Context, svc *corev1.Service, pods []*corev1.Pod) error {
	subsets, truncated := buildSubsets(svc, pods)
	wantLabels := endpointsLabels(svc)
	key := svc.Namespace + "/" + svc.Name
	cur, err := c.endpoints.Endpoints(svc.Namespace).Get(svc.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	cached := map[string]string{}
	if err == nil {
		cached[cur.Name] = cur.ResourceVersion
	}
	if c.pendingEndpoints.stale(key, cached) {
		return errStale
	}
	if err != nil {
		ep := &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, Labels: wantLabels},
			Subsets:    subsets,
		}
		if truncated {
			ep.Annotations = map[string]string{OverCapacityAnnotation: "truncated"}
		}
		// AlreadyExists means someone else created it; the retry sees
		// the object and updates it.
		_, err = c.client.CoreV1().Endpoints(svc.Namespace).Create(ctx, ep, metav1.CreateOptions{})
		if err == nil {
			c.pendingEndpoints.record(key, ep.Name, "create", "")
		}
		if err != nil && controllers.NamespaceTerminating(err) {
			return nil
		}
		return err
	}
	v, marked := cur.Annotations[OverCapacityAnnotation]
	annotationOK := marked == truncated && (!marked || v == "truncated")
	if annotationOK && labels.Equals(cur.Labels, wantLabels) && apiequality.Semantic.DeepEqual(cur.Subsets, subsets) {
		return nil
	}
	ep := cur.DeepCopy()
	ep.Labels, ep.Subsets = wantLabels, subsets
	if truncated {
		if ep.Annotations == nil {
			ep.Annotations = map[string]string{}
		}
		ep.Annotations[OverCapacityAnnotation] = "truncated"
	} else {
		delete(ep.Annotations, OverCapacityAnnotation)
	}
	updated, err := c.client.CoreV1().Endpoints(svc.Namespace).Update(ctx, ep, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	if updated.ResourceVersion != cur.ResourceVersion {
		c.pendingEndpoints.record(key, ep.Name, "update", cur.ResourceVersion)
	}
	return nil
}

// deleteEndpoints runs for a Service that no longer exists. It does not
// consult the cache: an Endpoints object created just before the Service
// went away may not be in it yet.
func (c *Controller) deleteEndpoints(ctx context.Context, ns, name string) error {
	err := c.client.CoreV1().Endpoints(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
