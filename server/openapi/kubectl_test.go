package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/cmd/create"
	"k8s.io/kubectl/pkg/cmd/explain"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// fakeAPIServer serves the OpenAPI handler plus the legacy discovery
// documents kubectl needs to map kinds and resources, and records every
// path requested.
type fakeAPIServer struct {
	*httptest.Server
	mu        sync.Mutex
	requested []string
}

func (s *fakeAPIServer) paths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requested...)
}

func newFakeAPIServer(t *testing.T, rs []Resource) *fakeAPIServer {
	t.Helper()
	h := newTestHandler(t, rs)
	lists := map[string]*metav1.APIResourceList{}
	var groups metav1.APIGroupList
	for _, r := range rs {
		gv := r.Version
		if r.Group != "" {
			gv = r.Group + "/" + r.Version
		}
		l := lists[gvPath(r.Group, r.Version)]
		if l == nil {
			l = &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv}
			lists[gvPath(r.Group, r.Version)] = l
			if r.Group != "" {
				v := metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: r.Version}
				groups.Groups = append(groups.Groups, metav1.APIGroup{Name: r.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
			}
		}
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r.Plural, Namespaced: r.Namespaced, Kind: r.Kind, Verbs: r.Verbs})
		for _, sr := range r.Subresources {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: r.Plural + "/" + sr.Name, Namespaced: r.Namespaced, Kind: r.Kind, Verbs: []string{"get"}})
		}
	}
	groups.TypeMeta = metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	s := &fakeAPIServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requested = append(s.requested, r.URL.Path)
		s.mu.Unlock()
		p := strings.TrimSuffix(r.URL.Path, "/")
		switch {
		case strings.HasPrefix(p, "/openapi/v3"):
			h.ServeHTTP(w, r)
		case p == "/api":
			writeJSON(w, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
		case p == "/apis":
			writeJSON(w, groups)
		case lists[strings.TrimPrefix(p, "/")] != nil:
			writeJSON(w, lists[strings.TrimPrefix(p, "/")])
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// kubectlFactory is the factory kubectl's commands get, pointed at url.
func kubectlFactory(t *testing.T, url string) cmdutil.Factory {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: default}}]
current-context: x
`, url)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	cache := filepath.Join(dir, "cache")
	flags.CacheDir = &cache
	return cmdutil.NewFactory(flags)
}

// TestKubectlExplainCommand is `kubectl explain deployment.spec.strategy`,
// through kubectl's own option handling: discovery for the REST mapping,
// then the OpenAPI v3 renderer.
func TestKubectlExplainCommand(t *testing.T) {
	srv := newFakeAPIServer(t, testResources())
	f := kubectlFactory(t, srv.URL)
	var out bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}
	o, err := explain.NewExplainFlags(streams).ToOptions(f, "kubectl", []string{"deployment.spec.strategy"})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := o.Run(); err != nil {
		t.Fatalf("kubectl explain: %v\n%s", err, out.String())
	}
	for _, want := range []string{"KIND:       Deployment", "FIELD: strategy <DeploymentStrategy>", "The deployment strategy to use to replace existing pods with new ones."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestKubectlCreateStrictValidation is `kubectl create --dry-run=client -f`
// with the default --validate=strict: kubectl must find fieldValidation on
// the Deployment PATCH and so never fall back to /openapi/v2 (which kelp
// does not serve, and whose absence would fail the command).
func TestKubectlCreateStrictValidation(t *testing.T) {
	srv := newFakeAPIServer(t, testResources())
	f := kubectlFactory(t, srv.URL)
	manifest := filepath.Join(t.TempDir(), "d.yaml")
	os.WriteFile(manifest, []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
`), 0o600)

	var fatal string
	cmdutil.BehaviorOnFatal(func(msg string, code int) { fatal = msg })
	defer cmdutil.DefaultBehaviorOnFatal()

	var out bytes.Buffer
	cmd := create.NewCmdCreate(f, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SetArgs([]string{"-f", manifest, "--dry-run=client", "-o", "name"})
	if err := cmd.Execute(); err != nil || fatal != "" {
		t.Fatalf("kubectl create: %v %s\n%s", err, fatal, out.String())
	}
	if strings.TrimSpace(out.String()) != "deployment.apps/web" {
		t.Errorf("output: %q", out.String())
	}
	sawDoc := false
	for _, p := range srv.paths() {
		if strings.HasPrefix(p, "/openapi/v2") {
			t.Errorf("kubectl fell back to %s", p)
		}
		sawDoc = sawDoc || p == "/openapi/v3/apis/apps/v1"
	}
	if !sawDoc {
		t.Errorf("kubectl never read the apps/v1 document: %v", srv.paths())
	}
}
