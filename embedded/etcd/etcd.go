// Package etcd runs a single-member etcd inside the kelp server process.
//
// The member listens only on unix sockets under its data directory, so the
// API server (through an in-process client) is the only thing that can reach
// it. fsync stays on: etcd is the cluster's only source of truth.
package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname, for watchResyncPeriod

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// watchResyncPeriod is how often etcd's watchable store looks for
// watchers behind the current revision (a watch opened at an older
// revision, a slow watcher caught up) and sends them what they missed.
// Its loop wakes that often even when no watcher is behind: upstream's
// 100 ms was the single largest source of an idle kelp's wakeups (10 a
// second of some 60). kelp's watchers are the watch caches, behind only
// for the moment between their list and their watch, so a period of
// 250 ms delays those first events by at most that. etcd does not expose
// the setting; it is a package variable ("modifiable by tests"), set here
// once, before any member starts. Should etcd rename it, the link fails
// at build time rather than silently.
//
//go:linkname watchResyncPeriod go.etcd.io/etcd/server/v3/storage/mvcc.watchResyncPeriod
var watchResyncPeriod time.Duration

func init() { watchResyncPeriod = 250 * time.Millisecond }

// Etcd is a running embedded member.
type Etcd struct {
	server *embed.Etcd
	// Client talks to the member in-process, with no network hop.
	Client     *clientv3.Client
	closing    chan struct{} // closed by Close: from then on a stop is no failure
	closingLog *atomic.Bool  // the logger's view of the same
	once       sync.Once
}

// Start starts a member with its data in dir and waits until it can serve.
func Start(ctx context.Context, dir string) (*Etcd, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// etcd panics ("failed to create WAL") when it cannot preallocate a
	// segment; a filesystem too small is told as such instead. (kelp
	// server checks before it writes anything; this is for every caller.)
	if err := CheckSpace(dir, HostStatfs); err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "kelp"
	cfg.Dir = dir
	// One tick a second, election timeout 10 s: each tick wakes raft's
	// loops (about three goroutine wakeups, each some 0.1 ms of CPU on a
	// small machine), while a single member has no peer to heartbeat nor
	// a leader to lose. Upstream's 100 ms tick made ticking a tenth of an
	// idle server's CPU. No etcd lease is used, so the minimum lease TTL
	// this implies (15 s) binds nothing. The member would elect itself
	// only after its election timeout, so campaign asks it to campaign at
	// once.
	cfg.TickMs = 1000
	cfg.ElectionMs = 10000
	// Clients connect in-process (v3client); the unix socket exists only
	// because etcd insists on a client listener, and it is reachable by
	// root alone. The single member's peer port is never dialled, but
	// etcd needs one: a free loopback port is picked each start.
	clientURL := url.URL{Scheme: "unix", Host: filepath.Join(dir, "client.sock")}
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.Name + "=" + peerURL.String()
	// etcd's log goes to kelp's: warnings and errors always (a storage
	// failure must never be silent), info in debug mode.
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	if logrus.IsLevelEnabled(logrus.DebugLevel) {
		cfg.LogLevel = "info"
	}
	closingLog := &atomic.Bool{}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newLogger(logrus.StandardLogger(), closingLog))
	// Requests are capped at 3 MiB by the API server; etcd must accept a
	// little more than the 1.5 MiB object cap plus transaction overhead.
	cfg.MaxRequestBytes = 2 * 1024 * 1024
	// The backend (bbolt) commits what was applied at most this often;
	// the WAL, fsync'ed on every write, is what makes a write durable
	// (a crash replays it from the backend's last commit), so a longer
	// interval costs only a longer replay: upstream's 100 ms timer fires
	// 10 times a second even with nothing to commit. (A restart's replay
	// once met the early campaign's MsgHup; campaign now waits it out.)
	cfg.BackendBatchInterval = time.Second
	// Raft keeps its log in memory from the last snapshot on, plus the
	// entries a slow follower would need; etcd's defaults (a snapshot
	// every 10,000 entries, 5,000 kept) let a busy cluster's log reach
	// 15,000 requests, some 50 MB of pods, in a process meant for a
	// Raspberry Pi. A single member has no follower to catch up, and a
	// snapshot here is a few KB of membership written once per 1,000
	// writes (hours apart on an idle node).
	cfg.SnapshotCount = 1000
	cfg.SnapshotCatchUpEntries = 100
	// Compaction is driven by the API server (storage.Compactor), as
	// kube-apiserver does, so etcd's own auto-compaction stays off.
	cfg.AutoCompactionRetention = ""
	_ = os.Remove(filepath.Join(dir, "client.sock"))
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	fail := func(err error) (*Etcd, error) {
		closingLog.Store(true)
		e.Close()
		return nil, err
	}
	go campaign(ctx, e.Server)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return fail(fmt.Errorf("etcd failed: %w", err))
	case <-time.After(60 * time.Second):
		return fail(fmt.Errorf("etcd did not become ready within 60s"))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	return &Etcd{server: e, Client: v3client.New(e.Server), closing: make(chan struct{}), closingLog: closingLog}, nil
}

// Failed delivers an error when the member stops on its own (a fatal
// error from its listeners, or the server stopping after a storage
// failure), never after Close: the control plane cannot serve without it.
func (e *Etcd) Failed() <-chan error {
	out := make(chan error, 1)
	go func() {
		var err error
		select {
		case <-e.closing:
			return
		case err = <-e.server.Err():
		case <-e.server.Server.StopNotify():
			err = errors.New("the etcd server stopped")
		}
		select {
		case <-e.closing:
			return
		default:
		}
		if err == nil {
			err = errors.New("the etcd server stopped")
		}
		out <- err
	}()
	return out
}

// Close stops the member cleanly: pending writes are flushed and the WAL is
// closed, so a restart on the same directory finds every object.
func (e *Etcd) Close() {
	e.once.Do(func() { close(e.closing); e.closingLog.Store(true) })
	_ = e.Client.Close()
	e.server.Close()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// campaign makes a single member start its election now rather than at its
// election timeout: a MsgHup, the message raft's own timeout steps, stepped
// as from raft's local append thread (the only sender a node accepts local
// messages from). Raft ignores it when there is nothing to do (a leader,
// configuration changes still to apply), and the timeout elects the member
// anyway, so this only ever saves time.
//
// Not before raft has applied every committed entry: a MsgHup makes raft
// scan the unapplied entries for configuration changes, and on a restart
// raft starts with applied 0 over a log whose beginning is compacted away,
// a scan that panics (the timeout's own MsgHup comes seconds later, when
// the entries are applied).
func campaign(ctx context.Context, s *etcdserver.EtcdServer) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	to, from := uint64(s.MemberID()), raft.LocalAppendThread
	for ctx.Err() == nil && s.Leader() == 0 {
		if caughtUp() {
			_ = s.Process(ctx, &raftpb.Message{Type: raftpb.MessageType_MsgHup.Enum(), To: &to, From: &from})
		}
		select {
		case <-ctx.Done():
		case <-s.LeaderChangedNotify():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// caughtUp reports whether raft has applied every entry it knows committed,
// from the raft status etcd publishes (expvar "raft.status", the only
// public reading of it; etcd points it at the node it started last, which
// in a kelp process is this one).
func caughtUp() bool {
	v := expvar.Get("raft.status")
	if v == nil {
		return false
	}
	var st struct {
		Commit  uint64 `json:"commit"`
		Applied uint64 `json:"applied"`
	}
	if err := json.Unmarshal([]byte(v.String()), &st); err != nil {
		return false
	}
	return st.Applied >= st.Commit
}
