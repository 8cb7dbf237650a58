package proxy

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// benchObjects builds n Services with 3 ready endpoints each, as API
// objects.
func benchObjects(n int) ([]*v1.Service, [][]*discovery.EndpointSlice) {
	svcs := make([]*v1.Service, n)
	slices := make([][]*discovery.EndpointSlice, n)
	for i := 0; i < n; i++ {
		ip := fmt.Sprintf("10.43.%d.%d", i/250, i%250+1)
		svc, sl := apiService(fmt.Sprintf("svc-%d", i), ip, 80, 8080)
		for j := 0; j < 3; j++ {
			k := i*3 + j
			addEP(sl, fmt.Sprintf("10.42.%d.%d", k/250, k%250+1), true)
		}
		svcs[i], slices[i] = svc, []*discovery.EndpointSlice{sl}
	}
	return svcs, slices
}

func benchState(svcs []*v1.Service, slices [][]*discovery.EndpointSlice) *state {
	st := &state{}
	for i, svc := range svcs {
		st.Ports = append(st.Ports, servicePorts(svc, slices[i])...)
	}
	return st
}

// BenchmarkFullSync measures a full sync (API objects -> model -> ruleset
// -> one nftables transaction that rebuilds every proxy object), as done
// at start-up and on every SyncPeriod, for 1,000 and 5,000 Services × 3
// endpoints in a fresh netns.
func BenchmarkFullSync(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			ns := newTestNS(b)
			p := ns.proxier("192.168.99.1")
			svcs, slices := benchObjects(n)
			t0 := time.Now()
			if err := p.syncState(benchState(svcs, slices)); err != nil {
				b.Fatal(err)
			}
			first := time.Since(t0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.ap.synced = false // force the full rebuild
				if err := p.syncState(benchState(svcs, slices)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(first.Microseconds())/1000, "first-sync-ms")
		})
	}
}

// BenchmarkEndpointChange measures one endpoint change (an endpoint turns
// not ready, then ready again) reaching the rules with 5,000 Services in
// place: model -> ruleset -> diff -> one transaction.
func BenchmarkEndpointChange(b *testing.B) {
	ns := newTestNS(b)
	p := ns.proxier("192.168.99.1")
	svcs, slices := benchObjects(5000)
	if err := p.syncState(benchState(svcs, slices)); err != nil {
		b.Fatal(err)
	}
	ep := &slices[2500][0].Endpoints[1]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ready := i%2 == 1
		ep.Conditions.Ready, ep.Conditions.Serving = &ready, &ready
		if err := p.syncState(benchState(svcs, slices)); err != nil {
			b.Fatal(err)
		}
	}
}
