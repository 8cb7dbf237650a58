package ecosystem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var gadgets = schema.GroupVersionResource{Group: "eco.kelp.test", Version: "v1", Resource: "gadgets"}

// helmConfig is what `helm --kubeconfig K -n default` builds: the real
// Helm client with its Secret release storage, its kube client (REST
// mapper, discovery, three-way merge patches) and nothing of kelp's.
func helmConfig(t *testing.T, s *testServer) *action.Configuration {
	t.Helper()
	// Keep kubectl's discovery cache (which Helm's getter uses) out of
	// $HOME, so runs do not share cached discovery of other servers.
	t.Setenv("KUBECACHEDIR", t.TempDir())
	settings := cli.New()
	settings.KubeConfig = s.kubeconfig
	cfg := new(action.Configuration)
	logf := func(format string, v ...interface{}) {
		if os.Getenv("KELP_TEST_VERBOSE") != "" {
			t.Logf("helm: "+format, v...)
		}
	}
	if err := cfg.Init(settings.RESTClientGetter(), "default", "secret", logf); err != nil {
		t.Fatalf("helm init: %v", err)
	}
	return cfg
}

// helmList is `helm list --all` in the namespace: release name, revision
// and status of each.
func helmList(t *testing.T, cfg *action.Configuration) []string {
	t.Helper()
	l := action.NewList(cfg)
	l.All = true
	l.SetStateMask()
	rels, err := l.Run()
	if err != nil {
		t.Fatalf("helm list: %v", err)
	}
	var out []string
	for _, r := range rels {
		out = append(out, fmt.Sprintf("%s rev=%d %s chart=%s-%s", r.Name, r.Version, r.Info.Status, r.Chart.Metadata.Name, r.Chart.Metadata.Version))
	}
	return out
}

func expectList(t *testing.T, cfg *action.Configuration, want ...string) {
	t.Helper()
	got := helmList(t, cfg)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("helm list:\n got %q\nwant %q", got, want)
	}
}

// TestHelmLifecycle drives the Helm v3 client library through install,
// upgrade, rollback and uninstall of testdata/ecochart (a CRD, a custom
// object of it, a Deployment, a Service, RBAC objects), checking `helm
// list` and the objects in the cluster at each step.
func TestHelmLifecycle(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	chart, err := loader.Load(filepath.Join("testdata", "ecochart"))
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	cfg := helmConfig(t, s)
	cs := s.client()
	dyn, err := dynamic.NewForConfig(s.config)
	if err != nil {
		t.Fatal(err)
	}
	expectList(t, cfg)

	// Install: Helm creates the CRD from crds/, waits for it, refreshes
	// its discovery and REST mapper, then creates the templates, the
	// custom object among them.
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace, inst.Timeout = "eco", "default", time.Minute
	rel, err := inst.RunWithContext(ctx, chart, nil)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	if rel.Info.Status != release.StatusDeployed {
		t.Fatalf("install: status %s", rel.Info.Status)
	}
	expectList(t, cfg, "eco rev=1 deployed chart=ecochart-0.1.0")
	s.waitEstablished(ctx, "gadgets.eco.kelp.test")
	checkRelease(t, ctx, s, dyn, 1, "one", false)
	for _, get := range []func() error{
		func() error {
			_, err := cs.CoreV1().Services("default").Get(ctx, "eco-echo", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "eco-echo", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().Roles("default").Get(ctx, "eco-echo", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().RoleBindings("default").Get(ctx, "eco-echo", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Get(ctx, "eco-gadget-viewer", metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); err != nil {
			t.Fatalf("after install: %v", err)
		}
	}
	// The release is stored as Helm stores it: a Secret labelled owner=helm.
	secrets, err := cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=eco"})
	if err != nil || len(secrets.Items) != 1 {
		t.Fatalf("release Secrets after install: %v, %d", err, len(secrets.Items))
	}

	// Upgrade: new values patch the Deployment and the custom object (a
	// JSON merge patch: Helm knows custom objects take no strategic
	// merge) and add the extra ConfigMap.
	up := action.NewUpgrade(cfg)
	up.Namespace, up.Timeout = "default", time.Minute
	rel, err = up.RunWithContext(ctx, "eco", chart, map[string]interface{}{"replicas": 2, "message": "two", "extra": true})
	if err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	if rel.Version != 2 {
		t.Fatalf("upgrade: revision %d", rel.Version)
	}
	expectList(t, cfg, "eco rev=2 deployed chart=ecochart-0.1.0")
	checkRelease(t, ctx, s, dyn, 2, "two", true)

	// Rollback to revision 1: a third revision with the first's manifest;
	// the extra ConfigMap, not in it, is deleted.
	rb := action.NewRollback(cfg)
	rb.Version, rb.Timeout = 1, time.Minute
	if err := rb.Run("eco"); err != nil {
		t.Fatalf("helm rollback: %v", err)
	}
	expectList(t, cfg, "eco rev=3 deployed chart=ecochart-0.1.0")
	checkRelease(t, ctx, s, dyn, 1, "one", false)
	hist, err := action.NewHistory(cfg).Run("eco")
	if err != nil {
		t.Fatalf("helm history: %v", err)
	}
	var states []string
	for _, r := range hist {
		states = append(states, fmt.Sprintf("%d:%s", r.Version, r.Info.Status))
	}
	if got, want := strings.Join(states, " "), "1:superseded 2:superseded 3:deployed"; got != want {
		t.Fatalf("helm history: %s, want %s", got, want)
	}

	// Uninstall: the templates' objects and the release records go; the
	// CRD stays, as Helm never deletes what crds/ installed.
	un := action.NewUninstall(cfg)
	un.Timeout = time.Minute
	if _, err := un.Run("eco"); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	expectList(t, cfg)
	eventually(t, 15*time.Second, "chart objects deleted", func() (bool, string) {
		var left []string
		check := func(kind string, err error) {
			if !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%s: %v", kind, err))
			}
		}
		_, err := cs.AppsV1().Deployments("default").Get(ctx, "eco-echo", metav1.GetOptions{})
		check("deployment", err)
		_, err = cs.CoreV1().Services("default").Get(ctx, "eco-echo", metav1.GetOptions{})
		check("service", err)
		_, err = cs.CoreV1().ServiceAccounts("default").Get(ctx, "eco-echo", metav1.GetOptions{})
		check("serviceaccount", err)
		_, err = cs.RbacV1().Roles("default").Get(ctx, "eco-echo", metav1.GetOptions{})
		check("role", err)
		_, err = cs.RbacV1().RoleBindings("default").Get(ctx, "eco-echo", metav1.GetOptions{})
		check("rolebinding", err)
		_, err = cs.RbacV1().ClusterRoles().Get(ctx, "eco-gadget-viewer", metav1.GetOptions{})
		check("clusterrole", err)
		_, err = dyn.Resource(gadgets).Namespace("default").Get(ctx, "eco-gadget", metav1.GetOptions{})
		check("gadget", err)
		return len(left) == 0, strings.Join(left, "; ")
	})
	secrets, err = cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil || len(secrets.Items) != 0 {
		t.Fatalf("release Secrets after uninstall: %v, %d left", err, len(secrets.Items))
	}
	if _, err := s.crdClient().ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "gadgets.eco.kelp.test", metav1.GetOptions{}); err != nil {
		t.Fatalf("the chart's CRD after uninstall: %v (Helm keeps it)", err)
	}

	// A second install after the uninstall reuses the CRD that is there.
	inst = action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace, inst.Timeout = "eco2", "default", time.Minute
	if _, err := inst.RunWithContext(ctx, chart, map[string]interface{}{"message": "again"}); err != nil {
		t.Fatalf("helm install over the kept CRD: %v", err)
	}
	expectList(t, cfg, "eco2 rev=1 deployed chart=ecochart-0.1.0")
}

// checkRelease checks the Deployment's replicas and message, the custom
// object (its message, and size defaulted by the CRD's schema) and whether
// the extra ConfigMap exists.
func checkRelease(t *testing.T, ctx context.Context, s *testServer, dyn dynamic.Interface, replicas int32, msg string, extra bool) {
	t.Helper()
	cs := s.client()
	d, err := cs.AppsV1().Deployments("default").Get(ctx, "eco-echo", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("deployment: %v", err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
		t.Fatalf("deployment replicas %v, want %d", d.Spec.Replicas, replicas)
	}
	if env := d.Spec.Template.Spec.Containers[0].Env; len(env) != 1 || env[0].Value != msg {
		t.Fatalf("deployment env %+v, want MESSAGE=%s", env, msg)
	}
	g, err := dyn.Resource(gadgets).Namespace("default").Get(ctx, "eco-gadget", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("gadget: %v", err)
	}
	spec, _ := g.Object["spec"].(map[string]interface{})
	if spec["message"] != msg || fmt.Sprint(spec["size"]) != "3" {
		t.Fatalf("gadget spec %v, want message %q and the default size 3", spec, msg)
	}
	if g.GetAnnotations()["meta.helm.sh/release-name"] != "eco" || g.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
		t.Fatalf("gadget lacks Helm's ownership marks: %v %v", g.GetAnnotations(), g.GetLabels())
	}
	_, err = cs.CoreV1().ConfigMaps("default").Get(ctx, "eco-extra", metav1.GetOptions{})
	switch {
	case extra && err != nil:
		t.Fatalf("extra ConfigMap: %v", err)
	case !extra && !apierrors.IsNotFound(err):
		t.Fatalf("extra ConfigMap should not exist: %v", err)
	}
}
