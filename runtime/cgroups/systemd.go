package cgroups

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// property is one systemd unit property, kept free of D-Bus types so the
// mapping from Resources is tested without a systemd.
type property struct {
	Name  string
	Value any
}

// sliceProperties are a slice's unit properties for res, as runc's
// systemd driver sets them: accounting on (systemd enables a controller
// for a unit only when asked), and the limits in systemd's terms for the
// host's version. Unset limits are "infinity" (max uint64), so updating a
// running slice clears a limit that was dropped.
func sliceProperties(v Version, res Resources) []property {
	const infinity = ^uint64(0)
	props := []property{
		{"Description", "kelp pod cgroup"},
		{"CPUAccounting", true},
		{"MemoryAccounting", true},
		{"TasksAccounting", true},
	}
	if res.CPUShares > 0 {
		if v == V2 {
			props = append(props, property{"CPUWeight", SharesToWeight(res.CPUShares)})
		} else {
			props = append(props, property{"CPUShares", res.CPUShares})
		}
	}
	quota := infinity
	if res.CPUQuota > 0 {
		// systemd takes CPU time per second and applies it at 10 ms
		// granularity: round up as runc does, never below the limit.
		quota = uint64(res.CPUQuota) * 1000000 / res.period()
		if quota%10000 != 0 {
			quota = (quota/10000 + 1) * 10000
		}
	}
	props = append(props, property{"CPUQuotaPerSecUSec", quota})
	mem := infinity
	if res.MemoryLimit > 0 {
		mem = uint64(res.MemoryLimit)
	}
	if v == V2 {
		props = append(props, property{"MemoryMax", mem})
	} else {
		props = append(props, property{"MemoryLimit", mem})
	}
	tasks := infinity
	if res.PidsLimit > 0 {
		tasks = uint64(res.PidsLimit)
	}
	return append(props, property{"TasksMax", tasks})
}

// SystemdSlices talks to systemd over its private socket
// (/run/systemd/private), which needs no D-Bus daemon: edge hosts often
// run none.
type SystemdSlices struct {
	version Version
	mu      sync.Mutex
	conn    *sddbus.Conn
}

// NewSystemdSlices connects to the running systemd.
func NewSystemdSlices(v Version) (*SystemdSlices, error) {
	s := &SystemdSlices{version: v}
	if _, err := s.connection(); err != nil {
		return nil, err
	}
	return s, nil
}

// unitTimeout bounds one unit job (systemd answers in milliseconds).
const unitTimeout = 30 * time.Second

// connection is the live connection, redialled after systemd restarted
// (daemon-reexec drops it).
func (s *SystemdSlices) connection() (*sddbus.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.Connected() {
		return s.conn, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), unitTimeout)
	defer cancel()
	c, err := sddbus.NewSystemdConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("cgroup driver systemd: connecting to systemd: %w", err)
	}
	s.conn = c
	return c, nil
}

// EnsureSlice implements Slices.
func (s *SystemdSlices) EnsureSlice(name string, res Resources) error {
	c, err := s.connection()
	if err != nil {
		return err
	}
	var props []sddbus.Property
	for _, p := range sliceProperties(s.version, res) {
		props = append(props, sddbus.Property{Name: p.Name, Value: godbus.MakeVariant(p.Value)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), unitTimeout)
	defer cancel()
	done := make(chan string, 1)
	_, err = c.StartTransientUnitContext(ctx, name, "replace", props, done)
	var dbusErr godbus.Error
	if errors.As(err, &dbusErr) && strings.HasSuffix(dbusErr.Name, ".UnitExists") {
		// Started before (by an earlier pod, or a kelp before a restart).
		return c.SetUnitPropertiesContext(ctx, name, true, props...)
	}
	if err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	return waitJob(ctx, name, done)
}

// StopSlice implements Slices.
func (s *SystemdSlices) StopSlice(name string) error {
	c, err := s.connection()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), unitTimeout)
	defer cancel()
	done := make(chan string, 1)
	_, err = c.StopUnitContext(ctx, name, "replace", done)
	var dbusErr godbus.Error
	if errors.As(err, &dbusErr) && strings.HasSuffix(dbusErr.Name, ".NoSuchUnit") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stopping %s: %w", name, err)
	}
	return waitJob(ctx, name, done)
}

func waitJob(ctx context.Context, name string, done <-chan string) error {
	select {
	case r := <-done:
		if r != "done" {
			return fmt.Errorf("systemd job for %s: %s", name, r)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("systemd job for %s: %w", name, ctx.Err())
	}
}
