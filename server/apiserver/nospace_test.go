package apiserver

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"

	"github.com/kelp-project/kelp/server/apiserver/storage"
)

// Once etcd's backend quota is exceeded it raises its NOSPACE alarm and
// refuses every write, forever: the guard disarms it when the disk has
// room. A member of its own, with a quota of 1 MiB, raises it quickly.
func TestGuardDisarmsNoSpaceAlarm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.QuotaBackendBytes = 1 << 20
	// The quota is checked against the size at the last commit: commit
	// often, so the loop below meets it early.
	cfg.BackendBatchInterval = time.Millisecond
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	sock := url.URL{Scheme: "unix", Host: filepath.Join(dir, "client.sock")}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peer := url.URL{Scheme: "http", Host: l.Addr().String()}
	l.Close()
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{sock}, []url.URL{sock}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	<-e.Server.ReadyNotify()
	client := v3client.New(e.Server)
	defer client.Close()

	value := strings.Repeat("v", 100<<10)
	var putErr error
	for i := 0; i < 500 && putErr == nil; i++ {
		_, putErr = client.Put(ctx, fmt.Sprintf("/registry/k%d", i), value)
		time.Sleep(2 * time.Millisecond)
	}
	if putErr == nil {
		st, _ := client.Status(ctx, "")
		t.Fatalf("50 MiB written under a 1 MiB quota (db %d bytes, %v)", st.DbSize, st)
	}
	// The error as the in-process client hands it is recognised (storage's
	// tests hold its mapping to the 507).
	if !storage.IsNoSpace(putErr) {
		t.Fatalf("IsNoSpace(%v) = false", putErr)
	}
	if alarms, err := client.AlarmList(ctx); err != nil || len(alarms.Alarms) != 1 {
		t.Fatalf("alarms %v, %v; want NOSPACE", alarms, err)
	}

	g, _ := newGuard(10 << 30)
	g.Etcd = client
	g.disarmNoSpace(ctx)
	if alarms, err := client.AlarmList(ctx); err != nil || len(alarms.Alarms) != 0 {
		t.Fatalf("alarms after disarming: %v, %v", alarms, err)
	}
}
