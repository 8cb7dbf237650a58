package apiserver

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	etcdserverpb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kelp-project/kelp/embedded/etcd"
	"github.com/kelp-project/kelp/server/apiserver/auth"
	"github.com/kelp-project/kelp/server/apiserver/registry"
	"github.com/kelp-project/kelp/server/apiserver/storage"
)

// The storage guard is the stage of the request path that refuses writes
// while the data dir's filesystem is nearly full, with a 507 Status, so
// that etcd never meets ENOSPC: etcd stops (or panics) when it cannot
// write its WAL, and then nothing is served at all. Reads and watches are
// never refused. Two thresholds apply:
//
//   - below MinFree (--storage-min-free), every write that stores
//     something is refused, except the ones that keep the cluster alive
//     or free space: a kubelet's node status, Lease renewals, deletes;
//   - below the hard reserve, those are refused too. The reserve is room
//     for the WAL segment etcd preallocates next plus database growth, so
//     that even then etcd can go on writing.
//
// Free space is polled (statfs every Interval), never asked per request;
// between polls each admitted write's size is taken off the last reading,
// so a burst of writes cannot overshoot the threshold by more than a poll
// could see. Writes resume by themselves once a poll sees space again.

// MinFree is --storage-min-free: a share of the filesystem, a size, or both
// (the smaller applies). The zero MinFree disables the guard.
type MinFree struct {
	Percent float64 // of the filesystem's size; 0 for none
	Bytes   uint64  // 0 for none
}

// ParseMinFree reads "5%", "256Mi", "5%,256Mi" (the smaller of the two) or
// "0" (no guard).
func ParseMinFree(s string) (MinFree, error) {
	var m MinFree
	bad := func(why string) (MinFree, error) {
		return MinFree{}, fmt.Errorf("--storage-min-free %q: %s (want a percentage such as 5%%, a size such as 256Mi, both as 5%%,256Mi, or 0)", s, why)
	}
	if strings.TrimSpace(s) == "0" {
		return MinFree{}, nil
	}
	seenPercent, seenBytes := false, false
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if p, ok := strings.CutSuffix(part, "%"); ok {
			v, err := strconv.ParseFloat(p, 64)
			if err != nil || seenPercent || v <= 0 || v >= 100 || math.IsNaN(v) {
				return bad("a percentage must be one number above 0 and below 100")
			}
			m.Percent, seenPercent = v, true
			continue
		}
		q, err := resource.ParseQuantity(part)
		if err != nil || seenBytes || q.Sign() <= 0 {
			return bad("a size must be one positive quantity")
		}
		m.Bytes, seenBytes = uint64(q.Value()), true
	}
	return m, nil
}

func (m MinFree) String() string {
	var parts []string
	if m.Percent > 0 {
		parts = append(parts, strconv.FormatFloat(m.Percent, 'f', -1, 64)+"%")
	}
	if m.Bytes > 0 {
		parts = append(parts, resource.NewQuantity(int64(m.Bytes), resource.BinarySI).String())
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ",")
}

// Disabled is the zero MinFree, "0".
func (m MinFree) Disabled() bool { return m.Percent == 0 && m.Bytes == 0 }

// Limits are the two thresholds for a filesystem of total bytes.
//
// The hard reserve is a quarter of the threshold, but never less than
// etcd needs to go on writing: writes into the current WAL segment take
// no free space (it is preallocated), but when it is full etcd
// preallocates the next one, and free space drops by a whole segment at
// once. Admitting writes only above a segment plus database growth keeps
// every such cut possible.
//
// The threshold is at least a segment above the reserve: a cut caused by
// ordinary writes just above the threshold still leaves the heartbeats
// and deletes above the reserve, so a user filling the disk never stops
// the nodes' heartbeats.
func (m MinFree) Limits(total uint64) (threshold, reserve uint64) {
	if m.Disabled() {
		return 0, 0
	}
	threshold = math.MaxUint64
	if m.Percent > 0 {
		threshold = uint64(float64(total) * m.Percent / 100)
	}
	if m.Bytes > 0 {
		threshold = min(threshold, m.Bytes)
	}
	reserve = max(threshold/4, etcd.WALSegmentBytes+etcd.DatabaseReserve)
	threshold = max(threshold, reserve+etcd.WALSegmentBytes)
	return threshold, reserve
}

// StorageGuard watches the free space of Dir's filesystem.
type StorageGuard struct {
	Dir     string
	MinFree MinFree
	Statfs  etcd.Statfs
	// Interval is how often free space is read (default 1 s); the NOSPACE
	// alarm is checked every tenth time.
	Interval time.Duration
	// Etcd, when set, is asked for its NOSPACE alarm, which is disarmed
	// once there is space again.
	Etcd *clientv3.Client

	free               atomic.Int64 // the last reading, less what was admitted since
	threshold, reserve atomic.Uint64
	known              atomic.Bool // a reading succeeded: until then nothing is refused
	refusing           atomic.Bool // for logging the transitions only
}

// writeCost is what a write is taken to cost on disk until the next
// reading: its body in the WAL and in the database, plus a page.
func writeCost(r *http.Request) int64 {
	return 2*max(r.ContentLength, 0) + 4096
}

// Run reads free space now and then every Interval until ctx ends.
func (g *StorageGuard) Run(ctx context.Context) {
	if g.MinFree.Disabled() {
		return
	}
	interval := g.Interval
	if interval <= 0 {
		interval = time.Second
	}
	g.poll()
	if g.known.Load() {
		logrus.Infof("storage guard: writes are refused when %s has less than %s free, and node heartbeats and deletes below %s (--storage-min-free %s); now %s free",
			g.Dir, etcd.FormatBytes(g.threshold.Load()), etcd.FormatBytes(g.reserve.Load()), g.MinFree, etcd.FormatBytes(uint64(max(g.free.Load(), 0))))
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g.poll()
		if g.Etcd != nil && n%10 == 0 {
			g.disarmNoSpace(ctx)
		}
	}
}

// poll takes a reading and logs when writes start or stop being refused.
func (g *StorageGuard) poll() {
	avail, total, err := g.Statfs(g.Dir)
	if err != nil {
		logrus.WithError(err).Debug("storage guard: statfs")
		return
	}
	threshold, reserve := g.MinFree.Limits(total)
	g.threshold.Store(threshold)
	g.reserve.Store(reserve)
	g.free.Store(int64(min(avail, math.MaxInt64)))
	g.known.Store(true)
	low := avail < threshold
	if g.refusing.Swap(low) != low {
		if low {
			logrus.Warnf("storage guard: %s has %s free, less than %s: refusing writes (507) until space is freed", g.Dir, etcd.FormatBytes(avail), etcd.FormatBytes(threshold))
		} else {
			logrus.Infof("storage guard: %s has %s free again: writes are accepted", g.Dir, etcd.FormatBytes(avail))
		}
	}
}

// disarmNoSpace disarms etcd's NOSPACE alarm when the disk has room: while
// the alarm is raised etcd refuses every write, forever. If the quota is
// still exceeded etcd raises it again on the next write, so disarming
// early does no harm.
func (g *StorageGuard) disarmNoSpace(ctx context.Context) {
	if g.refusing.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	alarms, err := g.Etcd.AlarmList(ctx)
	if err != nil {
		return
	}
	for _, a := range alarms.Alarms {
		if a.Alarm != etcdserverpb.AlarmType_NOSPACE {
			continue
		}
		if _, err := g.Etcd.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			logrus.WithError(err).Warn("storage guard: disarming etcd's NOSPACE alarm")
			continue
		}
		logrus.Infof("storage guard: disarmed etcd's NOSPACE alarm (member %x): %s free", a.MemberID, etcd.FormatBytes(uint64(max(g.free.Load(), 0))))
	}
}

// Admit is the guard's stage: nil lets the request on, else the 507 to
// answer. Only writes that store something are weighed.
func (g *StorageGuard) Admit(r *http.Request, info requestInfo, sv *served, u *auth.User) error {
	if g == nil || !g.known.Load() || !storesWrite(info, sv) {
		return nil
	}
	free := g.free.Load()
	threshold, reserve := int64(g.threshold.Load()), int64(g.reserve.Load())
	limit := threshold
	if lastToBeRefused(info, u) {
		limit = reserve
	}
	if free < limit {
		return g.refusal(free, threshold, reserve, limit == reserve)
	}
	g.free.Add(-writeCost(r))
	return nil
}

func (g *StorageGuard) refusal(free, threshold, reserve int64, exempt bool) error {
	msg := fmt.Sprintf("insufficient storage: the data dir %s has %s free, and writes are refused below %s (kelp server --storage-min-free %s); delete objects or free disk space, and writes resume by themselves",
		g.Dir, etcd.FormatBytes(uint64(max(free, 0))), etcd.FormatBytes(uint64(threshold)), g.MinFree)
	if exempt {
		msg = fmt.Sprintf("insufficient storage: the data dir %s has %s free, below the %s reserved for etcd itself, so even node heartbeats and deletes are refused; free disk space, and writes resume by themselves",
			g.Dir, etcd.FormatBytes(uint64(max(free, 0))), etcd.FormatBytes(uint64(reserve)))
	}
	return storage.InsufficientStorage(msg)
}

// storesWrite: a create, update, patch or delete that reaches storage.
// Reviews and TokenRequests store nothing, and exec, attach and
// port-forward go to the kubelet.
func storesWrite(info requestInfo, sv *served) bool {
	switch info.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
	default:
		return false
	}
	if sv.Review {
		return false
	}
	if info.Subresource != "" {
		for _, sub := range sv.Subresources {
			if sub.Name == info.Subresource && (sub.Kind == registry.KubeletSubresource || sub.Kind == registry.TokenSubresource || sub.Kind == registry.PodProxySubresource ||
				sub.Kind == registry.ServiceProxySubresource) {
				return false
			}
		}
	}
	return true
}

// lastToBeRefused are the writes that keep the cluster alive or free
// space: refused only below the hard reserve. A kubelet's node status and
// Lease renewals (its node Lease, and the components' leader Leases), so
// that a user filling the disk does not get nodes marked dead and their
// pods evicted; deletes (and a namespace's finalize, which ends its
// deletion), since they are how space comes back.
func lastToBeRefused(info requestInfo, u *auth.User) bool {
	switch {
	case info.Verb == "delete" || info.Verb == "deletecollection":
		return info.Subresource == ""
	case info.Verb != "update" && info.Verb != "patch":
		return false
	case info.Group == "" && info.Resource == "nodes" && info.Subresource == "status":
		return u != nil && strings.HasPrefix(u.Name, "system:node:")
	case info.Group == "coordination.k8s.io" && info.Resource == "leases":
		return info.Subresource == ""
	case info.Group == "" && info.Resource == "namespaces" && info.Subresource == "finalize":
		// the last step of deleting a namespace
		return true
	}
	return false
}
