package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/server/pki"
)

const (
	rbacBindings     = 1000 // RoleBindings seeded, across rbacNamespaces
	rbacClusterRoles = 200
	rbacNamespaces   = 50
	rbacRounds       = 4 // rounds of both sides at once
	// targetRBACRatio bounds RBAC's ConfigMap create p99 against the
	// privileged path's.
	targetRBACRatio = 1.05
)

// BenchmarkConfigMapCreateRBAC compares ConfigMap create latency through
// the two ends of the authorizer chain on one server, side by side:
//
//   - "allow-list": the admin (system:masters), allowed by the first link
//     of the chain with one group check, which is all the allow-list that
//     RBAC replaced ever did for its users (a group or user-name check
//     after the Node authorizer's no-opinion);
//   - "rbac": a user allowed by a RoleBinding, through the privileged-group
//     check, the Node authorizer and RBAC's index, in a cluster seeded
//     with 1,000 RoleBindings and 200 ClusterRoles.
//
// In each of rbacRounds rounds both sides create cmCount ConfigMaps into
// fresh namespaces at the same time, each with cmConcurrency/2 clients;
// it reports both p99s and their ratio.
func BenchmarkConfigMapCreateRBAC(b *testing.B) {
	s := startServer(b)
	admin := s.client()
	ctx := ctxFor(b, 30*time.Minute)
	warmUp(ctx, b, admin)
	seedRBAC(ctx, b, admin)
	ca, err := pki.LoadOrCreateCA(filepath.Join(s.dataDir, "server", "tls"))
	if err != nil {
		b.Fatal(err)
	}
	rc, err := ca.RESTConfig(s.config.Host, "bench-user", []string{"bench-team"})
	if err != nil {
		b.Fatal(err)
	}
	rc.QPS, rc.Burst, rc.Timeout = -1, 0, s.config.Timeout
	user, err := kubernetes.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	// prepare makes a fresh namespace the side's client may write.
	run := 0
	prepare := func(name string, cs kubernetes.Interface) string {
		ns := fmt.Sprintf("bench-rbac-%s-%d", name, run)
		run++
		createNamespace(ctx, b, admin, ns)
		bindBenchUser(ctx, b, admin, ns)
		waitAllowed(ctx, b, cs, ns)
		return ns
	}
	create := func(cs kubernetes.Interface, ns string, conc int) ([]time.Duration, time.Duration) {
		cms := cs.CoreV1().ConfigMaps(ns)
		lat, wall, err := parallel(cmCount, conc, func(i int) error {
			_, err := cms.Create(ctx, configMap(i), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			b.Fatalf("create in %s: %v", ns, err)
		}
		return lat, wall
	}
	// Warm the user's connection and paths too.
	create(user, prepare("warmup", user), cmConcurrency)

	// Both sides run at once, each with half the clients, so that they
	// share whatever else the machine (etcd compaction, the Go GC, other
	// processes) is doing: a side-by-side comparison under one load.
	var allowList, rbac []time.Duration
	var allowWall, rbacWall time.Duration
	b.ResetTimer()
	done := measure(b, s.pid())
	for range b.N {
		for range rbacRounds {
			nsA, nsR := prepare("allowlist", admin), prepare("rbac", user)
			var wg sync.WaitGroup
			var la, lr []time.Duration
			var wa, wr time.Duration
			wg.Add(2)
			go func() { defer wg.Done(); la, wa = create(admin, nsA, cmConcurrency/2) }()
			go func() { defer wg.Done(); lr, wr = create(user, nsR, cmConcurrency/2) }()
			wg.Wait()
			allowList, allowWall = append(allowList, la...), allowWall+wa
			rbac, rbacWall = append(rbac, lr...), rbacWall+wr
		}
	}
	b.StopTimer()
	done(len(allowList) + len(rbac))
	a, r := Summarize(allowList), Summarize(rbac)
	ratio := float64(r.P99) / float64(a.P99)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(Ms(a.P99), "allowlist-p99-ms")
	b.ReportMetric(Ms(r.P99), "rbac-p99-ms")
	b.ReportMetric(Ms(a.P50), "allowlist-p50-ms")
	b.ReportMetric(Ms(r.P50), "rbac-p50-ms")
	b.ReportMetric(ratio, "p99-ratio")
	b.Logf("ConfigMap create (%d x %d rounds, both sides at once, concurrency %d each): allow-list (system:masters) %s, %.0f/s; Node,RBAC (RoleBinding, %d RoleBindings, %d ClusterRoles) %s, %.0f/s; p99 ratio %.3f | target <= %.2f: %s",
		cmCount, rbacRounds*b.N, cmConcurrency/2, a, float64(a.N)/allowWall.Seconds(), rbacBindings, rbacClusterRoles, r,
		float64(r.N)/rbacWall.Seconds(), ratio, targetRBACRatio, verdict(ratio <= targetRBACRatio))
}

// seedRBAC fills the cluster with rbacClusterRoles ClusterRoles and
// rbacBindings RoleBindings of other users and groups, bench-team's among
// them (so the user's decision walks a realistic number of bindings).
func seedRBAC(ctx context.Context, b *testing.B, cs kubernetes.Interface) {
	b.Helper()
	for i := range rbacNamespaces {
		createNamespace(ctx, b, cs, fmt.Sprintf("rbac-seed-%d", i))
	}
	if _, _, err := parallel(rbacClusterRoles, cmConcurrency, func(i int) error {
		_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("seed-%d", i)},
			Rules: []rbacv1.PolicyRule{
				{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods", "services", "endpoints"}},
				{Verbs: []string{"create", "update"}, APIGroups: []string{""}, Resources: []string{fmt.Sprintf("widgets%d", i)}},
			}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatalf("seeding ClusterRoles: %v", err)
	}
	if _, _, err := parallel(rbacBindings, cmConcurrency, func(i int) error {
		_, err := cs.RbacV1().RoleBindings(fmt.Sprintf("rbac-seed-%d", i%rbacNamespaces)).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("seed-%d", i)},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fmt.Sprintf("seed-%d", i%rbacClusterRoles)},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: fmt.Sprintf("user-%d", i%100)},
				{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: fmt.Sprintf("team-%d", i%20)}}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatalf("seeding RoleBindings: %v", err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bench-configmaps"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// waitAllowed returns once cs may create ConfigMaps in ns: the binding
// just written has reached the authorizer (a watch delivery away).
func waitAllowed(ctx context.Context, b *testing.B, cs kubernetes.Interface, ns string) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: "create", Namespace: ns, Resource: "configmaps"}}}, metav1.CreateOptions{})
		if err == nil && r.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("not allowed to create ConfigMaps in %s: %v", ns, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// bindBenchUser lets bench-user's group create ConfigMaps in ns.
func bindBenchUser(ctx context.Context, b *testing.B, cs kubernetes.Interface, ns string) {
	b.Helper()
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "bench-configmaps"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "bench-team"}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}
