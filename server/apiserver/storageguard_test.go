package apiserver

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kelp-project/kelp/embedded/etcd"
	"github.com/kelp-project/kelp/server/apiserver/auth"
	"github.com/kelp-project/kelp/server/apiserver/registry"
	"github.com/kelp-project/kelp/server/apiserver/storage"
)

const mib = 1 << 20

func TestParseMinFree(t *testing.T) {
	for in, want := range map[string]MinFree{
		"5%":         {Percent: 5},
		"256Mi":      {Bytes: 256 * mib},
		"5%,256Mi":   {Percent: 5, Bytes: 256 * mib},
		"1G, 2.5%":   {Percent: 2.5, Bytes: 1e9},
		"0":          {},
		"0.5%":       {Percent: 0.5},
		"1073741824": {Bytes: 1 << 30},
	} {
		got, err := ParseMinFree(in)
		if err != nil || got != want {
			t.Errorf("ParseMinFree(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "0%", "100%", "-1Mi", "5%,6%", "1Mi,2Mi", "5%%", "NaN%"} {
		if _, err := ParseMinFree(in); err == nil || !strings.Contains(err.Error(), "--storage-min-free") {
			t.Errorf("ParseMinFree(%q): %v, want an error naming the flag", in, err)
		}
	}
	if s := (MinFree{Percent: 5, Bytes: 256 * mib}).String(); s != "5%,256Mi" {
		t.Errorf("String = %q", s)
	}
}

func TestLimits(t *testing.T) {
	def := MinFree{Percent: 5, Bytes: 256 * mib}
	floor := etcd.WALSegmentBytes + etcd.DatabaseReserve // what etcd needs to go on writing
	for _, c := range []struct {
		m                  MinFree
		total              uint64
		threshold, reserve uint64
	}{
		// A large disk: 256 MiB is the smaller; the reserve is etcd's floor.
		{def, 1 << 40, 256 * mib, floor},
		// A small one: 5% would be below etcd's floor, so the floor wins,
		// and the threshold is a WAL segment above it.
		{def, 300 * mib, floor + etcd.WALSegmentBytes, floor},
		// A large threshold: the reserve is a quarter of it.
		{MinFree{Percent: 50}, 100 << 30, 50 << 30, 50 << 30 / 4},
		{MinFree{}, 1 << 40, 0, 0},
	} {
		th, res := c.m.Limits(c.total)
		if th != c.threshold || res != c.reserve {
			t.Errorf("%v of %d: threshold %d reserve %d; want %d, %d", c.m, c.total, th, res, c.threshold, c.reserve)
		}
	}
}

// fakeDisk is a filesystem whose free space the test sets.
type fakeDisk struct{ free, total atomic.Uint64 }

func (d *fakeDisk) statfs(string) (uint64, uint64, error) { return d.free.Load(), d.total.Load(), nil }

func newGuard(free uint64) (*StorageGuard, *fakeDisk) {
	d := &fakeDisk{}
	d.free.Store(free)
	d.total.Store(1 << 40)
	g := &StorageGuard{Dir: "/var/lib/kelp", MinFree: MinFree{Percent: 5, Bytes: 256 * mib}, Statfs: d.statfs}
	g.poll()
	return g, d
}

var (
	pods   = &served{Resource: &registry.Resource{Subresources: []registry.Subresource{{Name: "exec", Kind: registry.KubeletSubresource}}}}
	nodes  = &served{Resource: &registry.Resource{}}
	review = &served{Resource: &registry.Resource{Review: true}}
	admin  = &auth.User{Name: "kelp-admin", Groups: []string{"system:masters"}}
	node1  = &auth.User{Name: "system:node:n1", Groups: []string{"system:nodes"}}
)

func admit(g *StorageGuard, method, path string, sv *served, u *auth.User) error {
	r := httptest.NewRequest(method, path, strings.NewReader("{}"))
	return g.Admit(r, parseRequest(r), sv, u)
}

func want507(t *testing.T, what string, err error) {
	t.Helper()
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusInsufficientStorage || se.ErrStatus.Reason != storage.StatusReasonInsufficientStorage {
		t.Fatalf("%s: %v, want a 507 InsufficientStorage", what, err)
	}
}

func TestGuardRefusesWritesBelowThreshold(t *testing.T) {
	g, disk := newGuard(1 << 30)
	if err := admit(g, "POST", "/api/v1/namespaces/default/configmaps", pods, admin); err != nil {
		t.Fatalf("create with 1 GiB free: %v", err)
	}
	disk.free.Store(200 * mib)
	g.poll()
	err := admit(g, "POST", "/api/v1/namespaces/default/configmaps", pods, admin)
	want507(t, "create with 200 MiB free", err)
	for _, s := range []string{"/var/lib/kelp", "200.0 MiB free", "below 256.0 MiB", "--storage-min-free 5%,256Mi"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err, s)
		}
	}
	want507(t, "update", admit(g, "PUT", "/api/v1/namespaces/default/configmaps/a", pods, admin))
	want507(t, "patch", admit(g, "PATCH", "/api/v1/namespaces/default/configmaps/a", pods, admin))
	want507(t, "a node's own Node (not its status)", admit(g, "PUT", "/api/v1/nodes/n1", nodes, node1))
	want507(t, "nodes/status by an administrator", admit(g, "PUT", "/api/v1/nodes/n1/status", nodes, admin))
	want507(t, "a Lease created", admit(g, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", nodes, node1))
	for _, ok := range []struct {
		what, method, path string
		sv                 *served
		u                  *auth.User
	}{
		{"get", "GET", "/api/v1/namespaces/default/configmaps/a", pods, admin},
		{"list", "GET", "/api/v1/namespaces/default/configmaps", pods, admin},
		{"watch", "GET", "/api/v1/namespaces/default/configmaps?watch=true", pods, admin},
		{"delete", "DELETE", "/api/v1/namespaces/default/configmaps/a", pods, admin},
		{"deletecollection", "DELETE", "/api/v1/namespaces/default/configmaps", pods, admin},
		{"node status", "PUT", "/api/v1/nodes/n1/status", nodes, node1},
		{"node status patch", "PATCH", "/api/v1/nodes/n1/status", nodes, node1},
		{"Lease renewal", "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", nodes, node1},
		{"namespace finalize", "PUT", "/api/v1/namespaces/fill/finalize", nodes, admin},
		{"exec (stores nothing)", "POST", "/api/v1/namespaces/default/pods/p/exec", pods, admin},
		{"a review (stores nothing)", "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review, admin},
	} {
		if err := admit(g, ok.method, ok.path, ok.sv, ok.u); err != nil {
			t.Errorf("%s with 200 MiB free: %v", ok.what, err)
		}
	}
	// Below the hard reserve even those are refused: etcd must keep room.
	disk.free.Store(50 * mib)
	g.poll()
	err = admit(g, "PUT", "/api/v1/nodes/n1/status", nodes, node1)
	want507(t, "node status with 50 MiB free", err)
	if !strings.Contains(err.Error(), "even node heartbeats and deletes") {
		t.Errorf("message %q does not say the reserve is reached", err)
	}
	want507(t, "delete with 50 MiB free", admit(g, "DELETE", "/api/v1/namespaces/default/configmaps/a", pods, admin))
	if err := admit(g, "GET", "/api/v1/namespaces/default/configmaps", pods, admin); err != nil {
		t.Errorf("list with 50 MiB free: %v", err)
	}
	// Space comes back: the next reading lets writes in again.
	disk.free.Store(10 << 30)
	g.poll()
	if err := admit(g, "POST", "/api/v1/namespaces/default/configmaps", pods, admin); err != nil {
		t.Errorf("create once space is back: %v", err)
	}
}

// Between readings, admitted writes count against the last one, so a
// burst cannot run past the threshold until the next poll.
func TestGuardCountsWritesBetweenReadings(t *testing.T) {
	g, _ := newGuard(256*mib + 1*mib)
	body := strings.Repeat("x", 100<<10)
	admitted := 0
	for i := 0; i < 100; i++ {
		r := httptest.NewRequest("POST", "/api/v1/namespaces/default/configmaps", strings.NewReader(body))
		if err := g.Admit(r, parseRequest(r), pods, admin); err != nil {
			want507(t, "create", err)
			break
		}
		admitted++
	}
	// Each costs its body twice (WAL and database) plus a page, 204 KiB:
	// after five, 4 KiB of the 1 MiB headroom is left, so a sixth is let in
	// and the seventh refused.
	if admitted != 6 {
		t.Fatalf("admitted %d writes of 100 KiB with 1 MiB above the threshold, want 6", admitted)
	}
}

// Until a reading succeeds nothing is refused, and "0" turns the guard off.
func TestGuardWithoutReading(t *testing.T) {
	g := &StorageGuard{Dir: "/x", MinFree: MinFree{Bytes: 1 << 40}, Statfs: func(string) (uint64, uint64, error) { return 0, 0, errors.New("no statfs") }}
	g.poll()
	if err := admit(g, "POST", "/api/v1/namespaces/default/configmaps", pods, admin); err != nil {
		t.Fatal(err)
	}
	var off *StorageGuard
	if err := admit(off, "POST", "/api/v1/namespaces/default/configmaps", pods, admin); err != nil {
		t.Fatal(err)
	}
}

func TestNoSpaceFromEtcdIs507(t *testing.T) {
	for _, err := range []error{
		errors.New("etcdserver: mvcc: database space exceeded"),
		errors.New("write /var/lib/kelp/server/db/member/wal/0.tmp: no space left on device"),
	} {
		if !storage.IsNoSpace(err) {
			t.Errorf("IsNoSpace(%v) = false", err)
		}
	}
	want507(t, "InsufficientStorage", storage.InsufficientStorage("x"))
}
