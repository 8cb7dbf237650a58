package cgroups

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Slices starts and stops systemd slice units; under the systemd driver
// every cgroup kelp makes is such a unit, so systemd knows it and does
// not reset its limits. SystemdSlices implements it over D-Bus.
type Slices interface {
	// EnsureSlice starts the transient slice (its parents are implied by
	// the name) with res as unit properties, or sets them on a running
	// one.
	EnsureSlice(name string, res Resources) error
	// StopSlice stops the slice; one that is not loaded is no error.
	StopSlice(name string) error
}

// Pods makes the levels above containers: the pods' root (kubepods), the
// QoS classes' cgroups and each pod's own, with upstream's pod-level
// limits. Containers are created below a pod by runc, from the OCI spec.
type Pods struct {
	Layout Layout
	FS     *FS
	// Slices is nil under the cgroupfs driver.
	Slices Slices
}

// NewPods is the Pods of host h; under the systemd driver it connects to
// systemd.
func NewPods(h Host) (*Pods, error) {
	p := &Pods{Layout: h.Layout, FS: h.FS()}
	if h.Layout.Driver == Systemd {
		s, err := NewSystemdSlices(h.Version)
		if err != nil {
			return nil, err
		}
		p.Slices = s
	}
	return p, nil
}

// bestEffortShares is what upstream's QoS manager gives the besteffort
// level: the minimum, so best-effort pods only get CPU nobody else wants.
const bestEffortShares = 2

// EnsurePod makes the pod's cgroup (and the levels above it) with res, the
// pod-level limits (see the kubelet's podResources), and returns the cgroup
// parent for its containers (Layout.Parent). Applying again updates the
// limits; it is safe from several goroutines.
func (p *Pods) EnsurePod(q QOS, uid string, res Resources) (string, error) {
	if uid == "" {
		return "", errors.New("pod cgroup: empty pod UID")
	}
	if err := p.apply(p.Layout.Root(), Resources{}); err != nil {
		return "", err
	}
	switch q {
	case Guaranteed:
	case BestEffort:
		if err := p.apply(p.Layout.QoS(q), Resources{CPUShares: bestEffortShares}); err != nil {
			return "", err
		}
	case Burstable:
		if err := p.apply(p.Layout.QoS(q), Resources{}); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("pod cgroup: unknown QoS level %q", q)
	}
	name := p.Layout.Pod(q, uid)
	if err := p.apply(name, res); err != nil {
		return "", err
	}
	return p.Layout.Parent(name), nil
}

// RemovePod removes the pod's cgroup once its containers are gone (runc
// removes theirs on delete).
func (p *Pods) RemovePod(q QOS, uid string) error {
	name := p.Layout.Pod(q, uid)
	var errs []error
	if p.Slices != nil {
		errs = append(errs, p.Slices.StopSlice(sliceName(name)))
	}
	errs = append(errs, p.FS.Remove(p.Layout.Dir(name)))
	return errors.Join(errs...)
}

// RemoveAll removes the pods' root and everything below it, for
// `kelp killall` once every container is gone.
func (p *Pods) RemoveAll() error {
	var errs []error
	if p.Slices != nil {
		errs = append(errs, p.Slices.StopSlice(sliceName(p.Layout.Root())))
	}
	errs = append(errs, p.FS.Remove(p.Layout.Dir(p.Layout.Root())))
	return errors.Join(errs...)
}

// apply makes one level: through systemd first under its driver (which
// creates the directory and sets the properties), then the files
// themselves, as runc's systemd driver also does, so the values are the
// same whichever writes last.
func (p *Pods) apply(name []string, res Resources) error {
	if p.Slices != nil {
		if err := p.Slices.EnsureSlice(sliceName(name), res); err != nil {
			return err
		}
	}
	return p.FS.Apply(p.Layout.Dir(name), res)
}

// RemoveOrphans removes the cgroups of pods whose UID is not in keep:
// pods deleted while kelp was down, whose containers were just removed.
// A cgroup that still holds processes stays, as an error: the rmdir comes
// first, and only an emptied slice is stopped, so a pod missing from keep
// by mistake is never killed here (stopping a slice kills what is in it).
func (p *Pods) RemoveOrphans(keep map[string]bool) error {
	var errs []error
	for _, q := range []QOS{Guaranteed, Burstable, BestEffort} {
		kept := map[string]bool{}
		for uid := range keep {
			kept[path.Base(p.Layout.Dir(p.Layout.Pod(q, uid)))] = true
		}
		// A pod's directory name, less its UID: pod<uid> or, under
		// systemd, kubepods-burstable-pod<uid>.slice.
		prefix := path.Base(p.Layout.Dir(p.Layout.Pod(q, "")))
		prefix = strings.TrimSuffix(prefix, ".slice")
		qosDir := p.Layout.Dir(p.Layout.QoS(q))
		for _, name := range p.FS.children(qosDir) {
			if kept[name] || !strings.HasPrefix(name, prefix) || name == prefix {
				continue
			}
			if err := p.FS.Remove(path.Join(qosDir, name)); err != nil {
				errs = append(errs, err)
				continue
			}
			if p.Slices != nil {
				errs = append(errs, p.Slices.StopSlice(name))
			}
		}
	}
	return errors.Join(errs...)
}
