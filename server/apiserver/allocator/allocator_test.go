package allocator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelp-project/kelp/embedded/etcd"
	"github.com/kelp-project/kelp/server/apiserver/storage"
)

func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e, err := etcd.Start(ctx, t.TempDir())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); e.Close() })
	return e.Client
}

func newServices(t *testing.T, client *clientv3.Client, cidr, ports string) *Services {
	t.Helper()
	s, err := NewServices(context.Background(), client, cidr, ports)
	if err != nil {
		t.Fatal(err)
	}
	s.UseIPAddresses(ipAddressStore(t, client))
	return s
}

// ipAddressStore is the IPAddress storage the API server opens.
func ipAddressStore(t *testing.T, client *clientv3.Client) *storage.Store {
	t.Helper()
	st, err := storage.New(t.Context(), storage.Config{
		Client: client, Resource: schema.GroupResource{Group: "networking.k8s.io", Resource: "ipaddresses"},
		Prefix: "/registry/ipaddresses/", Kind: networkingv1.SchemeGroupVersion.WithKind("IPAddress"),
		NewFunc: func() runtime.Object { return &networkingv1.IPAddress{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Stop)
	return st
}

// ipHolder reads which Service ("namespace/name") the IPAddress ip names
// as its parent ("" when there is no IPAddress).
func ipHolder(t *testing.T, s *Services, ip string) string {
	t.Helper()
	obj, err := s.ips.Get(context.Background(), s.ips.Key("", ip))
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	a := obj.(*networkingv1.IPAddress)
	if a.Spec.ParentRef == nil || a.Spec.ParentRef.Resource != "services" || a.Spec.ParentRef.Group != "" {
		t.Fatalf("IPAddress %s has parentRef %+v, not a Service", ip, a.Spec.ParentRef)
	}
	if a.Labels[networkingv1.LabelManagedBy] != ManagedBy || a.Labels[networkingv1.LabelIPAddressFamily] != "IPv4" {
		t.Errorf("IPAddress %s labels %v", ip, a.Labels)
	}
	return a.Spec.ParentRef.Namespace + "/" + a.Spec.ParentRef.Name
}

// holder reads who holds a value in etcd ("" when free).
func holder(t *testing.T, client *clientv3.Client, key string) string {
	t.Helper()
	resp, err := client.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

func TestNewServicesRanges(t *testing.T) {
	for _, tc := range []struct {
		cidr, ports string
		wantErr     string
	}{
		{"10.43.0.0/16", "30000-32767", ""},
		{"10.43.0.0/30", "30000-30000", ""},
		{"10.0.0.0/12", "1-65535", ""},
		{"10.43.0.5/24", "30000-32767", ""}, // host bits are masked
		{"10.43.0.0/31", "30000-32767", "service CIDR 10.43.0.0/31 must be between /12 and /30"},
		{"10.43.0.0/32", "30000-32767", "service CIDR 10.43.0.0/32 must be between /12 and /30"},
		{"10.0.0.0/11", "30000-32767", "service CIDR 10.0.0.0/11 must be between /12 and /30"},
		{"fd00::/112", "30000-32767", `invalid service CIDR "fd00::/112": an IPv4 CIDR is required`},
		{"10.43.0.0", "30000-32767", `invalid service CIDR "10.43.0.0": an IPv4 CIDR is required`},
		{"10.43.0.0/16", "30000", `invalid node port range "30000"`},
		{"10.43.0.0/16", "32767-30000", `invalid node port range "32767-30000"`},
		{"10.43.0.0/16", "0-100", `invalid node port range "0-100"`},
		{"10.43.0.0/16", "30000-65536", `invalid node port range "30000-65536"`},
		{"10.43.0.0/16", "a-b", `invalid node port range "a-b"`},
	} {
		_, err := NewServices(context.Background(), nil, tc.cidr, tc.ports)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s %s: %v", tc.cidr, tc.ports, err)
		case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
			t.Errorf("%s %s: err = %v, want %q", tc.cidr, tc.ports, err, tc.wantErr)
		}
	}
}

func TestFirstAndNthIP(t *testing.T) {
	for _, tc := range []struct{ cidr, first, tenth string }{
		{"10.43.0.0/16", "10.43.0.1", "10.43.0.10"},
		{"10.96.0.0/12", "10.96.0.1", "10.96.0.10"},
		{"192.168.7.0/24", "192.168.7.1", "192.168.7.10"},
	} {
		s, err := NewServices(context.Background(), nil, tc.cidr, "30000-32767")
		if err != nil {
			t.Fatal(err)
		}
		if got := s.FirstIP(); got != tc.first {
			t.Errorf("%s: FirstIP = %s, want %s (the network address is never handed out)", tc.cidr, got, tc.first)
		}
		if got := s.NthIP(9); got != tc.tenth {
			t.Errorf("%s: NthIP(9) = %s, want %s", tc.cidr, got, tc.tenth)
		}
		if s.NthIP(0) != s.FirstIP() {
			t.Errorf("%s: NthIP(0) != FirstIP", tc.cidr)
		}
	}
}

func TestAllocateIP(t *testing.T) {
	client := startEtcd(t)
	ctx := context.Background()
	s := newServices(t, client, "10.43.0.0/24", "30000-32767")
	prefix := netip.MustParsePrefix("10.43.0.0/24")
	// Dynamic picks leave the lower part of the range (the first 16 of a
	// /24) to static picks: FirstIP for default/kubernetes, NthIP(9) for DNS.
	static := netip.MustParseAddr("10.43.0.16")
	// The last usable address below the broadcast address is fine, and
	// held, never handed out again.
	if _, _, err := s.AllocateIP(ctx, "10.43.0.254", "ns/edge"); err != nil {
		t.Errorf("10.43.0.254: %v", err)
	}
	seen := map[string]bool{"10.43.0.254": true}
	for i := range 40 {
		ip, _, err := s.AllocateIP(ctx, "", fmt.Sprintf("ns/svc%d", i))
		if err != nil {
			t.Fatal(err)
		}
		a := netip.MustParseAddr(ip)
		switch {
		case seen[ip]:
			t.Fatalf("%s handed out twice", ip)
		case !prefix.Contains(a):
			t.Fatalf("%s outside %s", ip, prefix)
		case ip == "10.43.0.0" || ip == "10.43.0.255":
			t.Fatalf("network or broadcast address %s handed out", ip)
		case ip == s.FirstIP() || ip == s.NthIP(9) || !static.Less(a):
			t.Fatalf("dynamic pick %s is in the static part of the range", ip)
		}
		seen[ip] = true
		if got := ipHolder(t, s, ip); got != fmt.Sprintf("ns/svc%d", i) {
			t.Fatalf("%s recorded for %q", ip, got)
		}
	}

	// A requested address.
	if ip, fresh, err := s.AllocateIP(ctx, s.FirstIP(), "default/kubernetes"); err != nil || ip != "10.43.0.1" || !fresh {
		t.Fatalf("FirstIP: %s, %v", ip, err)
	}
	// The same owner again (a retried write) succeeds.
	if _, fresh, err := s.AllocateIP(ctx, "10.43.0.1", "default/kubernetes"); err != nil || fresh {
		t.Fatalf("same owner again: fresh %v, %v; want held already, so a failed write's undo leaves it", fresh, err)
	}
	_, _, err := s.AllocateIP(ctx, "10.43.0.1", "ns/other")
	var allocated ErrAllocated
	if !errors.As(err, &allocated) || allocated.Value != "10.43.0.1" {
		t.Fatalf("taken address: err = %v, want ErrAllocated", err)
	}
	if err.Error() != "provided 10.43.0.1 is already allocated" {
		t.Errorf("message %q", err)
	}

	for _, ip := range []string{"10.43.0.0", "10.43.0.255", "10.43.1.1", "10.44.0.1", "not-an-ip", "fd00::1"} {
		_, _, err := s.AllocateIP(ctx, ip, "ns/other")
		var oor ErrOutOfRange
		if !errors.As(err, &oor) {
			t.Errorf("%s: err = %v, want ErrOutOfRange", ip, err)
			continue
		}
		// (A malformed address's message: TestOutOfRangeMessageOfMalformedIP.)
		if want := "provided " + ip + " is not in the valid range. The range of valid IPs is 10.43.0.0/24"; ip != "not-an-ip" && err.Error() != want {
			t.Errorf("%s: message %q, want %q", ip, err, want)
		}
		if got := ipHolder(t, s, ip); got != "" {
			t.Errorf("%s: recorded for %q", ip, got)
		}
	}
}

func TestReleaseIP(t *testing.T) {
	client := startEtcd(t)
	ctx := context.Background()
	s := newServices(t, client, "10.43.0.0/16", "30000-32767")
	if _, _, err := s.AllocateIP(ctx, "10.43.0.50", "ns/a"); err != nil {
		t.Fatal(err)
	}
	// Someone else's release does nothing.
	s.ReleaseIP(ctx, "10.43.0.50", "ns/b")
	if got := ipHolder(t, s, "10.43.0.50"); got != "ns/a" {
		t.Fatalf("after a non-owner's release, held by %q", got)
	}
	if _, _, err := s.AllocateIP(ctx, "10.43.0.50", "ns/b"); !errors.As(err, new(ErrAllocated)) {
		t.Fatalf("after a non-owner's release: %v, want ErrAllocated", err)
	}
	// The owner's release frees it.
	s.ReleaseIP(ctx, "10.43.0.50", "ns/a")
	if got := ipHolder(t, s, "10.43.0.50"); got != "" {
		t.Fatalf("after release, held by %q", got)
	}
	if _, _, err := s.AllocateIP(ctx, "10.43.0.50", "ns/b"); err != nil {
		t.Fatalf("after release: %v", err)
	}
	// Releasing what nobody holds is harmless.
	s.ReleaseIP(ctx, "10.43.0.51", "ns/a")
}

func TestAllocatePort(t *testing.T) {
	client := startEtcd(t)
	ctx := context.Background()
	s := newServices(t, client, "10.43.0.0/16", "30000-32767")
	seen := map[int]bool{}
	for i := range 40 {
		p, _, err := s.AllocatePort(ctx, 0, fmt.Sprintf("ns/svc%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] || p < 30000 || p > 32767 {
			t.Fatalf("port %d: duplicate or out of range", p)
		}
		seen[p] = true
	}
	// Avoid colliding with a dynamic pick above.
	want := 30000
	for seen[want] {
		want++
	}
	if p, _, err := s.AllocatePort(ctx, want, "ns/a"); err != nil || p != want {
		t.Fatalf("requested %d: %d, %v", want, p, err)
	}
	if _, fresh, err := s.AllocatePort(ctx, want, "ns/a"); err != nil || fresh {
		t.Fatalf("same owner again: fresh %v, %v; want held already", fresh, err)
	}
	_, _, err := s.AllocatePort(ctx, want, "ns/b")
	var allocated ErrAllocated
	if !errors.As(err, &allocated) || allocated.Value != strconv.Itoa(want) {
		t.Fatalf("taken port: %v, want ErrAllocated", err)
	}
	for _, p := range []int{29999, 32768, -1, 65535} {
		_, _, err := s.AllocatePort(ctx, p, "ns/b")
		var oor ErrOutOfRange
		if !errors.As(err, &oor) {
			t.Errorf("%d: err = %v, want ErrOutOfRange", p, err)
			continue
		}
		if want := fmt.Sprintf("provided %d is not in the valid range. The range of valid ports is 30000-32767", p); err.Error() != want {
			t.Errorf("%d: message %q, want %q", p, err, want)
		}
	}
	// Boundaries are in range.
	for _, p := range []int{30000, 32767} {
		if p == want || seen[p] {
			continue
		}
		if _, _, err := s.AllocatePort(ctx, p, "ns/edge"); err != nil {
			t.Errorf("%d: %v", p, err)
		}
	}

	s.ReleasePort(ctx, want, "ns/b")
	if got := holder(t, client, portPrefix+strconv.Itoa(want)); got != "ns/a" {
		t.Fatalf("after a non-owner's release, held by %q", got)
	}
	s.ReleasePort(ctx, want, "ns/a")
	if got := holder(t, client, portPrefix+strconv.Itoa(want)); got != "" {
		t.Fatalf("after release, held by %q", got)
	}
	if _, _, err := s.AllocatePort(ctx, want, "ns/b"); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

func TestExhaustion(t *testing.T) {
	client := startEtcd(t)
	ctx := context.Background()
	// A /29 has 6 usable addresses (.1 to .6); too small to set aside a
	// static part, so dynamic picks use all of it.
	s := newServices(t, client, "10.96.0.0/29", "30000-30002")
	got := map[string]bool{}
	for i := range 6 {
		ip, _, err := s.AllocateIP(ctx, "", fmt.Sprintf("ns/svc%d", i))
		if err != nil {
			t.Fatalf("address %d of 6: %v", i+1, err)
		}
		got[ip] = true
	}
	for i := 1; i <= 6; i++ {
		if ip := fmt.Sprintf("10.96.0.%d", i); !got[ip] {
			t.Errorf("%s not handed out; got %v", ip, got)
		}
	}
	_, _, err := s.AllocateIP(ctx, "", "ns/one-more")
	var full ErrFull
	if !errors.As(err, &full) || err.Error() != "range 10.96.0.0/29 is full" {
		t.Fatalf("7th address: err = %v, want ErrFull", err)
	}
	// A release makes room again.
	ip := ""
	for k := range got {
		ip = k
		break
	}
	s.ReleaseIP(ctx, ip, "ns/nobody")
	if _, _, err := s.AllocateIP(ctx, "", "ns/one-more"); !errors.As(err, &full) {
		t.Fatalf("after a non-owner's release: %v, want ErrFull", err)
	}
	owner := ipHolder(t, s, ip)
	s.ReleaseIP(ctx, ip, owner)
	if again, _, err := s.AllocateIP(ctx, "", "ns/one-more"); err != nil || again != ip {
		t.Fatalf("after release: %s, %v; want %s", again, err, ip)
	}

	ports := map[int]bool{}
	for i := range 3 {
		p, _, err := s.AllocatePort(ctx, 0, fmt.Sprintf("ns/svc%d", i))
		if err != nil {
			t.Fatalf("port %d of 3: %v", i+1, err)
		}
		ports[p] = true
	}
	if len(ports) != 3 || !ports[30000] || !ports[30001] || !ports[30002] {
		t.Errorf("ports %v, want 30000-30002", ports)
	}
	_, _, err = s.AllocatePort(ctx, 0, "ns/one-more")
	if !errors.As(err, &full) || err.Error() != "range 30000-30002 is full" {
		t.Fatalf("4th port: err = %v, want ErrFull", err)
	}
}

// Two API servers (two Services on one etcd) allocating at once never hand
// out one address twice, and together fill the range exactly.
func TestConcurrentAllocation(t *testing.T) {
	client := startEtcd(t)
	ctx := context.Background()
	a := newServices(t, client, "10.96.0.0/27", "30000-30019")
	b := newServices(t, client, "10.96.0.0/27", "30000-30019")
	var mu sync.Mutex
	ips, ports := map[string]string{}, map[int]string{}
	var fullIP, fullPort int
	var wg sync.WaitGroup
	for i := range 34 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			owner := fmt.Sprintf("ns/svc%d", i)
			ip, _, ipErr := s.AllocateIP(ctx, "", owner)
			p, _, portErr := s.AllocatePort(ctx, 0, owner)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.As(ipErr, new(ErrFull)):
				fullIP++
			case ipErr != nil:
				t.Errorf("%s: %v", owner, ipErr)
			case ips[ip] != "":
				t.Errorf("%s handed to %s and %s", ip, ips[ip], owner)
			default:
				ips[ip] = owner
			}
			switch {
			case errors.As(portErr, new(ErrFull)):
				fullPort++
			case portErr != nil:
				t.Errorf("%s: %v", owner, portErr)
			case ports[p] != "":
				t.Errorf("port %d handed to %s and %s", p, ports[p], owner)
			default:
				ports[p] = owner
			}
		}()
	}
	wg.Wait()
	if len(ips) != 30 || fullIP != 4 {
		t.Errorf("%d addresses, %d full; want 30 and 4", len(ips), fullIP)
	}
	if len(ports) != 20 || fullPort != 14 {
		t.Errorf("%d ports, %d full; want 20 and 14", len(ports), fullPort)
	}
	for ip, owner := range ips {
		if got := ipHolder(t, a, ip); got != owner {
			t.Errorf("%s recorded for %q, handed to %q", ip, got, owner)
		}
	}
}

func TestRepair(t *testing.T) {
	client := startEtcd(t)
	ctx := context.Background()
	s := newServices(t, client, "10.43.0.0/16", "30000-32767")
	for _, c := range []struct {
		owner string
		ips   []string
		ports []int
	}{
		{"ns/kept", []string{"10.43.0.10"}, []int{30010, 30011}},
		{"ns/changed", []string{"10.43.0.20"}, []int{30020}}, // now uses 10.43.0.21 and no node port
		{"ns/gone", []string{"10.43.0.30"}, []int{30030}},
		{"ns/previous", []string{"10.43.0.40"}, nil}, // the address moved to ns/next
	} {
		for _, ip := range c.ips {
			if _, _, err := s.AllocateIP(ctx, ip, c.owner); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range c.ports {
			if _, _, err := s.AllocatePort(ctx, p, c.owner); err != nil {
				t.Fatal(err)
			}
		}
	}
	inUse := map[string][]string{
		"ns/kept":    {"10.43.0.10", "30010", "30011"},
		"ns/changed": {"10.43.0.21"},
		"ns/next":    {"10.43.0.40"},
		"ns/new":     {"10.43.0.50", "30050"}, // in use, never recorded (a crash)
	}
	user := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.43.0.60"},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "gateways", Name: "gw"}}}
	if _, err := s.ips.Create(ctx, s.ips.Key("", "10.43.0.60"), user, false); err != nil {
		t.Fatal(err)
	}
	// What an older kelp recorded for a cluster IP.
	if _, err := client.Put(ctx, legacyIPPrefix+"10.43.0.10", "ns/kept"); err != nil {
		t.Fatal(err)
	}
	if err := s.Repair(ctx, inUse); err != nil {
		t.Fatal(err)
	}
	for ip, owner := range map[string]string{
		"10.43.0.10": "ns/kept", "10.43.0.20": "", "10.43.0.21": "ns/changed",
		"10.43.0.30": "", "10.43.0.40": "ns/next", "10.43.0.50": "ns/new",
	} {
		if got := ipHolder(t, s, ip); got != owner {
			t.Errorf("%s held by %q, want %q", ip, got, owner)
		}
	}
	for _, tc := range []struct{ key, owner string }{
		{portPrefix + "30010", "ns/kept"},
		{portPrefix + "30011", "ns/kept"},
		{portPrefix + "30020", ""},
		{portPrefix + "30030", ""},
		{portPrefix + "30050", "ns/new"},
	} {
		if got := holder(t, client, tc.key); got != tc.owner {
			t.Errorf("%s held by %q, want %q", tc.key, got, tc.owner)
		}
	}
	if _, err := s.ips.Get(ctx, s.ips.Key("", "10.43.0.60")); err != nil {
		t.Errorf("a user's IPAddress after repair: %v", err)
	}
	for prefix, want := range map[string]int64{portPrefix: 3, legacyIPPrefix: 0, "/registry/ipaddresses/": 5} {
		resp, err := client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count != want {
			t.Errorf("%d keys under %s after repair, want %d", resp.Count, prefix, want)
		}
	}
	// Freed values can be taken again; kept ones cannot, nor the user's.
	if _, _, err := s.AllocateIP(ctx, "10.43.0.30", "ns/late"); err != nil {
		t.Errorf("freed address: %v", err)
	}
	if _, _, err := s.AllocatePort(ctx, 30010, "ns/late"); !errors.As(err, new(ErrAllocated)) {
		t.Errorf("kept port: %v, want ErrAllocated", err)
	}
	if _, _, err := s.AllocateIP(ctx, "10.43.0.60", "ns/late"); !errors.As(err, new(ErrAllocated)) {
		t.Errorf("a user's IPAddress: %v, want ErrAllocated", err)
	}
	// Repair is idempotent.
	for range 2 {
		if err := s.Repair(ctx, map[string][]string{"ns/kept": {"10.43.0.10", "30010", "30011"}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := ipHolder(t, s, "10.43.0.30"); got != "" {
		t.Errorf("unlisted address kept by %q", got)
	}
	// Nothing in use frees everything the allocator made.
	if err := s.Repair(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for prefix, want := range map[string]int64{"/registry/ranges/": 0, "/registry/ipaddresses/": 1} {
		resp, err := client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count != want {
			t.Errorf("after repairing to nothing: %v keys under %s, want %d (%v)", resp.Count, prefix, want, err)
		}
	}
}

// An IPAddress a user creates reserves its IP: neither a request for it
// nor a dynamic pick gets it, and releasing it as a Service does nothing.
func TestUserIPAddressReservesIP(t *testing.T) {
	client := startEtcd(t)
	ctx := context.Background()
	s := newServices(t, client, "10.96.0.0/30", "30000-30002") // .1 and .2
	user := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.96.0.1"},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "ns", Name: "other"}}}
	if _, err := s.ips.Create(ctx, s.ips.Key("", "10.96.0.1"), user, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AllocateIP(ctx, "10.96.0.1", "ns/a"); !errors.As(err, new(ErrAllocated)) {
		t.Fatalf("requested reserved IP: %v, want ErrAllocated", err)
	}
	if ip, _, err := s.AllocateIP(ctx, "", "ns/a"); err != nil || ip != "10.96.0.2" {
		t.Fatalf("dynamic pick: %s, %v; want 10.96.0.2", ip, err)
	}
	if _, _, err := s.AllocateIP(ctx, "", "ns/b"); !errors.As(err, new(ErrFull)) {
		t.Fatalf("third pick: %v, want ErrFull", err)
	}
	s.ReleaseIP(ctx, "10.96.0.1", "ns/a")
	if _, err := s.ips.Get(ctx, s.ips.Key("", "10.96.0.1")); err != nil {
		t.Fatalf("a non-holder's release deleted the IPAddress: %v", err)
	}
	// The Service the user named holds it, as a retried write would.
	if _, _, err := s.AllocateIP(ctx, "10.96.0.1", "ns/other"); err != nil {
		t.Fatalf("the named parent: %v", err)
	}
}
