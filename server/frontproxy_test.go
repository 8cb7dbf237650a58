package server

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The ConfigMap extension API servers read is kube-apiserver's, and kept
// by every start.
func TestPublishAuthentication(t *testing.T) {
	fp := &frontProxy{caPEM: []byte("REQUEST-HEADER-CA")}
	client := fake.NewSimpleClientset()
	ctx := t.Context()
	if err := publishAuthentication(ctx, client, []byte("CLIENT-CA"), fp); err != nil {
		t.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, AuthenticationConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"client-ca-file":                     "CLIENT-CA",
		"requestheader-client-ca-file":       "REQUEST-HEADER-CA",
		"requestheader-allowed-names":        `["system:auth-proxy"]`,
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-uid-headers":          `["X-Remote-Uid"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
	}
	for k, v := range want {
		if cm.Data[k] != v {
			t.Errorf("%s = %q, want %q", k, cm.Data[k], v)
		}
	}
	if len(cm.Data) != len(want) {
		t.Errorf("data %v", cm.Data)
	}
	// An edit is undone by the next start; a new CA is published.
	cm.Data["requestheader-allowed-names"] = `["mallory"]`
	if _, err := client.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := publishAuthentication(ctx, client, []byte("CLIENT-CA-2"), fp); err != nil {
		t.Fatal(err)
	}
	cm, _ = client.CoreV1().ConfigMaps("kube-system").Get(ctx, AuthenticationConfigMap, metav1.GetOptions{})
	if cm.Data["requestheader-allowed-names"] != `["system:auth-proxy"]` || cm.Data["client-ca-file"] != "CLIENT-CA-2" {
		t.Errorf("not restored: %v", cm.Data)
	}
}
