package integration

import (
	"strings"
	"testing"
)

func TestServerSideApply(t *testing.T) {
	s := startServer(t)
	out := s.mustKubectl("apply", "--server-side", "-f", "testdata/deployment.yaml")
	if !strings.Contains(out, "serverside-applied") {
		t.Fatalf("apply --server-side: %s", out)
	}
	// The applier owns its fields; the deployment controller's status
	// writes add their own Update entry on the status subresource.
	mf := s.mustKubectl("get", "deploy", "container-lab", "-o", `jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation}/{.subresource};{end}`)
	if !strings.Contains(mf, "kubectl/Apply/;") {
		t.Fatalf("managedFields after apply: %q", mf)
	}
	s.mustKubectl("scale", "deploy", "container-lab", "--replicas=5")
	changed := strings.Replace(mustRead(t, "testdata/deployment.yaml"), "replicas: 3", "replicas: 2", 1)
	out, err := s.kubectlIn(changed, nil, "apply", "--server-side", "-f", "-")
	if err == nil || !strings.Contains(out, `conflict with "kubectl" with subresource "scale"`) || !strings.Contains(out, ".spec.replicas") {
		t.Fatalf("conflicting apply: err=%v\n%s", err, out)
	}
	out, err = s.kubectlIn(changed, nil, "apply", "--server-side", "--force-conflicts", "-f", "-")
	if err != nil {
		t.Fatalf("forced apply: %v\n%s", err, out)
	}
	if r := s.mustKubectl("get", "deploy", "container-lab", "-o", "jsonpath={.spec.replicas}"); r != "2" {
		t.Fatalf("replicas after forced apply = %s", r)
	}
	// A create or update records an Update entry for its manager.
	s.mustKubectl("create", "configmap", "plain", "--from-literal=a=1")
	if mf := s.mustKubectl("get", "cm", "plain", "-o", "jsonpath={.metadata.managedFields[0].manager}/{.metadata.managedFields[0].operation}"); mf != "kubectl-create/Update" {
		t.Errorf("managedFields after create: %q", mf)
	}
}
