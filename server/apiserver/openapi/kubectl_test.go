package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/cmd/apply"
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
		case strings.HasPrefix(p, "/openapi/"):
			// As the API server does: the handler has all of /openapi/.
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
// the Deployment PATCH and so never fall back to /openapi/v2 (a protobuf
// download and client-side validation it does not need).
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

// runKubectl runs a kubectl command against srv, returning its output and
// the message it would have exited with (cmdutil.CheckErr), if any.
func runKubectl(t *testing.T, srv *fakeAPIServer, newCmd func(cmdutil.Factory, genericiooptions.IOStreams) command, args ...string) (out, fatal string) {
	t.Helper()
	f := kubectlFactory(t, srv.URL)
	cmdutil.BehaviorOnFatal(func(msg string, code int) { fatal = msg })
	defer cmdutil.DefaultBehaviorOnFatal()
	var buf bytes.Buffer
	cmd := newCmd(f, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &buf, ErrOut: &buf})
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil && fatal == "" {
		fatal = err.Error()
	}
	return buf.String(), fatal
}

// command is the part of a *cobra.Command the tests use.
type command interface {
	SetArgs([]string)
	Execute() error
}

func newApply(f cmdutil.Factory, s genericiooptions.IOStreams) command {
	return apply.NewCmdApply("kubectl", f, s)
}

func newExplain(f cmdutil.Factory, s genericiooptions.IOStreams) command {
	return explain.NewCmdExplain("kubectl", f, s)
}

// listManifest is what `kubectl get cm,deploy -o yaml` prints: a v1 List.
// extra is spliced into the Deployment's container.
func listManifest(extra string) string {
	return `apiVersion: v1
kind: List
metadata:
  resourceVersion: ""
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: cm, namespace: default}
  data: {a: "1"}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: default, labels: {app: web}}
  spec:
    replicas: 2
    selector: {matchLabels: {app: web}}
    strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 25%, maxUnavailable: 1}}
    template:
      metadata: {labels: {app: web}}
      spec:
        containers:
        - name: web
          image: nginx
          ports: [{containerPort: 80}]
          resources: {limits: {cpu: 500m, memory: 1Gi}}
` + extra
}

// TestKubectlApplyListValidatesWithV2 is `kubectl get cm,deploy -o yaml |
// kubectl apply -f -` (from a file: kubectl reads "-" from os.Stdin) with
// the default --validate=strict. cli-runtime declares v1/List unsupported
// by server-side field validation without asking the server, so kubectl
// validates each item itself against /openapi/v2, as protobuf; without it
// the command fails with "the server could not find the requested
// resource". Unknown fields in an item must be reported.
func TestKubectlApplyListValidatesWithV2(t *testing.T) {
	srv := newFakeAPIServer(t, testResources())
	manifest := filepath.Join(t.TempDir(), "list.yaml")
	if err := os.WriteFile(manifest, []byte(listManifest("")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, fatal := runKubectl(t, srv, newApply, "-f", manifest, "--dry-run=client", "-o", "name")
	if fatal != "" {
		t.Fatalf("kubectl apply: %s\n%s", fatal, out)
	}
	if got := strings.Fields(out); !slices.Equal(got, []string{"configmap/cm", "deployment.apps/web"}) {
		t.Errorf("output: %q", out)
	}
	if !slices.Contains(srv.paths(), "/openapi/v2") {
		t.Errorf("kubectl did not validate against /openapi/v2: %v", srv.paths())
	}

	// An unknown field and a wrong type inside a list item.
	if err := os.WriteFile(manifest, []byte(listManifest("          bogus: true\n          stdin: maybe\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, fatal = runKubectl(t, srv, newApply, "-f", manifest, "--dry-run=client", "-o", "name")
	for _, want := range []string{
		"error validating data",
		`ValidationError(Deployment.spec.template.spec.containers[0]): unknown field "bogus" in io.k8s.api.core.v1.Container`,
		`ValidationError(Deployment.spec.template.spec.containers[0].stdin): invalid type for io.k8s.api.core.v1.Container.stdin: got "string", expected "boolean"`,
	} {
		if !strings.Contains(fatal, want) {
			t.Errorf("kubectl apply of an invalid item: error lacks %q:\n%s\n%s", want, fatal, out)
		}
	}
	if strings.Contains(out, "created") || strings.Contains(out, "/") {
		t.Errorf("kubectl applied an invalid list: %q", out)
	}
	t.Logf("kubectl apply of an invalid item:\n%s", fatal)
}

// TestKubectlExplainOpenAPIV2 is `kubectl explain -o plaintext-openapiv2
// deployment.spec.strategy`, which reads only /openapi/v2.
func TestKubectlExplainOpenAPIV2(t *testing.T) {
	srv := newFakeAPIServer(t, testResources())
	out, fatal := runKubectl(t, srv, newExplain, "-o", "plaintext-openapiv2", "deployment.spec.strategy")
	if fatal != "" {
		t.Fatalf("kubectl explain: %s\n%s", fatal, out)
	}
	for _, want := range []string{
		"KIND:     Deployment", "VERSION:  apps/v1", "RESOURCE: strategy <Object>",
		"The deployment strategy to use to replace existing pods with new ones.",
		"rollingUpdate\t<Object>", "type\t<string>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("kubectl explain -o plaintext-openapiv2 deployment.spec.strategy:\n%s", out)
	if !slices.Contains(srv.paths(), "/openapi/v2") {
		t.Errorf("kubectl did not read /openapi/v2: %v", srv.paths())
	}
}
