package apiserver

import (
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelp-project/kelp/server/apiserver/registry"
)

// A create of a kind nothing acts on yet (Resource.NoController) answers
// with a Warning kubectl prints; other kinds' creates carry none. Both a
// POST and server-side apply's create answer through writeCreated.
func TestNoControllerWarning(t *testing.T) {
	s := &Server{}
	for _, tc := range []struct {
		name, warning string
	}{{"nothing acts on it", "kelp stores Widgets but nothing acts on them yet"}, {"acted on", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			sv := &served{Resource: &registry.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
				Kind: "ConfigMap", Namespaced: true, NoController: tc.warning}}
			w := httptest.NewRecorder()
			r := httptest.NewRequest("POST", "/api/v1/namespaces/default/configmaps", nil)
			s.writeCreated(w, r, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"}}, sv)
			if w.Code != 201 {
				t.Fatalf("code %d: %s", w.Code, w.Body)
			}
			got := w.Header().Values("Warning")
			if tc.warning == "" {
				if len(got) != 0 {
					t.Errorf("warnings %q, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], "299 - ") || !strings.Contains(got[0], tc.warning) {
				t.Errorf("warnings %q, want one 299 carrying %q", got, tc.warning)
			}
		})
	}
}
