package apiserver

import (
	"net/http"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kelp-project/kelp/server/apiserver/admission"
	"github.com/kelp-project/kelp/server/apiserver/admission/webhook"
	"github.com/kelp-project/kelp/server/apiserver/auth"
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

// admitConnect admits exec, attach and port-forward as upstream's
// connect handler does: a CONNECT whose object is the request's options
// (PodExecOptions, PodAttachOptions, PodPortForwardOptions). Logs are a
// read, not a CONNECT.
func (s *Server) admitConnect(r *http.Request, info requestInfo, sv *served, container string) error {
	q := r.URL.Query()
	flag := func(k string) bool { v := q.Get(k); return v == "true" || v == "1" }
	var opts runtime.Object
	switch info.Subresource {
	case "exec":
		opts = &corev1.PodExecOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodExecOptions"}, Stdin: flag("stdin"),
			Stdout: flag("stdout"), Stderr: flag("stderr"), TTY: flag("tty"), Container: container, Command: q["command"]}
	case "attach":
		opts = &corev1.PodAttachOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodAttachOptions"}, Stdin: flag("stdin"),
			Stdout: flag("stdout"), Stderr: flag("stderr"), TTY: flag("tty"), Container: container}
	case "portforward":
		pf := &corev1.PodPortForwardOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodPortForwardOptions"}}
		for _, v := range q["ports"] {
			for _, p := range strings.Split(v, ",") {
				if n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32); err == nil {
					pf.Ports = append(pf.Ports, int32(n))
				}
			}
		}
		opts = pf
	default:
		return nil
	}
	return s.admission.Connect(r.Context(), &admission.Attributes{Operation: "CONNECT", Resource: sv.GVR, Subresource: info.Subresource,
		Namespace: info.Namespace, Name: info.Name, Object: opts, User: auth.UserFrom(r.Context())})
}
