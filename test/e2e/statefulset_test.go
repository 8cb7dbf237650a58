package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kelp-project/kelp/config"
)

// podEvents records, from a watch started before the workload exists, the
// order in which pods were created and deleted, and whether each pod was
// Ready as last seen: an ordered StatefulSet must not create web-1 before
// web-0 is Ready, nor delete web-1 before web-2 is gone.
type podEvents struct {
	mu      sync.Mutex
	log     []string // "created web-0", "ready web-0", "deleting web-2", "deleted web-2"
	ready   map[string]bool
	stopped chan struct{}
}

func watchPods(t *testing.T, c *cluster, selector string) *podEvents {
	t.Helper()
	w, err := c.cs.CoreV1().Pods("default").Watch(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	e := &podEvents{ready: map[string]bool{}, stopped: make(chan struct{})}
	t.Cleanup(func() { w.Stop(); <-e.stopped })
	go func() {
		defer close(e.stopped)
		seen, deleting := map[string]bool{}, map[string]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			e.mu.Lock()
			key := p.Name + "/" + string(p.UID)
			switch {
			case ev.Type == watch.Deleted:
				e.log = append(e.log, "deleted "+p.Name)
				delete(seen, key)
				e.ready[p.Name] = false
			default:
				if !seen[key] {
					seen[key] = true
					e.log = append(e.log, "created "+p.Name)
				}
				if p.DeletionTimestamp != nil && !deleting[key] {
					deleting[key] = true
					e.log = append(e.log, "deleting "+p.Name)
				}
				r := podutils.IsPodReady(p) && p.DeletionTimestamp == nil
				if r && !e.ready[p.Name] {
					e.log = append(e.log, "ready "+p.Name)
				}
				e.ready[p.Name] = r
			}
			e.mu.Unlock()
		}
	}()
	return e
}

func (e *podEvents) events() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.log...)
}

// index is the position of the first event ev, or -1.
func index(events []string, ev string) int {
	return slices.Index(events, ev)
}

// lastIndex is the position of the last event ev, or -1.
func lastIndex(events []string, ev string) int {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i] == ev {
			return i
		}
	}
	return -1
}

// A StatefulSet of 3 on real containers, each pod with its own volume on
// the default local-path class: ordered start, stable storage across a
// pod's replacement, stable DNS names through the headless Service, and
// ordered scale-down that keeps the claims.
func TestStatefulSetWithVolumes(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	events := watchPods(t, c, "app=web")
	c.apply(t, `apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 8000}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: app
        image: busybox:1.35
        imagePullPolicy: IfNotPresent
        # The first start of each ordinal writes its name and a nonce; a
        # later pod of the same ordinal must find that very line.
        command: ["sh", "-c", "[ -f /data/name ] || echo \"$(hostname) $(cat /proc/sys/kernel/random/uuid)\" > /data/name; cat /data/name; exec sleep 3600"]
        readinessProbe: {exec: {command: ["cat", "/data/name"]}, periodSeconds: 1}
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 64Mi}}
`)
	if out, err := c.kubectl("rollout", "status", "sts/web", "--timeout=120s"); err != nil {
		t.Fatalf("rollout status: %v\n%s\nevents: %v\n%s", err, out, events.events(), c.mustKubectl("get", "pods,pvc,pv", "-o", "wide"))
	}

	t.Run("ordered start", func(t *testing.T) {
		ev := events.events()
		for i := 1; i < 3; i++ {
			created, prevReady := index(ev, fmt.Sprintf("created web-%d", i)), index(ev, fmt.Sprintf("ready web-%d", i-1))
			if created < 0 || prevReady < 0 || created < prevReady {
				t.Errorf("web-%d must be created after web-%d is Ready: %v", i, i-1, ev)
			}
		}
	})

	first := map[string]string{}
	t.Run("each pod on its own local-path volume", func(t *testing.T) {
		node := c.node().Name
		for i := range 3 {
			name := fmt.Sprintf("web-%d", i)
			pvc, err := c.cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-"+name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("claim of %s: %v", name, err)
			}
			if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != config.LocalPathStorageClass {
				t.Fatalf("claim data-%s: phase %s class %v, want Bound on %s", name, pvc.Status.Phase, pvc.Spec.StorageClassName, config.LocalPathStorageClass)
			}
			pv, err := c.cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pv.Spec.HostPath == nil || !strings.HasPrefix(pv.Spec.HostPath.Path, config.LocalStorageDir(c.dataDir)+"/") {
				t.Fatalf("PV %s is not a directory under the node's storage dir: %+v", pv.Name, pv.Spec.PersistentVolumeSource)
			}
			if a := pv.Spec.NodeAffinity; a == nil || a.Required == nil || !strings.Contains(fmt.Sprint(a.Required), node) {
				t.Errorf("PV %s has no node affinity to %s: %+v", pv.Name, node, a)
			}
			onDisk, err := os.ReadFile(filepath.Join(pv.Spec.HostPath.Path, "name"))
			if err != nil || !strings.HasPrefix(string(onDisk), name+" ") {
				t.Fatalf("%s's volume holds %q (%v), want its name", name, onDisk, err)
			}
			logs := c.mustKubectl("logs", name)
			if strings.TrimSpace(logs) != strings.TrimSpace(string(onDisk)) {
				t.Errorf("%s printed %q, its volume holds %q", name, logs, onDisk)
			}
			first[name] = strings.TrimSpace(string(onDisk))
		}
	})

	t.Run("a replaced pod finds its volume", func(t *testing.T) {
		old := c.pod("web-1")
		c.mustKubectl("delete", "pod", "web-1", "--wait=true")
		c.waitFor(60*time.Second, "a new web-1 Ready", func() bool {
			p, err := c.cs.CoreV1().Pods("default").Get(ctx, "web-1", metav1.GetOptions{})
			return err == nil && p.UID != old.UID && podutils.IsPodReady(p)
		})
		if logs := strings.TrimSpace(c.mustKubectl("logs", "web-1")); logs != first["web-1"] {
			t.Errorf("the new web-1 read %q, the first one wrote %q", logs, first["web-1"])
		}
	})

	t.Run("stable DNS names", func(t *testing.T) {
		ip := c.pod("web-1").Status.PodIP
		var out string
		c.waitFor(20*time.Second, "web-1.web to resolve in web-0", func() bool {
			out, _ = c.kubectl("exec", "web-0", "--", "nslookup", "web-1.web.default.svc.cluster.local")
			return strings.Contains(out, "Address: "+ip) || strings.Contains(out, "Address 1: "+ip)
		})
		if out, _ = c.kubectl("exec", "web-0", "--", "nslookup", "web-2.web.default.svc.cluster.local"); !strings.Contains(out, c.pod("web-2").Status.PodIP) {
			t.Errorf("web-2.web does not resolve to web-2's IP:\n%s", out)
		}
	})

	t.Run("scale down in reverse order, claims kept", func(t *testing.T) {
		c.mustKubectl("scale", "sts/web", "--replicas=1")
		c.waitFor(60*time.Second, "web-1 and web-2 gone", func() bool { return len(c.livePods("app=web")) == 1 })
		scaled := len(events.events())
		c.waitFor(30*time.Second, "web-1 deleted", func() bool { return lastIndex(events.events(), "deleted web-1") >= scaled })
		ev := events.events()
		// The deletion of web-1 may only start once web-2 is gone (web-1
		// was deleted by hand before: only the last events count).
		if d2, s1 := lastIndex(ev, "deleted web-2"), lastIndex(ev, "deleting web-1"); d2 < 0 || s1 < 0 || s1 < d2 {
			t.Errorf("web-1 must be deleted after web-2 is gone: %v", ev)
		}
		for i := range 3 {
			pvc, err := c.cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, fmt.Sprintf("data-web-%d", i), metav1.GetOptions{})
			if err != nil || pvc.DeletionTimestamp != nil || pvc.Status.Phase != corev1.ClaimBound {
				t.Errorf("claim data-web-%d must stay Bound after the scale-down (Retain): %v %+v", i, err, pvc)
			}
		}
	})
}
