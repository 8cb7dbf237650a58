package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fields splits a table line into its columns.
func fields(line string) []string {
	return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
}

func header(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "NAME") || strings.HasPrefix(l, "NAMESPACE") {
			return l
		}
	}
	return ""
}

func TestKubectlApplyAndGet(t *testing.T) {
	s := startServer(t)
	out := s.mustKubectl("apply", "-f", "testdata/deployment.yaml", "-f", "testdata/service.yaml")
	if !strings.Contains(out, "deployment.apps/container-lab created") || !strings.Contains(out, "service/container-lab created") {
		t.Fatalf("first apply: %s", out)
	}
	out = s.mustKubectl("apply", "-f", "testdata/deployment.yaml", "-f", "testdata/service.yaml")
	if !strings.Contains(out, "deployment.apps/container-lab unchanged") || !strings.Contains(out, "service/container-lab unchanged") {
		t.Fatalf("second apply should be unchanged: %s", out)
	}
	data, err := os.ReadFile("testdata/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(t.TempDir(), "deployment.yaml")
	if err := os.WriteFile(changed, []byte(strings.Replace(string(data), "container-lab:v2", "container-lab:v3", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out = s.mustKubectl("apply", "-f", changed)
	if !strings.Contains(out, "deployment.apps/container-lab configured") {
		t.Fatalf("apply of a new image: %s", out)
	}
	if img := s.mustKubectl("get", "deploy", "container-lab", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); img != "username/container-lab:v3" {
		t.Fatalf("image after apply = %q", img)
	}

	wide := map[string]string{
		"deploy": "NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR",
		"svc":    "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE SELECTOR",
		"ep":     "NAME ENDPOINTS AGE",
		"rs":     "NAME DESIRED CURRENT READY AGE CONTAINERS IMAGES SELECTOR",
		"pods":   "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES",
	}
	for res, want := range wide {
		out := s.mustKubectl("get", res, "-o", "wide")
		if got := strings.Join(fields(header(out)), " "); got != want {
			t.Errorf("get %s -o wide header = %q, want %q", res, got, want)
		}
	}
	out = s.mustKubectl("get", "svc", "container-lab")
	cols := fields(strings.Split(strings.TrimSpace(out), "\n")[1])
	if cols[0] != "container-lab" || cols[1] != "ClusterIP" || !strings.HasPrefix(cols[2], "10.43.") || cols[3] != "<none>" || cols[4] != "80/TCP" {
		t.Errorf("service row = %q", cols)
	}
	out = s.mustKubectl("get", "deploy,rs,pods,svc,ep", "-o", "wide")
	for _, want := range []string{"deployment.apps/container-lab", "service/container-lab", "service/kubernetes", "endpoints/kubernetes"} {
		if !strings.Contains(out, want) {
			t.Errorf("get deploy,rs,pods,svc,ep lacks %s:\n%s", want, out)
		}
	}
}

func TestKubectlEditingCommands(t *testing.T) {
	s := startServer(t)
	s.mustKubectl("apply", "-f", "testdata/deployment.yaml")
	get := func(path string) string {
		return s.mustKubectl("get", "deploy", "container-lab", "-o", "jsonpath="+path)
	}
	s.mustKubectl("label", "deploy", "container-lab", "tier=web")
	if v := get("{.metadata.labels.tier}"); v != "web" {
		t.Errorf("label: %q", v)
	}
	s.mustKubectl("annotate", "deploy", "container-lab", "note=hello")
	if v := get("{.metadata.annotations.note}"); v != "hello" {
		t.Errorf("annotate: %q", v)
	}
	gen := get("{.metadata.generation}")
	if out := s.mustKubectl("scale", "deploy", "container-lab", "--replicas=5"); !strings.Contains(out, "scaled") {
		t.Errorf("scale: %s", out)
	}
	if v := get("{.spec.replicas}"); v != "5" {
		t.Errorf("replicas after scale = %q", v)
	}
	if g := get("{.metadata.generation}"); g == gen {
		t.Errorf("generation not bumped by a spec change: %s", g)
	}
	s.mustKubectl("patch", "deploy", "container-lab", "--type=strategic", "-p",
		`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"busybox:1.36"}]}}}}`)
	if v := get("{.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort}"); v != "busybox:1.36 8000" {
		t.Errorf("strategic patch kept the rest of the container? %q", v)
	}
	s.mustKubectl("patch", "deploy", "container-lab", "--type=merge", "-p", `{"metadata":{"labels":{"merged":"yes"}}}`)
	if v := get("{.metadata.labels.merged}"); v != "yes" {
		t.Errorf("merge patch: %q", v)
	}
	s.mustKubectl("patch", "deploy", "container-lab", "--type=json", "-p", `[{"op":"replace","path":"/spec/replicas","value":2}]`)
	if v := get("{.spec.replicas}"); v != "2" {
		t.Errorf("json patch: %q", v)
	}
	out, err := s.kubectlIn("", []string{"KUBE_EDITOR=sed -i s/busybox:1.36/busybox:1.37/"}, "edit", "deploy", "container-lab")
	if err != nil || !strings.Contains(out, "edited") {
		t.Fatalf("edit: %v %s", err, out)
	}
	if v := get("{.spec.template.spec.containers[0].image}"); v != "busybox:1.37" {
		t.Errorf("edit: image %q", v)
	}

	// replace with a stale resourceVersion fails with upstream's message.
	stale := filepath.Join(t.TempDir(), "stale.yaml")
	if err := os.WriteFile(stale, []byte(s.mustKubectl("get", "deploy", "container-lab", "-o", "yaml")), 0o644); err != nil {
		t.Fatal(err)
	}
	s.mustKubectl("scale", "deploy", "container-lab", "--replicas=3")
	out, err = s.kubectl("replace", "-f", stale)
	if err == nil || !strings.Contains(out, "the object has been modified; please apply your changes to the latest version and try again") {
		t.Errorf("stale replace: err=%v out=%s", err, out)
	}

	out = s.mustKubectl("create", "deployment", "dry", "--image=nginx", "--dry-run=server", "-o", "name")
	if strings.TrimSpace(out) != "deployment.apps/dry" {
		t.Errorf("create --dry-run=server: %q", out)
	}
	if out, err := s.kubectl("get", "deploy", "dry"); err == nil || !strings.Contains(out, `"dry" not found`) {
		t.Errorf("dry-run created the object: %s", out)
	}

	if out := s.mustKubectl("delete", "deploy", "container-lab"); !strings.Contains(out, `deployment.apps "container-lab" deleted`) {
		t.Errorf("delete: %s", out)
	}
	if out, err := s.kubectl("get", "deploy", "container-lab"); err == nil || !strings.Contains(out, "NotFound") && !strings.Contains(out, "not found") {
		t.Errorf("after delete: %s", out)
	}
}

// `kubectl get -o yaml | kubectl apply -f -` sends a kind: List, which
// kubectl validates against /openapi/v2.
func TestKubectlApplyList(t *testing.T) {
	s := startServer(t)
	s.mustKubectl("create", "configmap", "a", "--from-literal=x=1")
	s.mustKubectl("apply", "-f", "testdata/deployment.yaml")
	list := s.mustKubectl("get", "cm/a", "deploy/container-lab", "-o", "yaml")
	if !strings.Contains(list, "kind: List") {
		t.Fatalf("expected a List: %s", list)
	}
	// Without the resourceVersions, as a user re-applying an export does:
	// the controllers may write the Deployment's status meanwhile, and a
	// stale one would be a (correct) 409.
	list = regexp.MustCompile(`(?m)^\s*resourceVersion: .*\n`).ReplaceAllString(list, "")
	out, err := s.kubectlIn(strings.Replace(list, "x: \"1\"", "x: \"2\"", 1), nil, "apply", "-f", "-")
	if err != nil || !strings.Contains(out, "configmap/a configured") || !strings.Contains(out, "deployment.apps/container-lab") {
		t.Fatalf("apply of a List: %v\n%s", err, out)
	}
	if v := s.mustKubectl("get", "cm", "a", "-o", "jsonpath={.data.x}"); v != "2" {
		t.Errorf("data after apply = %q", v)
	}
}

func TestKubectlReadingCommands(t *testing.T) {
	s := startServer(t)
	s.mustKubectl("apply", "-f", "testdata/deployment.yaml", "-f", "testdata/service.yaml")

	if out := s.mustKubectl("get", "deploy", "container-lab", "-o", "json"); !strings.Contains(out, `"kind": "Deployment"`) || !strings.Contains(out, `"resourceVersion"`) {
		t.Errorf("-o json: %s", out)
	}
	if out := s.mustKubectl("get", "deploy", "container-lab", "-o", "yaml"); !strings.Contains(out, "kind: Deployment") || !strings.Contains(out, "progressDeadlineSeconds: 600") {
		t.Errorf("-o yaml lacks kind or defaults: %s", out)
	}
	if out := s.mustKubectl("get", "svc", "kubernetes", "-o", "jsonpath={.spec.clusterIP}"); out != "10.43.0.1" {
		t.Errorf("kubernetes service IP = %q", out)
	}
	out := s.mustKubectl("describe", "deploy", "container-lab")
	for _, want := range []string{"Name:                   container-lab", "Replicas:               3 desired", "RollingUpdateStrategy:  0 max unavailable, 1 max surge", "Image:      username/container-lab:v2"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	out = s.mustKubectl("explain", "deployment.spec.strategy")
	if !strings.Contains(out, "rollingUpdate") || !strings.Contains(out, "Rolling update config params") {
		t.Errorf("explain: %s", out)
	}
	out = s.mustKubectl("api-resources")
	for _, want := range []string{"deployments", "deploy", "apps/v1", "pods", "po", "leases", "coordination.k8s.io/v1", "endpointslices", "clusterroles"} {
		if !strings.Contains(out, want) {
			t.Errorf("api-resources lacks %s", want)
		}
	}
	out = s.mustKubectl("version")
	if !strings.Contains(out, "Client Version: v1.37") || !strings.Contains(out, "Server Version: v1.37") {
		t.Errorf("version: %s", out)
	}
	if out := s.mustKubectl("get", "ns"); !strings.Contains(out, "kube-node-lease") || !strings.Contains(out, "Active") {
		t.Errorf("namespaces: %s", out)
	}
	if out := s.mustKubectl("auth", "can-i", "create", "pods"); strings.TrimSpace(out) != "yes" {
		t.Errorf("auth can-i: %q", out)
	}
	if out := s.mustKubectl("auth", "whoami"); !strings.Contains(out, "kelp-admin") || !strings.Contains(out, "system:masters") {
		t.Errorf("auth whoami: %s", out)
	}
	out = s.mustKubectl("get", "all")
	for _, want := range []string{"service/kubernetes", "deployment.apps/container-lab", "service/container-lab"} {
		if !strings.Contains(out, want) {
			t.Errorf("get all lacks %s:\n%s", want, out)
		}
	}
	if out := s.mustKubectl("get", "--raw", "/readyz?verbose"); !strings.Contains(out, "[+]etcd ok") || !strings.Contains(out, "readyz check passed") {
		t.Errorf("readyz?verbose: %s", out)
	}
}

func TestKubectlGetWatch(t *testing.T) {
	s := startServer(t)
	s.mustKubectl("create", "configmap", "watched", "--from-literal=a=1")
	done := make(chan string)
	go func() {
		out, _ := s.kubectl("get", "configmaps", "-w", "--request-timeout=6s")
		done <- out
	}()
	time.Sleep(2 * time.Second)
	s.mustKubectl("create", "configmap", "second", "--from-literal=b=2")
	s.mustKubectl("delete", "configmap", "watched")
	out := <-done
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("get -w printed %q", out)
	}
	var names []string
	for _, l := range lines[1:] {
		if f := fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	joined := strings.Join(names, ",")
	if !strings.Contains(joined, "watched") || !strings.Contains(joined, "second") {
		t.Errorf("get -w rows %v", names)
	}
}
