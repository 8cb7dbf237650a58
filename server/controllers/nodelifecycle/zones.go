package nodelifecycle

import (
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
)

type zoneState string

const (
	stateNormal            zoneState = "Normal"
	statePartialDisruption zoneState = "PartialDisruption"
	stateFullDisruption    zoneState = "FullDisruption"
)

// zoneKey identifies a node's failure domain: region and zone labels
// joined, empty for nodes without them (all of which form one zone).
func zoneKey(node *corev1.Node) string {
	region := node.Labels[corev1.LabelTopologyRegion]
	zone := node.Labels[corev1.LabelTopologyZone]
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// computeZoneState is upstream's: every node not ready is full disruption;
// more than two not ready and at least the threshold fraction is partial.
func (c *Controller) computeZoneState(ready []corev1.ConditionStatus) zoneState {
	readyNodes, notReady := 0, 0
	for _, s := range ready {
		if s == corev1.ConditionTrue {
			readyNodes++
		} else {
			notReady++
		}
	}
	switch {
	case readyNodes == 0 && notReady > 0:
		return stateFullDisruption
	case notReady > 2 && float64(notReady)/float64(notReady+readyNodes) >= c.cfg.UnhealthyZoneThreshold:
		return statePartialDisruption
	default:
		return stateNormal
	}
}

// evictionRate is how many nodes per second may get a NoExecute taint in
// a zone of size nodes in state s. A partially disrupted zone slows down
// (large zones) or stops (small ones): a big share of failures there is
// more likely a network or infrastructure problem than many dead nodes.
func (c *Controller) evictionRate(s zoneState, size int) float64 {
	if s == statePartialDisruption {
		if size > c.cfg.LargeClusterSizeThreshold {
			return c.cfg.SecondaryNodeEvictionRate
		}
		return 0
	}
	return c.cfg.NodeEvictionRate
}

// limiter is a token bucket with burst 1; a nil bucket (rate 0) never
// lets anything through.
type limiter struct{ bucket *rate.Limiter }

func newLimiter(qps float64) *limiter {
	if qps <= 0 {
		return &limiter{}
	}
	return &limiter{bucket: rate.NewLimiter(rate.Limit(qps), 1)}
}

// take reserves a token at now; the returned func gives it back (used
// when the taint turned out to be there already).
func (l *limiter) take(now time.Time) (ok bool, giveBack func()) {
	if l == nil || l.bucket == nil {
		return false, nil
	}
	r := l.bucket.ReserveN(now, 1)
	if !r.OK() || r.DelayFrom(now) > 0 {
		r.CancelAt(now)
		return false, nil
	}
	return true, func() { r.CancelAt(now) }
}

// handleDisruption updates zone states from this pass's Ready statuses
// and resets a zone's limiter whenever its state changes.
func (c *Controller) handleDisruption(zoneReady map[string][]corev1.ConditionStatus, now time.Time) {
	newStates := make(map[string]zoneState, len(zoneReady))
	allFull := len(zoneReady) > 0
	for zone, ready := range zoneReady {
		s := c.computeZoneState(ready)
		newStates[zone] = s
		if s != stateFullDisruption {
			allFull = false
		}
	}
	for zone := range c.zoneStates {
		if _, ok := newStates[zone]; !ok {
			delete(c.zoneStates, zone)
			delete(c.limiters, zone)
		}
	}
	switch {
	case allFull && !c.allDisrupted:
		logrus.Warnf("%s: every node is not ready; stopping NoExecute tainting and removing those taints", name)
		c.allDisrupted = true
		c.zoneStates = newStates
		return
	case allFull:
		c.zoneStates = newStates
		return
	case c.allDisrupted:
		// Leaving that mode: nodes may just have been unable to reach us,
		// so every node gets a fresh grace period, and every zone starts
		// over with the limiter for its state.
		logrus.Infof("%s: some nodes are ready again; resuming NoExecute tainting", name)
		c.allDisrupted = false
		for _, h := range c.health {
			h.probeTimestamp, h.readyTransitionTimestamp = now, now
		}
		for zone, s := range newStates {
			c.limiters[zone] = newLimiter(c.evictionRate(s, len(zoneReady[zone])))
		}
		c.zoneStates = newStates
		return
	}
	for zone, s := range newStates {
		if old, ok := c.zoneStates[zone]; ok && old == s && c.limiters[zone] != nil {
			continue
		}
		if old, ok := c.zoneStates[zone]; ok {
			logrus.Infof("%s: zone %q is now %s (was %s)", name, zone, s, old)
		}
		c.limiters[zone] = newLimiter(c.evictionRate(s, len(zoneReady[zone])))
		c.zoneStates[zone] = s
	}
}
