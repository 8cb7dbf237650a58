package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// call sends a raw request with the admin credentials and decodes the
// Status the server answers with.
func call(t *testing.T, s *testServer, method, path, contentType string, body []byte) (int, metav1.Status, string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(s.config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, s.config.Host+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var st metav1.Status
	_ = json.Unmarshal(data, &st)
	return resp.StatusCode, st, string(data)
}

func expectStatus(t *testing.T, code int, st metav1.Status, raw string, wantCode int, wantReason metav1.StatusReason, msgPart string) {
	t.Helper()
	if code != wantCode || st.Code != int32(wantCode) || st.Reason != wantReason || st.Kind != "Status" {
		t.Fatalf("got HTTP %d %s/%d %q, want %d %s\n%s", code, st.Reason, st.Code, st.Message, wantCode, wantReason, raw)
	}
	if msgPart != "" && !strings.Contains(st.Message, msgPart) {
		t.Fatalf("message %q lacks %q", st.Message, msgPart)
	}
}

const cmPath = "/api/v1/namespaces/default/configmaps"

func TestBadInput(t *testing.T) {
	s := startServer(t)
	t.Run("malformed JSON", func(t *testing.T) {
		code, st, raw := call(t, s, "POST", cmPath, "application/json", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"`))
		expectStatus(t, code, st, raw, 400, metav1.StatusReasonBadRequest, "unexpected end of JSON input")
	})
	t.Run("malformed YAML", func(t *testing.T) {
		code, st, raw := call(t, s, "POST", cmPath, "application/yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x\n"))
		expectStatus(t, code, st, raw, 400, metav1.StatusReasonBadRequest, "yaml")
	})
	t.Run("unknown field under Strict", func(t *testing.T) {
		code, st, raw := call(t, s, "POST", cmPath+"?fieldValidation=Strict", "application/json",
			[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"dta":{"a":"b"}}`))
		expectStatus(t, code, st, raw, 400, metav1.StatusReasonBadRequest, `unknown field "dta"`)
	})
	t.Run("duplicate field under Strict", func(t *testing.T) {
		code, st, raw := call(t, s, "POST", cmPath+"?fieldValidation=Strict", "application/json",
			[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","name":"y"}}`))
		expectStatus(t, code, st, raw, 400, metav1.StatusReasonBadRequest, `duplicate field "metadata.name"`)
	})
	t.Run("unknown field under Warn is a warning", func(t *testing.T) {
		code, _, raw := call(t, s, "POST", cmPath+"?fieldValidation=Warn", "application/json",
			[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"warned"},"dta":{"a":"b"}}`))
		if code != 201 {
			t.Fatalf("Warn create: %d %s", code, raw)
		}
	})
	t.Run("invalid name and label", func(t *testing.T) {
		code, st, raw := call(t, s, "POST", cmPath, "application/json",
			[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name","labels":{"ok":"bad value!"}}}`))
		expectStatus(t, code, st, raw, 422, metav1.StatusReasonInvalid, "")
		fields := map[string]bool{}
		for _, c := range st.Details.Causes {
			fields[c.Field] = true
		}
		if !fields["metadata.name"] || !fields["metadata.labels"] {
			t.Fatalf("causes %+v, want metadata.name and metadata.labels", st.Details.Causes)
		}
	})
	t.Run("wrong Content-Type", func(t *testing.T) {
		code, st, raw := call(t, s, "POST", cmPath, "text/plain", []byte(`{}`))
		expectStatus(t, code, st, raw, 415, metav1.StatusReasonUnsupportedMediaType, "")
	})
	// A body without a Content-Type is read as JSON, as upstream reads it
	// (the FieldValidation conformance spec posts one so).
	t.Run("missing Content-Type", func(t *testing.T) {
		code, _, raw := call(t, s, "POST", cmPath, "", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`))
		if code != http.StatusCreated {
			t.Fatalf("POST without a Content-Type: %d %s, want 201", code, raw)
		}
	})
	t.Run("oversized body", func(t *testing.T) {
		big := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"a":"` + strings.Repeat("x", 3*1024*1024+10) + `"}}`
		code, st, raw := call(t, s, "POST", cmPath, "application/json", []byte(big))
		expectStatus(t, code, st, raw, 413, metav1.StatusReasonRequestEntityTooLarge, "")
	})
	t.Run("object over the stored size cap", func(t *testing.T) {
		// Under the 3 MiB body limit, over the 1.5 MiB stored-object cap.
		var env []string
		for i := 0; i < 1800; i++ {
			env = append(env, fmt.Sprintf(`{"name":"V%d","value":"%s"}`, i, strings.Repeat("v", 1000)))
		}
		body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"huge"},"spec":{"containers":[{"name":"c","image":"busybox","env":[` + strings.Join(env, ",") + `]}]}}`
		code, st, raw := call(t, s, "POST", "/api/v1/namespaces/default/pods", "application/json", []byte(body))
		expectStatus(t, code, st, raw, 413, metav1.StatusReasonRequestEntityTooLarge, "limit for a stored object")
	})
	t.Run("POST of an existing name", func(t *testing.T) {
		body := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"twice"}}`)
		if code, _, raw := call(t, s, "POST", cmPath, "application/json", body); code != 201 {
			t.Fatalf("first create %d %s", code, raw)
		}
		code, st, raw := call(t, s, "POST", cmPath, "application/json", body)
		expectStatus(t, code, st, raw, 409, metav1.StatusReasonAlreadyExists, `configmaps "twice" already exists`)
	})
	t.Run("stale update", func(t *testing.T) {
		cs := s.client()
		cm, err := cs.CoreV1().ConfigMaps("default").Create(ctxT(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stale"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		staleRV := cm.ResourceVersion
		cm.Data = map[string]string{"a": "1"}
		if _, err := cs.CoreV1().ConfigMaps("default").Update(ctxT(t), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		body := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"stale","resourceVersion":"` + staleRV + `"},"data":{"a":"2"}}`)
		code, st, raw := call(t, s, "PUT", cmPath+"/stale", "application/json", body)
		expectStatus(t, code, st, raw, 409, metav1.StatusReasonConflict,
			"the object has been modified; please apply your changes to the latest version and try again")
	})
	t.Run("no credentials", func(t *testing.T) {
		// Anonymous requests are system:anonymous, which RBAC gives only
		// the public paths: 403, as kube-apiserver's --anonymous-auth.
		body, code := s.raw("/api/v1/namespaces")
		var st metav1.Status
		_ = json.Unmarshal([]byte(body), &st)
		expectStatus(t, code, st, body, 403, metav1.StatusReasonForbidden,
			`namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces" in API group "" at the cluster scope`)
		if _, code := s.raw("/readyz"); code != 200 {
			t.Fatalf("anonymous /readyz: %d", code)
		}
		if body, code := s.raw("/version"); code != 200 || !strings.Contains(body, "gitVersion") {
			t.Fatalf("anonymous /version: %d %s", code, body)
		}
	})
	t.Run("namespaced create without a namespace", func(t *testing.T) {
		code, st, raw := call(t, s, "POST", "/api/v1/configmaps", "application/json", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`))
		expectStatus(t, code, st, raw, 405, metav1.StatusReasonMethodNotAllowed, "")
		code, st, raw = call(t, s, "GET", "/api/v1/configmaps/x", "", nil)
		expectStatus(t, code, st, raw, 404, metav1.StatusReasonNotFound, "")
	})
	t.Run("unknown resource", func(t *testing.T) {
		code, st, raw := call(t, s, "GET", "/api/v1/namespaces/default/widgets", "", nil)
		expectStatus(t, code, st, raw, 404, metav1.StatusReasonNotFound, "")
	})
	t.Run("bad JSON patch", func(t *testing.T) {
		code, st, raw := call(t, s, "PATCH", cmPath+"/twice", "application/json-patch+json", []byte(`[{"op":"explode"}]`))
		if code != 400 && code != 422 {
			t.Fatalf("bad JSON patch: %d %s", code, raw)
		}
		_ = st
	})
	// A patch's strict findings are upstream's 422 Invalid of the field
	// "patch" (a request body's are 400): the body's duplicate fields,
	// then the patched object's unknown ones, in one strict decoding error.
	t.Run("patches under Strict", func(t *testing.T) {
		for _, c := range []struct{ name, pt, body, want string }{
			{"merge patch, duplicate", "application/merge-patch+json", `{"data":{"a":"1","a":"2"}}`, `duplicate field "data.a"`},
			{"merge patch, unknown", "application/merge-patch+json", `{"dta":{"a":"1"}}`, `unknown field "dta"`},
			{"strategic merge patch, both", "application/strategic-merge-patch+json", `{"data":{"a":"1","a":"2"},"dta":"x"}`, `duplicate field "data.a", unknown field "dta"`},
			{"JSON patch, duplicate", "application/json-patch+json", `[{"op":"add","path":"/metadata/labels","path":"/metadata/annotations","value":{}}]`, `json patch duplicate field "[0].path"`},
		} {
			code, st, raw := call(t, s, "PATCH", cmPath+"/twice?fieldValidation=Strict", c.pt, []byte(c.body))
			expectStatus(t, code, st, raw, 422, metav1.StatusReasonInvalid, c.want)
			if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "patch" {
				t.Errorf("%s: causes %+v, want one of the field \"patch\"", c.name, st.Details.Causes)
			}
		}
		code, _, raw := call(t, s, "PATCH", cmPath+"/twice?fieldValidation=Ignore", "application/merge-patch+json", []byte(`{"dta":{"a":"1"},"data":{"a":"1","a":"2"}}`))
		if code != 200 {
			t.Fatalf("the same patch under Ignore: %d %s", code, raw)
		}
		// A patched object that does not decode is the patch's error too.
		code, st, raw := call(t, s, "PATCH", cmPath+"/twice", "application/merge-patch+json", []byte(`{"data":{"a":1}}`))
		expectStatus(t, code, st, raw, 422, metav1.StatusReasonInvalid, "patch")
	})
	t.Run("apply without fieldManager", func(t *testing.T) {
		code, st, raw := call(t, s, "PATCH", cmPath+"/twice", "application/apply-patch+yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: twice\n"))
		expectStatus(t, code, st, raw, 422, metav1.StatusReasonInvalid, "fieldManager")
	})
	t.Run("unknown patch type", func(t *testing.T) {
		code, st, raw := call(t, s, "PATCH", cmPath+"/twice", "application/x-unknown-patch", []byte("{}"))
		expectStatus(t, code, st, raw, 415, metav1.StatusReasonUnsupportedMediaType, "")
	})
}
