package apiserver

import (
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kelp-project/kelp/server/apiserver/admission/webhook"
)

// The admission webhooks' view of the API server: its loopback client for
// their informers (SetLoopback starts them), Services for their service
// references, the served table for kinds, versions and defaulting.

func (s *Server) newWebhooks(stop <-chan struct{}) (*webhook.Webhooks, error) {
	return webhook.New(webhook.Config{
		Services: s.getter(corev1.SchemeGroupVersion.WithResource("services")),
		Default:  s.defaultServed,
		Versions: s.servedVersions,
		Stop:     stop,
	})
}

// defaultServed applies the served kind's defaulting to an object a
// mutating webhook patched, as upstream defaults the patched object.
func (s *Server) defaultServed(obj runtime.Object) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		kinds, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil || len(kinds) == 0 {
			return
		}
		gvk = kinds[0]
	}
	for _, sv := range s.live().resources {
		if sv.GVK() == gvk && sv.Default != nil {
			sv.Default(obj)
			return
		}
	}
}

// servedVersions are the served versions of a group's resource with their
// kinds.
func (s *Server) servedVersions(gr schema.GroupResource) map[schema.GroupVersionResource]schema.GroupVersionKind {
	out := map[schema.GroupVersionResource]schema.GroupVersionKind{}
	for gvr, sv := range s.live().resources {
		if gvr.GroupResource() == gr {
			out[gvr] = sv.GVK()
		}
	}
	return out
}

// headerWarnings is the request's warning recorder (k8s.io/apiserver's
// warning.Recorder): what admission webhooks warn of goes out in Warning
// headers, as upstream's, each text once. Validating webhooks run in
// parallel, so it is locked.
type headerWarnings struct {
	w    http.ResponseWriter
	mu   sync.Mutex
	seen map[string]bool
}

func (h *headerWarnings) AddWarning(_, text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if text == "" || h.seen[text] {
		return
	}
	if h.seen == nil {
		h.seen = map[string]bool{}
	}
	h.seen[text] = true
	addWarning(h.w, text)
}
