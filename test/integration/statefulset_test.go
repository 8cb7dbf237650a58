package integration

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/test/simkubelet"
)

func stsObject(name string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"sts": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"sts": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36"}}}}}}
}

// stsTimeline records, in the order the API server reports them, when each
// pod of a selector was created, first Ready, marked for deletion and
// removed ("created web-0", "ready web-0", "deleting web-2", "deleted web-2").
type stsTimeline struct {
	mu     sync.Mutex
	events []string
	seen   map[string]bool
	done   chan struct{}
}

func watchSTSTimeline(t *testing.T, cs kubernetes.Interface, selector string) *stsTimeline {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	tl := &stsTimeline{seen: map[string]bool{}, done: make(chan struct{})}
	go func() {
		defer close(tl.done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			// A pod name comes back after a replacement: key by UID.
			key := func(what string) { tl.add(what+" "+p.Name, what+" "+string(p.UID)) }
			switch {
			case ev.Type == watch.Deleted:
				key("deleted")
			case ev.Type == watch.Added:
				key("created")
			}
			if ev.Type != watch.Deleted && podutils.IsPodReady(p) && p.DeletionTimestamp == nil {
				key("ready")
			}
			if p.DeletionTimestamp != nil {
				key("deleting")
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-tl.done })
	return tl
}

func (tl *stsTimeline) add(line, once string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.seen[once] {
		return
	}
	tl.seen[once] = true
	tl.events = append(tl.events, line)
}

// since returns the events after the first n.
func (tl *stsTimeline) since(n int) []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]string(nil), tl.events[min(n, len(tl.events)):]...)
}

func (tl *stsTimeline) len() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return len(tl.events)
}

// index is the position of the first event line, -1 if none.
func stsIndex(events []string, line string) int {
	for i, e := range events {
		if e == line {
			return i
		}
	}
	return -1
}

// only lists the events of one kind ("deleting"), in order.
func stsOnly(events []string, kind string) []string {
	var out []string
	for _, e := range events {
		if strings.HasPrefix(e, kind+" ") {
			out = append(out, strings.TrimPrefix(e, kind+" "))
		}
	}
	return out
}

func stsRolloutStatus(t *testing.T, s *testServer, name string) string {
	t.Helper()
	out, err := s.kubectl("rollout", "status", "sts/"+name, "--timeout=90s")
	// With a rollingUpdate block (the API defaults one) kubectl reports
	// "partitioned roll out complete" once the pods at and above the
	// partition are updated and every pod is Ready.
	if err != nil || !strings.Contains(out, "roll out complete") && !strings.Contains(out, "rolling update complete") {
		t.Fatalf("rollout status sts/%s: %v\n%s", name, err, out)
	}
	return out
}

// livePods returns the set's pods not being deleted, by name.
func stsLivePods(t *testing.T, cs kubernetes.Interface, selector string) map[string]corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods("default").List(ctxT(t), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out
}

func stsPodNames(m map[string]corev1.Pod) string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// TestStatefulSet: with simulated nodes, a StatefulSet of 3 comes up in
// order (web-1 is created only after web-0 is Ready, web-2 after web-1),
// each pod with its stable identity; scaling to 1 removes web-2, then
// web-1; an image change rolls from the highest ordinal down; kubectl's
// rollout status, history and undo work.
func TestStatefulSet(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1", "node-2")
	s.mustKubectl("create", "service", "clusterip", "web", "--clusterip=None")

	tl := watchSTSTimeline(t, cs, "sts=web")
	if _, err := cs.AppsV1().StatefulSets("default").Create(ctx, stsObject("web", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stsRolloutStatus(t, s, "web")
	ev := tl.since(0)
	for _, before := range [][2]string{
		{"created web-0", "ready web-0"}, {"ready web-0", "created web-1"},
		{"created web-1", "ready web-1"}, {"ready web-1", "created web-2"},
	} {
		if a, b := stsIndex(ev, before[0]), stsIndex(ev, before[1]); a < 0 || b < 0 || a > b {
			t.Errorf("%q must come before %q: %v", before[0], before[1], ev)
		}
	}
	pods := stsLivePods(t, cs, "sts=web")
	if got := stsPodNames(pods); got != "web-0,web-1,web-2" {
		t.Fatalf("pods %s", got)
	}
	set, err := cs.AppsV1().StatefulSets("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := set.Status
	if st.Replicas != 3 || st.ReadyReplicas != 3 || st.AvailableReplicas != 3 || st.CurrentReplicas != 3 || st.UpdatedReplicas != 3 ||
		st.ObservedGeneration != set.Generation || st.CurrentRevision == "" || st.CurrentRevision != st.UpdateRevision || st.CollisionCount == nil {
		t.Errorf("status %+v", st)
	}
	p := pods["web-1"]
	if p.Spec.Hostname != "web-1" || p.Spec.Subdomain != "web" || p.Labels[appsv1.StatefulSetPodNameLabel] != "web-1" ||
		p.Labels[appsv1.PodIndexLabel] != "1" || p.Labels[appsv1.ControllerRevisionHashLabelKey] != st.CurrentRevision {
		t.Errorf("web-1 identity: hostname %q subdomain %q labels %v", p.Spec.Hostname, p.Spec.Subdomain, p.Labels)
	}
	if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "StatefulSet" || ref.UID != set.UID {
		t.Errorf("web-1 controller %+v", ref)
	}

	// Scale to 1: web-2 goes first, and web-1 only once web-2 is gone.
	mark := tl.len()
	s.mustKubectl("scale", "sts/web", "--replicas=1")
	waitFor(t, "scaled to 1", func() bool {
		return stsPodNames(stsLivePods(t, cs, "sts=web")) == "web-0" && stsIndex(tl.since(mark), "deleted web-1") >= 0
	})
	ev = tl.since(mark)
	if got := strings.Join(stsOnly(ev, "deleting"), ","); got != "web-2,web-1" {
		t.Errorf("scale-down deleted %s, want web-2,web-1: %v", got, ev)
	}
	if a, b := stsIndex(ev, "deleted web-2"), stsIndex(ev, "deleting web-1"); a < 0 || b < a {
		t.Errorf("web-1 deleted before web-2 was gone: %v", ev)
	}
	waitFor(t, "SuccessfulCreate and SuccessfulDelete events", func() bool {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,involvedObject.kind=StatefulSet"})
		if err != nil {
			return false
		}
		var create, del bool
		for _, e := range evs.Items {
			create = create || e.Reason == "SuccessfulCreate" && e.Message == "create Pod web-0 in StatefulSet web successful"
			del = del || e.Reason == "SuccessfulDelete" && e.Message == "delete Pod web-2 in StatefulSet web successful"
		}
		return create && del
	})

	// Back to 3, then an image change rolls from web-2 down to web-0.
	s.mustKubectl("scale", "sts/web", "--replicas=3")
	stsRolloutStatus(t, s, "web")
	mark = tl.len()
	s.mustKubectl("set", "image", "sts/web", "app=busybox:1.37")
	stsRolloutStatus(t, s, "web")
	waitFor(t, "every pod on busybox:1.37", func() bool {
		pods := stsLivePods(t, cs, "sts=web")
		for _, p := range pods {
			if p.Spec.Containers[0].Image != "busybox:1.37" || !podutils.IsPodReady(&p) {
				return false
			}
		}
		return len(pods) == 3
	})
	ev = tl.since(mark)
	if got := strings.Join(stsOnly(ev, "deleting"), ","); got != "web-2,web-1,web-0" {
		t.Errorf("rolling update replaced %s, want web-2,web-1,web-0: %v", got, ev)
	}
	set, _ = cs.AppsV1().StatefulSets("default").Get(ctx, "web", metav1.GetOptions{})
	if st := set.Status; st.CurrentRevision != st.UpdateRevision || st.UpdatedReplicas != 3 || st.CurrentReplicas != 3 {
		t.Errorf("after the rollout: status %+v", st)
	}

	out := s.mustKubectl("rollout", "history", "sts/web")
	if !strings.Contains(out, "\n1 ") || !strings.Contains(out, "\n2 ") {
		t.Errorf("rollout history lacks revisions 1 and 2:\n%s", out)
	}
	if out := s.mustKubectl("rollout", "history", "sts/web", "--revision=1"); !strings.Contains(out, "busybox:1.36") {
		t.Errorf("revision 1 does not show the old image:\n%s", out)
	}
	if out := s.mustKubectl("rollout", "undo", "sts/web"); !strings.Contains(out, "rolled back") {
		t.Errorf("rollout undo printed %q", out)
	}
	stsRolloutStatus(t, s, "web")
	waitFor(t, "undo back to busybox:1.36", func() bool {
		pods := stsLivePods(t, cs, "sts=web")
		for _, p := range pods {
			if p.Spec.Containers[0].Image != "busybox:1.36" || !podutils.IsPodReady(&p) {
				return false
			}
		}
		return len(pods) == 3
	})
	revs, err := cs.AppsV1().ControllerRevisions("default").List(ctx, metav1.ListOptions{LabelSelector: "sts=web"})
	if err != nil || len(revs.Items) != 2 {
		t.Fatalf("ControllerRevisions after undo: %v %d", err, len(revs.Items))
	}
	for _, r := range revs.Items {
		if strings.Contains(string(r.Data.Raw), "busybox:1.36") && r.Revision != 3 {
			t.Errorf("the restored revision %s is number %d, want 3", r.Name, r.Revision)
		}
	}
}

func stsClaimTemplate(name string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "db"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
}

// TestStatefulSetClaims: volumeClaimTemplates give each ordinal its claim
// (labels from the template and the selector, the pod's volume named for
// the template), whether or not anything binds it; under Retain the claims
// stay after a scale-down; under whenDeleted=Delete the set owns them.
// Nothing here needs a claim bound or a pod running.
func TestStatefulSetClaims(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	simkubelet.Start(t, cs, "node-1")

	db := stsObject("db", 2)
	db.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	db.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{stsClaimTemplate("data")}
	if _, err := cs.AppsV1().StatefulSets("default").Create(ctx, db, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claims := func(selector string) map[string]corev1.PersistentVolumeClaim {
		l, err := cs.CoreV1().PersistentVolumeClaims("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]corev1.PersistentVolumeClaim{}
		for _, c := range l.Items {
			out[c.Name] = c
		}
		return out
	}
	waitFor(t, "claims and pods of db", func() bool {
		return len(claims("sts=db")) == 2 && len(stsLivePods(t, cs, "sts=db")) == 2
	})
	for name, c := range claims("sts=db") {
		if name != "data-db-0" && name != "data-db-1" {
			t.Errorf("claim %s", name)
		}
		if c.Labels["tier"] != "db" || c.Labels["sts"] != "db" || len(c.OwnerReferences) != 0 {
			t.Errorf("claim %s: labels %v owners %v (Retain: no owners)", name, c.Labels, c.OwnerReferences)
		}
		if q := c.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "1Gi" {
			t.Errorf("claim %s requests %s", name, q.String())
		}
	}
	for name, p := range stsLivePods(t, cs, "sts=db") {
		var found bool
		for _, v := range p.Spec.Volumes {
			found = found || v.Name == "data" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "data-"+name
		}
		if !found {
			t.Errorf("%s volumes %+v: want data -> data-%s", name, p.Spec.Volumes, name)
		}
	}
	waitFor(t, "claim event", func() bool {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=db"})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "SuccessfulCreate" && e.Message == "create Claim data-db-0 Pod db-0 in StatefulSet db success" {
				return true
			}
		}
		return false
	})

	// Scaled to 0, the claims stay (Retain).
	s.mustKubectl("scale", "sts/db", "--replicas=0")
	waitFor(t, "db pods gone", func() bool { return len(stsLivePods(t, cs, "sts=db")) == 0 })
	for name, c := range claims("sts=db") {
		if c.DeletionTimestamp != nil {
			t.Errorf("claim %s being deleted under Retain", name)
		}
	}
	if n := len(claims("sts=db")); n != 2 {
		t.Errorf("%d claims after the scale-down, want 2", n)
	}

	// whenDeleted=Delete: the set is its claims' controller, and deleting
	// the set takes them.
	gc := stsObject("gc", 1)
	gc.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	gc.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{stsClaimTemplate("data")}
	gc.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType}
	created, err := cs.AppsV1().StatefulSets("default").Create(ctx, gc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "gc's claim owned by the set", func() bool {
		c, ok := claims("sts=gc")["data-gc-0"]
		if !ok {
			return false
		}
		ref := metav1.GetControllerOf(&c)
		return ref != nil && ref.UID == created.UID && ref.Kind == "StatefulSet"
	})
	if err := cs.AppsV1().StatefulSets("default").Delete(ctx, "gc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "gc's claim collected with the set", func() bool {
		c, ok := claims("sts=gc")["data-gc-0"]
		return !ok || c.DeletionTimestamp != nil
	})
	if n := len(claims("sts=db")); n != 2 {
		t.Errorf("db's claims: %d, want 2 still", n)
	}
}
