package lab

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/util/podutils"
)

// Timeline is seed 000's "a node dies" sequence as it happened. Every
// figure is the time since the node was powered off; each is when a poll
// (every 100 ms) first saw the step.
type Timeline struct {
	LastRenew     time.Duration // the node's last Lease renewal (≤ 0)
	NotReady      time.Duration // the node's Ready condition no longer True
	PodsNotReady  time.Duration // its pods' Ready condition False
	EndpointsGone time.Duration // its pods out of the Service's ready endpoints
	Evicted       time.Duration // its pods marked for deletion (the taint's toleration ran out)
	Replaced      time.Duration // as many Ready pods as before, none on the dead node

	// The ClusterIP as a client on a surviving node saw it: requests
	// started, those that failed, and when the first and last failing
	// ones started.
	Requests, Failures  int
	FailFirst, FailLast time.Duration
}

func (t Timeline) String() string {
	return fmt.Sprintf("last lease renewal %v, node NotReady +%v, pods not Ready +%v, out of endpoints +%v, evicted +%v, replaced +%v; "+
		"ClusterIP: %d/%d requests failed, from +%v to +%v",
		t.LastRenew.Round(time.Millisecond), t.NotReady.Round(time.Millisecond), t.PodsNotReady.Round(time.Millisecond),
		t.EndpointsGone.Round(time.Millisecond), t.Evicted.Round(time.Millisecond), t.Replaced.Round(time.Millisecond),
		t.Failures, t.Requests, t.FailFirst.Round(time.Millisecond), t.FailLast.Round(time.Millisecond))
}

// probers is how many clients request the ClusterIP at once: a failing
// request lasts the whole timeout, so several give the window's edges a
// finer resolution.
const probers = 4

// NodeDeath powers victim off while clients on the prober node request the
// Service's ClusterIP, and records the timeline until the Service's pods
// (those matching selector in namespace) are all replaced on the other
// nodes. The node stays off.
func (l *Lab) NodeDeath(ctx context.Context, victim, prober, namespace, service, selector string, probeTimeout time.Duration) (Timeline, error) {
	var tl Timeline
	cs := l.Client
	svc, err := cs.CoreV1().Services(namespace).Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		return tl, err
	}
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port))) + "/"
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return tl, err
	}
	want := 0
	victimIPs := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !podutils.IsPodReady(p) {
			return tl, fmt.Errorf("pod %s is not Ready before the node dies", p.Name)
		}
		want++
		if p.Spec.NodeName == victim {
			victimIPs[p.Status.PodIP] = true
		}
	}
	if len(victimIPs) == 0 {
		return tl, fmt.Errorf("no pod of %s runs on %s", selector, victim)
	}

	// The clients run from before the kill to shortly after the pods are
	// replaced; a failure before the kill means the cluster was not
	// healthy and the figures would mean nothing.
	type sample struct {
		at time.Time
		ok bool
	}
	var mu sync.Mutex
	var samples []sample
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := l.HTTPClient(prober, probeTimeout)
	for range probers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				resp, err := client.Get(url)
				if err == nil {
					resp.Body.Close()
				}
				mu.Lock()
				samples = append(samples, sample{start, err == nil && resp.StatusCode == 200})
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	stopProbers := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopProbers()
	time.Sleep(time.Second)

	killed := time.Now()
	if err := l.Kill(victim); err != nil {
		return tl, err
	}
	// Read after the kill: a renewal in flight at the kill may still land.
	lease, err := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, victim, metav1.GetOptions{})
	if err != nil || lease.Spec.RenewTime == nil {
		return tl, fmt.Errorf("the dead node's Lease: %v", err)
	}
	tl.LastRenew = lease.Spec.RenewTime.Sub(killed)
	seen := func(d *time.Duration, cond bool) {
		if cond && *d == 0 {
			*d = time.Since(killed)
		}
	}
	for tl.Replaced == 0 {
		if ctx.Err() != nil {
			return tl, fmt.Errorf("the node's death did not complete: %s: %w", tl, ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
		node, err := cs.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		if err != nil {
			continue
		}
		ready := false
		for _, c := range node.Status.Conditions {
			ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}
		seen(&tl.NotReady, !ready)
		pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			continue
		}
		victimReady, victimLive, replacements := 0, 0, 0
		for i := range pods.Items {
			p := &pods.Items[i]
			switch {
			case p.Spec.NodeName == victim:
				if podutils.IsPodReady(p) {
					victimReady++
				}
				if p.DeletionTimestamp == nil {
					victimLive++
				}
			case p.DeletionTimestamp == nil && podutils.IsPodReady(p):
				replacements++
			}
		}
		seen(&tl.PodsNotReady, victimReady == 0)
		seen(&tl.Evicted, victimLive == 0)
		slices, err := cs.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			continue
		}
		inEndpoints := false
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
					continue
				}
				for _, a := range ep.Addresses {
					inEndpoints = inEndpoints || victimIPs[a]
				}
			}
		}
		seen(&tl.EndpointsGone, !inEndpoints)
		seen(&tl.Replaced, replacements == want && tl.Evicted != 0)
	}
	time.Sleep(2 * time.Second)
	stopProbers()
	for _, s := range samples {
		tl.Requests++
		if s.ok {
			continue
		}
		if s.at.Before(killed) {
			return tl, fmt.Errorf("the ClusterIP failed from %s before the node died", prober)
		}
		tl.Failures++
		d := s.at.Sub(killed)
		if tl.Failures == 1 || d < tl.FailFirst {
			tl.FailFirst = d
		}
		tl.FailLast = max(tl.FailLast, d)
	}
	return tl, nil
}
