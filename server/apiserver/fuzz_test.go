package apiserver

// Native Go fuzz targets for the request-decoding edge of the API server.
// The contract they check: bad input gets a Kubernetes Status error with
// the right code (400/404/409/410/413/415/422), never a panic and never a
// 500. Each target also runs as an ordinary unit test over its seed corpus
// (the f.Add seeds and testdata/fuzz/<Target>/), so `go test` replays every
// crasher that was ever saved there.
//
// Run one target for a while with
//
//	go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime 60s ./server/apiserver/
//
// or all of them with scripts/fuzz.sh.
//
// Inputs that hit a bug already reported (see knownBug) fail, so the saved
// inputs keep reproducing it until it is fixed; fixed ones stay as
// regression-* seeds.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/registry"
	"github.com/kelp-project/kelp/server/apiserver/storage"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// ---------------------------------------------------------------------------
// Shared helpers

// reasonsFor is the Status reason a client expects with each code
// (client-go's apierrors.IsBadRequest, IsInvalid, ... read the reason).
var reasonsFor = map[int32][]metav1.StatusReason{
	http.StatusBadRequest:            {metav1.StatusReasonBadRequest},
	http.StatusNotFound:              {metav1.StatusReasonNotFound},
	http.StatusConflict:              {metav1.StatusReasonConflict, metav1.StatusReasonAlreadyExists},
	http.StatusGone:                  {metav1.StatusReasonExpired, metav1.StatusReasonGone},
	http.StatusRequestEntityTooLarge: {metav1.StatusReasonRequestEntityTooLarge},
	http.StatusUnsupportedMediaType:  {metav1.StatusReasonUnsupportedMediaType},
	http.StatusUnprocessableEntity:   {metav1.StatusReasonInvalid},
}

// requireStatus asserts err is an API Status error, as the client will see
// it through toStatus, with one of the allowed codes and the matching
// reason. It returns the Status.
func requireStatus(t *testing.T, err error, allowed ...int32) *metav1.Status {
	t.Helper()
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		t.Fatalf("error is not an API Status (the client would get a 500): %T: %v", err, err)
	}
	st := toStatus(err)
	if !slices.Contains(allowed, st.Code) {
		t.Fatalf("status code %d (%s), want one of %v: %s", st.Code, st.Reason, allowed, st.Message)
	}
	if want, ok := reasonsFor[st.Code]; ok && !slices.Contains(want, st.Reason) {
		t.Fatalf("status code %d has reason %q, want one of %v: %s", st.Code, st.Reason, want, st.Message)
	}
	if st.Status != metav1.StatusFailure || st.Kind != "Status" || st.APIVersion != "v1" {
		t.Fatalf("malformed Status: %+v", st)
	}
	if st.Message == "" {
		t.Fatalf("Status %d %s has no message", st.Code, st.Reason)
	}
	return st
}

// knownBug fails the test on an input that hits an already reported bug,
// so its saved input keeps failing until the bug is fixed.
func knownBug(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Fatal("known bug: " + msg)
}

func resourceNamed(t testing.TB, resource string) *served {
	t.Helper()
	for _, r := range registry.All(registry.Options{}) {
		if r.GVR.Resource == resource {
			return &served{Resource: r}
		}
	}
	t.Fatalf("no resource %q in registry.All()", resource)
	return nil
}

func validWarning(v string) bool {
	if !strings.HasPrefix(v, `299 - "`) {
		return false
	}
	_, err := strconv.Unquote(strings.TrimPrefix(v, "299 - "))
	return err == nil
}

// storable checks that a decoded object survives what the store does with
// it: protobuf encoding with its kind set, and decoding back (every later
// GET, LIST and WATCH decodes those bytes).
func storable(t *testing.T, obj runtime.Object, gvk schema.GroupVersionKind, newObj func() runtime.Object) {
	t.Helper()
	c := obj.DeepCopyObject()
	c.GetObjectKind().SetGroupVersionKind(gvk)
	var buf bytes.Buffer
	if err := protoSerializer.Encode(c, &buf); err != nil {
		t.Fatalf("decoded object cannot be encoded as protobuf for storage: %v", err)
	}
	if _, _, err := protoSerializer.Decode(buf.Bytes(), nil, newObj()); err != nil {
		t.Fatalf("decoded object does not read back from its stored protobuf: %v", err)
	}
	buf.Reset()
	if err := jsonSerializer.Encode(c, &buf); err != nil {
		t.Fatalf("decoded object cannot be encoded as JSON: %v", err)
	}
	if !json.Valid(buf.Bytes()) {
		t.Fatalf("decoded object encodes to invalid JSON: %q", buf.Bytes())
	}
}

// kindFits: a decoded object's TypeMeta says nothing, or says the
// endpoint's kind (a body may leave out apiVersion or kind; the endpoint's
// are assumed).
func kindFits(gvk schema.GroupVersionKind, sv *served) bool {
	return (gvk.Kind == "" || gvk.Kind == sv.Kind) &&
		(gvk.GroupVersion() == schema.GroupVersion{} || gvk.GroupVersion() == sv.GVR.GroupVersion())
}

// ---------------------------------------------------------------------------
// FuzzDecode: request bodies through decodeInto.

var decodeResources = []string{"pods", "deployments", "configmaps", "services", "rolebindings", "clusterroles"}

var decodeMedia = map[string]bool{
	mediaJSON: true, mediaYAML: true, "application/x-yaml": true, "text/yaml": true, mediaProtobuf: true,
}

func fuzzPodJSON() []byte {
	return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},` +
		`"spec":{"containers":[{"name":"nginx","image":"nginx:1.27","ports":[{"containerPort":80}],` +
		`"resources":{"requests":{"cpu":"100m","memory":"128Mi"}}}]}}`)
}

func protoOf(t testing.TB, obj runtime.Object) []byte {
	var buf bytes.Buffer
	if err := protoSerializer.Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decodeOnce(body []byte, ct, fv string, sv *served) (runtime.Object, *httptest.ResponseRecorder, error) {
	r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/x", bytes.NewReader(body))
	r.URL.RawQuery = url.Values{"fieldValidation": {fv}}.Encode()
	if fv == "" {
		r.URL.RawQuery = ""
	}
	r.Header.Set("Content-Type", ct)
	w := httptest.NewRecorder()
	into := sv.New()
	err := decodeInto(w, r, body, mediaType(r), sv.GVK(), into)
	return into, w, err
}

func FuzzDecode(f *testing.F) {
	pod := fuzzPodJSON()
	f.Add(pod, mediaJSON, "Strict", uint8(0))
	f.Add(pod, mediaJSON+"; charset=utf-8", "", uint8(0))
	f.Add(pod, mediaJSON, "Warn", uint8(1)) // a Pod sent to deployments
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","bogus":1},"spec":{"containers":[{"name":"c","image":"i","imagePullPolicy":"Always","imagePullPolicy":"Never"}]}}`), mediaJSON, "Warn", uint8(0))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","bogus":1}}`), mediaJSON, "Strict", uint8(0))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","bogus":1}}`), mediaJSON, "Ignore", uint8(0))
	f.Add([]byte(`{"metadata":{"name":"a"}}`), mediaJSON, "Strict", uint8(2))
	f.Add([]byte(`{"kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`), mediaJSON, "", uint8(2))
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":1}}`), mediaJSON, "", uint8(2))
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":"3","selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`), mediaJSON, "Strict", uint8(1))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80,"targetPort":"http"}],"type":"NodePort"}}`), mediaJSON, "Strict", uint8(3))
	f.Add([]byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports:\n  - port: 80\n    targetPort: 8080\n"), mediaYAML, "Strict", uint8(3))
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\ndata:\n  x: &a [1]\n"), "application/x-yaml", "Warn", uint8(2))
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {on: yes, n: 012}\n"), "text/yaml", "Strict", uint8(2))
	f.Add([]byte("a: &a [x,x,x]\nb: &b [*a,*a,*a]\nc: &c [*b,*b,*b]\n"), mediaYAML, "Ignore", uint8(2))
	f.Add([]byte("---\n---\n"), mediaYAML, "", uint8(0))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1e1000"}}}]}}`), mediaJSON, "", uint8(0))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"999999999999999999999999999999Ei"}}}]}}`), mediaJSON, "", uint8(0))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"creationTimestamp":"2024-13-45T99:99:99Z"}}`), mediaJSON, "", uint8(0))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","spec":{"activeDeadlineSeconds":1e400}}`), mediaJSON, "", uint8(0))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","spec":{"activeDeadlineSeconds":-9223372036854775809}}`), mediaJSON, "", uint8(0))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`), mediaJSON, "", uint8(0))
	f.Add([]byte(`null`), mediaJSON, "", uint8(0))
	f.Add([]byte(`"x"`), mediaJSON, "", uint8(0))
	f.Add([]byte(" \n\t "), mediaJSON, "", uint8(0))
	f.Add([]byte{}, "", "", uint8(0))
	f.Add(pod, "", "", uint8(0))
	f.Add(pod, "application/cbor", "", uint8(0))
	f.Add(pod, "text/plain; charset=\"", "", uint8(0))
	f.Add(pod, mediaJSON, "strict", uint8(0))
	f.Add(pod, mediaJSON, "Strict,Warn", uint8(0))
	f.Add(protoOf(f, &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p"}}), mediaProtobuf, "Strict", uint8(0))
	f.Add(protoOf(f, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "c"}}), mediaProtobuf, "", uint8(0))
	f.Add([]byte("k8s\x00\x0a\x00\x12\x00"), mediaProtobuf, "", uint8(1))
	f.Add([]byte("k8s\x00\x0a\x04\x0a\x02v1\x12\x05\xff\xff\xff\xff\x0f"), mediaProtobuf, "", uint8(0))
	f.Add([]byte("not protobuf"), mediaProtobuf, "", uint8(0))
	f.Add([]byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"b"},"roleRef":{"kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","name":"a"},{"kind":"ServiceAccount","name":"s"}]}`), mediaJSON, "Strict", uint8(4))
	f.Add([]byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","roleRef":"x","subjects":{}}`), mediaJSON, "Strict", uint8(4))
	f.Add([]byte("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\naggregationRule:\n  clusterRoleSelectors: [{matchLabels: {a: b}}]\nrules:\n- {apiGroups: ['*'], resources: ['*'], verbs: ['*'], nonResourceURLs: [/x*]}\n"), mediaYAML, "Warn", uint8(5))
	f.Add([]byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","rules":[{"verbs":null,"resourceNames":[1]}]}`), mediaJSON, "", uint8(5))

	svs := make([]*served, len(decodeResources))
	for i, res := range decodeResources {
		svs[i] = resourceNamed(f, res)
	}
	f.Fuzz(func(t *testing.T, body []byte, ct, fv string, kind uint8) {
		sv := svs[int(kind)%len(svs)]
		into, w, err := decodeOnce(body, ct, fv, sv)
		hr := httptest.NewRequest(http.MethodPost, "/", nil)
		hr.Header.Set("Content-Type", ct)
		mt := mediaType(hr)
		validFV := fv == "" || fv == "Strict" || fv == "Warn" || fv == "Ignore"
		switch {
		case !validFV:
			st := requireStatus(t, err, http.StatusBadRequest)
			if !strings.Contains(st.Message, "fieldValidation") {
				t.Fatalf("bad fieldValidation %q rejected with an unrelated message: %s", fv, st.Message)
			}
			return
		case !decodeMedia[mt]:
			requireStatus(t, err, http.StatusUnsupportedMediaType)
			return
		case len(bytes.TrimSpace(body)) == 0:
			requireStatus(t, err, http.StatusBadRequest)
			return
		}
		warnings := w.Header().Values("Warning")
		for _, v := range warnings {
			if !validWarning(v) {
				t.Fatalf("malformed Warning header %q", v)
			}
		}
		if (fv == "Strict" || fv == "Ignore") && len(warnings) > 0 {
			t.Fatalf("fieldValidation=%s added warnings %q", fv, warnings)
		}
		if err != nil {
			requireStatus(t, err, http.StatusBadRequest, http.StatusRequestEntityTooLarge)
		} else {
			// A body may leave out apiVersion (the endpoint's is assumed),
			// but what it does say must be the endpoint's kind.
			if gvk := into.GetObjectKind().GroupVersionKind(); !kindFits(gvk, sv) {
				t.Fatalf("decoded a %v into the %s endpoint", gvk, sv.GVR.Resource)
			}
			storable(t, into, sv.GVK(), sv.New)
		}

		// The three valid directives must agree with each other: Ignore and
		// Warn accept the same bodies, and Strict accepts exactly those
		// Warn accepts without a warning.
		_, ww, errWarn := decodeOnce(body, ct, "Warn", sv)
		_, _, errStrict := decodeOnce(body, ct, "Strict", sv)
		_, wi, errIgnore := decodeOnce(body, ct, "Ignore", sv)
		nw := len(ww.Header().Values("Warning"))
		if (errWarn == nil) != (errIgnore == nil) {
			t.Fatalf("Warn and Ignore disagree: warn=%v ignore=%v", errWarn, errIgnore)
		}
		if (errStrict == nil) != (errWarn == nil && nw == 0) {
			t.Fatalf("Strict (err=%v) disagrees with Warn (err=%v, %d warnings)", errStrict, errWarn, nw)
		}
		if len(wi.Header().Values("Warning")) > 0 {
			t.Fatalf("Ignore produced warnings")
		}
		if errStrict != nil {
			requireStatus(t, errStrict, http.StatusBadRequest, http.StatusRequestEntityTooLarge)
		}
	})
}

// ---------------------------------------------------------------------------
// Patches: PatchJSON and applyPatch against a realistic stored Deployment.

// fuzzDeploymentJSON is a Deployment as the store hands it to applyPatch
// (after the server filled in defaults, uid, status...).
const fuzzDeploymentJSON = `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"container-lab","namespace":"default",` +
	`"uid":"8c3d3f0e-2a43-4f55-9d1c-3a1f0b7f5e21","resourceVersion":"1234","generation":3,` +
	`"creationTimestamp":"2025-01-02T03:04:05Z","labels":{"app":"container-lab","tier":"web"},` +
	`"annotations":{"deployment.kubernetes.io/revision":"2","kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"annotations\":{},\"name\":\"container-lab\",\"namespace\":\"default\"},\"spec\":{\"replicas\":3}}\n"},` +
	`"finalizers":["example.com/keep"]},` +
	`"spec":{"replicas":3,"selector":{"matchLabels":{"app":"container-lab"}},` +
	`"template":{"metadata":{"labels":{"app":"container-lab"},"annotations":{"kubectl.kubernetes.io/restartedAt":"2025-01-02T03:04:05Z"}},` +
	`"spec":{"volumes":[{"name":"config","configMap":{"name":"lab-config","defaultMode":420}},{"name":"cache","emptyDir":{}}],` +
	`"containers":[{"name":"app","image":"username/container-lab:v2","ports":[{"name":"http","containerPort":8000,"protocol":"TCP"}],` +
	`"env":[{"name":"MODE","value":"prod"},{"name":"POD_IP","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"status.podIP"}}}],` +
	`"resources":{"limits":{"memory":"256Mi"},"requests":{"cpu":"100m","memory":"128Mi"}},` +
	`"volumeMounts":[{"name":"config","mountPath":"/etc/lab"},{"name":"cache","mountPath":"/cache"}],` +
	`"readinessProbe":{"httpGet":{"path":"/healthz","port":8000,"scheme":"HTTP"},"timeoutSeconds":1,"periodSeconds":2,"successThreshold":1,"failureThreshold":3},` +
	`"lifecycle":{"preStop":{"exec":{"command":["sleep","5"]}}},` +
	`"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"},` +
	`{"name":"sidecar","image":"busybox:1.36","args":["sh","-c","tail -f /dev/null"],"resources":{},` +
	`"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],` +
	`"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler",` +
	`"tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]}},` +
	`"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":0,"maxSurge":1}},"revisionHistoryLimit":10,"progressDeadlineSeconds":600},` +
	`"status":{"observedGeneration":3,"replicas":3,"updatedReplicas":3,"readyReplicas":3,"availableReplicas":3,` +
	`"conditions":[{"type":"Available","status":"True","lastUpdateTime":"2025-01-02T03:05:00Z","lastTransitionTime":"2025-01-02T03:05:00Z","reason":"MinimumReplicasAvailable","message":"Deployment has minimum availability."}]}}`

// Real patches kubectl sends.
var (
	kubectlMergePatches = []string{
		`{"metadata":{"labels":{"env":"staging"}}}`,                                           // kubectl label deploy/x env=staging
		`{"metadata":{"labels":{"tier":null}}}`,                                               // kubectl label deploy/x tier-
		`{"metadata":{"annotations":{"owner":"team-a"}}}`,                                     // kubectl annotate
		`{"spec":{"replicas":5}}`,                                                             // kubectl scale (via /scale) / patch
		`{"metadata":{"finalizers":null}}`,                                                    // clearing finalizers
		`{"spec":{"paused":true}}`,                                                            // kubectl rollout pause
		`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]}}}}`, // replaces the whole list
		`{"spec":null}`,
		`{"metadata":{"resourceVersion":"1"}}`,
		`[]`,
		`5`,
		`null`,
		`{"a":{"b":{"c":{"d":null}}}}`,
	}
	kubectlStrategicPatches = []string{
		// kubectl set image deploy/x app=nginx:1.27
		`{"spec":{"template":{"spec":{"containers":[{"image":"nginx:1.27","name":"app"}]}}}}`,
		// kubectl rollout restart
		`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2025-06-01T12:00:00Z"}}}}}`,
		// kubectl rollout resume
		`{"spec":{"paused":null}}`,
		// kubectl set env deploy/x MODE=dev
		`{"spec":{"template":{"spec":{"containers":[{"env":[{"name":"MODE","value":"dev"}],"name":"app"}]}}}}`,
		// kubectl set resources
		`{"spec":{"template":{"spec":{"containers":[{"name":"app","resources":{"limits":{"cpu":"500m"}}}]}}}}`,
		// kubectl apply (client-side) removing the sidecar and a volume
		`{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}\n"}},"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"app"}],"$setElementOrder/volumes":[{"name":"config"}],"containers":[{"$patch":"delete","name":"sidecar"}],"volumes":[{"$patch":"delete","name":"cache"}]}}}}`,
		// kubectl apply reordering and adding a port
		`{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"sidecar"},{"name":"app"}],"containers":[{"$setElementOrder/ports":[{"containerPort":9000},{"containerPort":8000}],"name":"app","ports":[{"containerPort":9000,"name":"metrics"}]}]}}}}`,
		// kubectl apply switching strategy: $retainKeys
		`{"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate","rollingUpdate":null}}}`,
		// removing a finalizer from a primitive list
		`{"metadata":{"$deleteFromPrimitiveList/finalizers":["example.com/keep"]}}`,
		`{"metadata":{"$setElementOrder/finalizers":["b","example.com/keep"],"finalizers":["b"]}}`,
		// $patch: replace on a map and on a list
		`{"spec":{"template":{"spec":{"$patch":"replace","containers":[{"name":"only","image":"i"}]}}}}`,
		`{"spec":{"template":{"spec":{"containers":[{"$patch":"replace"},{"name":"x","image":"y"}]}}}}`,
		`{"spec":{"selector":{"$patch":"delete"}}}`,
		`{"$patch":"delete"}`,
		`{"spec":{"template":{"spec":{"tolerations":[{"$patch":"delete","key":"node.kubernetes.io/not-ready"}]}}}}`,
		// malformed directives
		`{"spec":{"template":{"spec":{"$setElementOrder/containers":"app"}}}}`,
		`{"spec":{"template":{"spec":{"$setElementOrder/containers":[1,2]}}}}`,
		`{"spec":{"template":{"spec":{"containers":[{"$patch":"delete"}]}}}}`,
		`{"spec":{"template":{"spec":{"containers":[{"$patch":"bogus","name":"app"}]}}}}`,
		`{"spec":{"strategy":{"$retainKeys":"type"}}}`,
		`{"spec":{"strategy":{"$retainKeys":["nope"],"type":"Recreate"}}}`,
		`{"metadata":{"$deleteFromPrimitiveList/finalizers":"x"}}`,
		`{"spec":{"template":{"spec":{"containers":{"name":"app"}}}}}`,
		`{"spec":{"template":{"spec":{"containers":[[{"name":"app"}]]}}}}`,
		`{"spec":{"template":{"spec":{"containers":[{"name":"app","ports":[{"$patch":"delete","containerPort":8000}]}]}}}}`,
		`{"spec":{"template":{"spec":{"containers":[null]}}}}`,
		`{"spec":{"template":{"spec":{"containers":[{"name":null}]}}}}`,
		`{"spec":{"template":{"spec":{"containers":null}}}}`,
		`{"status":{"conditions":[{"type":"Available","status":"False"}]}}`,
	}
	kubectlJSONPatches = []string{
		// kubectl rollout undo: replaces the template and the annotations
		`[{"op":"replace","path":"/spec/template","value":{"metadata":{"labels":{"app":"container-lab"}},"spec":{"containers":[{"name":"app","image":"username/container-lab:v1"}]}}},{"op":"replace","path":"/metadata/annotations","value":{"deployment.kubernetes.io/revision":"3"}}]`,
		`[{"op":"replace","path":"/spec/replicas","value":2}]`,
		`[{"op":"add","path":"/metadata/labels/env","value":"prod"}]`,
		`[{"op":"remove","path":"/metadata/labels/tier"}]`,
		`[{"op":"add","path":"/spec/template/spec/containers/-","value":{"name":"new","image":"busybox"}}]`,
		`[{"op":"remove","path":"/spec/template/spec/containers/1"}]`,
		`[{"op":"test","path":"/metadata/resourceVersion","value":"1234"},{"op":"replace","path":"/spec/replicas","value":0}]`,
		`[{"op":"test","path":"/spec/replicas","value":7}]`,
		`[{"op":"move","from":"/metadata/labels/tier","path":"/metadata/annotations/tier"}]`,
		`[{"op":"copy","from":"/spec/template/spec/containers/0","path":"/spec/template/spec/containers/-"}]`,
		`[{"op":"remove","path":"/metadata/finalizers/0"}]`,
		`[{"op":"add","path":"/metadata/labels/a~1b","value":"x"}]`,
		`[{"op":"replace","path":"","value":{"kind":"Deployment","apiVersion":"apps/v1"}}]`,
		`[{"op":"remove","path":"/spec/template/spec/containers/-1"}]`,
		`[{"op":"remove","path":"/spec/template/spec/containers/99"}]`,
		`[{"op":"add","path":"/spec/template/spec/containers/9223372036854775807","value":{}}]`,
		`[{"op":"replace","path":"/nope/deeper","value":1}]`,
		`[{"op":"explode"}]`,
		`[{"op":"add","path":"/spec/replicas"}]`,
		`[{"op":"move","from":"/spec","path":"/spec/template"}]`,
		`[{"op":"copy","from":"/nope","path":"/spec/x"}]`,
		`{"op":"add"}`,
		`[]`,
		`[null]`,
		`[1]`,
		`[{"op":null,"path":null}]`,
		`[{"op":"add","path":1,"value":1}]`,
		`[{"op":"remove","path":"/"}]`,
		`[{"op":"remove","path":""}]`,
	}
)

// maxCopyBytes is upstream's limit on what the copy operations of one JSON
// patch may add (kube-apiserver sets jsonpatch.AccumulatedCopySizeLimit from
// JSONPatchMaxCopyBytes, 3 MiB by default, and answers 422 past it).
const maxCopyBytes = 3 * 1024 * 1024

// copyBombPatch doubles the Deployment's spec n times with copy operations.
func copyBombPatch(n int) []byte {
	var ops []string
	for i := range n {
		ops = append(ops, fmt.Sprintf(`{"op":"copy","from":"/spec","path":"/spec/c%d"}`, i))
	}
	return []byte("[" + strings.Join(ops, ",") + "]")
}

func fuzzPatch(f *testing.F, pt types.PatchType, seeds []string, allowed ...int32) {
	for _, s := range seeds {
		for _, fv := range []uint8{0, 1} {
			f.Add([]byte(s), fv)
		}
	}
	sv := resourceNamed(f, "deployments")
	cur := sv.New()
	if err := runtime.DecodeInto(jsonSerializer, []byte(fuzzDeploymentJSON), cur); err != nil {
		f.Fatalf("seed deployment: %v", err)
	}
	original, err := runtime.Encode(jsonSerializer, cur)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, patch []byte, fvSel uint8) {
		var out []byte
		var err error
		if p, stack := catchPanic(func() { out, err = PatchJSON(pt, original, patch, &appsv1.Deployment{}) }); p != nil {
			if pt == types.JSONPatchType && rootOpWithoutValue(patch) {
				knownBug(t, "PatchJSON panics on a JSON patch test or replace operation at the root without a value (%v); ServeHTTP turns it into a 500 instead of a 4xx\n%s", p, stack)
			}
			if pt == types.StrategicMergePatchType && strings.Contains(fmt.Sprint(p), "comparing uncomparable") {
				knownBug(t, "PatchJSON panics on a strategic merge patch whose merge key value is a list or object (%v); ServeHTTP turns it into a 500 instead of a 400\n%s", p, stack)
			}
			t.Fatalf("PatchJSON(%s, %q) panicked: %v\n%s", pt, patch, p, stack)
		}
		if err != nil {
			requireStatus(t, err, allowed...)
		} else {
			if !json.Valid(out) {
				t.Fatalf("patch succeeded with invalid JSON output: %q", out)
			}
			// Nothing but the patch itself (and, for JSON patch, upstream's
			// bounded copies) can make the document grow. Go's encoder may
			// escape <, > and & in the patch's strings (6 bytes each).
			limit := 2*len(original) + 6*len(patch) + 1024
			if pt == types.JSONPatchType {
				limit += maxCopyBytes
			}
			if len(out) > limit {
				if pt == types.JSONPatchType && bytes.Contains(patch, []byte("copy")) {
					t.Fatalf("JSON patch copy operations are unbounded: %d-byte patch grew the object to %d bytes (upstream: 422 past %d copied bytes)", len(patch), len(out), maxCopyBytes)
				}
				t.Fatalf("%d-byte %s patch grew a %d-byte object to %d bytes", len(patch), pt, len(original), len(out))
			}
		}

		// The full request path: applyPatch patches the current object and
		// decodes the result under the request's fieldValidation.
		r := httptest.NewRequest(http.MethodPatch, "/apis/apps/v1/namespaces/default/deployments/container-lab", nil)
		r.URL.RawQuery = []string{"", "fieldValidation=Strict", "fieldValidation=Ignore"}[int(fvSel)%3]
		w := httptest.NewRecorder()
		var obj runtime.Object
		var aerr error
		if p, stack := catchPanic(func() { obj, aerr = applyPatch(w, r, sv, pt, patch, cur.DeepCopyObject()) }); p != nil {
			t.Fatalf("applyPatch(%s, %q) panicked: %v\n%s", pt, patch, p, stack)
		}
		if err != nil {
			if aerr == nil {
				t.Fatalf("PatchJSON failed (%v) but applyPatch succeeded", err)
			}
			if toStatus(aerr).Code != toStatus(err).Code {
				t.Fatalf("applyPatch answered %d, PatchJSON %d", toStatus(aerr).Code, toStatus(err).Code)
			}
			return
		}
		if aerr != nil {
			// The patch applied but the result is not a Deployment.
			requireStatus(t, aerr, http.StatusBadRequest, http.StatusUnprocessableEntity)
			return
		}
		d, ok := obj.(*appsv1.Deployment)
		if !ok {
			t.Fatalf("applyPatch returned %T", obj)
		}
		if gvk := d.GroupVersionKind(); !kindFits(gvk, sv) {
			t.Fatalf("patched object has kind %v", gvk)
		}
		for _, v := range w.Header().Values("Warning") {
			if !validWarning(v) {
				t.Fatalf("malformed Warning header %q", v)
			}
		}
		storable(t, d, sv.GVK(), sv.New)
	})
}

// catchPanic runs fn and returns what it panicked with, and where.
func catchPanic(fn func()) (p any, stack []byte) {
	defer func() {
		if p = recover(); p != nil {
			stack = debug.Stack()
		}
	}()
	fn()
	return nil, nil
}

// rootOpWithoutValue: the patch has {"op":"test","path":""} or
// {"op":"replace","path":""} with no "value" member, which makes
// json-patch v4 dereference a nil node.
func rootOpWithoutValue(patch []byte) bool {
	var ops []map[string]json.RawMessage
	if json.Unmarshal(patch, &ops) != nil {
		return false
	}
	for _, op := range ops {
		var name, path string
		_ = json.Unmarshal(op["op"], &name)
		_ = json.Unmarshal(op["path"], &path)
		if _, hasValue := op["value"]; (name == "test" || name == "replace") && path == "" && !hasValue {
			return true
		}
	}
	return false
}

func FuzzPatchJSON(f *testing.F) {
	f.Add(copyBombPatch(4), uint8(0))
	fuzzPatch(f, types.JSONPatchType, kubectlJSONPatches,
		http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity)
}

func FuzzPatchMerge(f *testing.F) {
	fuzzPatch(f, types.MergePatchType, kubectlMergePatches,
		http.StatusBadRequest, http.StatusUnprocessableEntity)
}

func FuzzPatchStrategic(f *testing.F) {
	fuzzPatch(f, types.StrategicMergePatchType, kubectlStrategicPatches,
		http.StatusBadRequest, http.StatusUnprocessableEntity)
}

// ---------------------------------------------------------------------------
// FuzzTokenRequest: serviceaccounts/token bodies through decoding,
// defaulting and validation: every refusal is a 400, 415 or 422 Status.

func FuzzTokenRequest(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"audiences":["a"],"expirationSeconds":3600}}`), mediaJSON)
	f.Add([]byte(`{"spec":{"expirationSeconds":60}}`), mediaJSON)
	f.Add([]byte(`{"spec":{"expirationSeconds":-1}}`), mediaJSON)
	f.Add([]byte(`{"spec":{"expirationSeconds":99999999999999999999}}`), mediaJSON)
	f.Add([]byte(`{"spec":{"expirationSeconds":"soon"}}`), mediaJSON)
	f.Add([]byte(`{"spec":{"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"p","uid":"u"}}}`), mediaJSON)
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod"}`), mediaJSON)
	f.Add([]byte("spec:\n  expirationSeconds: 4294967297\n"), mediaYAML)
	f.Add([]byte(`null`), mediaJSON)
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/serviceaccounts/app/token", bytes.NewReader(body))
		r.Header.Set("Content-Type", ct)
		tr := &authenticationv1.TokenRequest{}
		if err := decodeInto(httptest.NewRecorder(), r, body, mediaType(r), tokenRequestGVK, tr); err != nil {
			requireStatus(t, err, http.StatusBadRequest, http.StatusUnsupportedMediaType)
			return
		}
		defaults.TokenRequest(tr)
		if tr.Spec.ExpirationSeconds == nil {
			t.Fatal("no expirationSeconds after defaulting")
		}
		secs := *tr.Spec.ExpirationSeconds
		errs := validation.TokenRequest(tr)
		if ok := secs >= 600 && secs <= 1<<32; ok != (len(errs) == 0) {
			t.Fatalf("expirationSeconds %d: errors %v", secs, errs)
		}
		if len(errs) > 0 {
			requireStatus(t, apierrors.NewInvalid(tokenRequestGVK.GroupKind(), "app", errs), http.StatusUnprocessableEntity)
		}
	})
}

// ---------------------------------------------------------------------------
// FuzzParseRequest: request lines through parseRequest, plus the header and
// query parsing every request goes through (Accept, Content-Type,
// fieldValidation, dryRun).

func FuzzParseRequest(f *testing.F) {
	for _, s := range []struct{ method, target, accept string }{
		{"GET", "/api/v1/namespaces/default/pods", "application/json"},
		{"GET", "/api/v1/namespaces/default/pods?watch=true&resourceVersion=10", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
		{"GET", "/api/v1/namespaces/default/pods/web", "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io"},
		{"GET", "/api/v1/namespaces/default/pods/web/log?follow=1", "*/*"},
		{"HEAD", "/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale", ""},
		{"POST", "/api/v1/namespaces/default/pods/web/binding", "application/vnd.kubernetes.protobuf, */*"},
		{"PUT", "/api/v1/namespaces/kube-system/status", "application/yaml"},
		{"PUT", "/api/v1/namespaces/kube-system/finalize", ""},
		{"PATCH", "/apis/apps/v1/namespaces/default/deployments/web?fieldManager=kubectl&fieldValidation=Strict", ""},
		{"DELETE", "/api/v1/namespaces/default/pods?dryRun=All", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
		{"DELETE", "/api/v1/namespaces/default", ""},
		{"GET", "/api/v1/namespaces", ""},
		{"GET", "/api/v1/namespaces//pods", ""},
		{"GET", "/api/v1/pods//status", ""},
		{"GET", "/apis/apps/v1/", ""},
		{"GET", "/apis/apps", ""},
		{"GET", "/api", ""},
		{"GET", "/", ""},
		{"GET", "/healthz/etcd", ""},
		{"GET", "/api/v1/namespaces/a%2Fb/pods", ""},
		{"GET", "/api/v1/namespaces/%2E%2E/pods/%00", ""},
		{"GET", "/api/v1///", ""},
		{"OPTIONS", "/api/v1/pods", ""},
		{"CONNECT", "/api/v1/namespaces/default/pods/web/exec", ""},
		{"GET", "*", ""},
		{"GET", "http://example.com/api/v1/pods", "application/json;q=x"},
		{"GET", "/api/v1/pods?fieldValidation=Bogus&dryRun=Nope", "text/html"},
	} {
		f.Add(s.method, s.target, s.accept)
	}
	f.Fuzz(func(t *testing.T, method, target, acceptHdr string) {
		raw := method + " " + target + " HTTP/1.1\r\nHost: kelp\r\nAccept: " + acceptHdr + "\r\n\r\n"
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // net/http answers 400 before the handler runs
		}
		info := parseRequest(r)
		if again := parseRequest(r); !reflect.DeepEqual(again, info) {
			t.Fatalf("parseRequest is not deterministic: %+v vs %+v", info, again)
		}
		if info.Path != r.URL.Path {
			t.Fatalf("Path %q, want %q", info.Path, r.URL.Path)
		}
		checkRequestInfo(t, r, info)

		a := negotiate(r)
		switch a.media {
		case mediaJSON, mediaYAML, mediaProtobuf:
		default:
			t.Fatalf("negotiated media %q", a.media)
		}
		switch a.as {
		case "", "Table", "PartialObjectMetadata", "PartialObjectMetadataList":
		default:
			t.Fatalf("negotiated as=%q", a.as)
		}
		if a.as == "Table" && a.media == mediaProtobuf {
			t.Fatalf("negotiated a protobuf Table")
		}
		if a.invalid && (a.media != mediaJSON || a.as != "") {
			t.Fatalf("invalid Accept negotiated %+v", a)
		}
		if r.Header.Get("Accept") == "" && a != (accept{media: mediaJSON}) {
			t.Fatalf("no Accept header negotiated %+v", a)
		}
		if v, err := fieldValidation(r); err != nil {
			requireStatus(t, err, http.StatusBadRequest)
		} else if v != "Strict" && v != "Warn" && v != "Ignore" {
			t.Fatalf("fieldValidation %q", v)
		}
		if _, err := dryRun(r); err != nil {
			requireStatus(t, err, http.StatusBadRequest)
		}
	})
}

func checkRequestInfo(t *testing.T, r *http.Request, info requestInfo) {
	t.Helper()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		if info.Group != "" || info.Version != parts[1] {
			t.Fatalf("%q: group/version %q/%q", r.URL.Path, info.Group, info.Version)
		}
		rest = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		if info.Group != parts[1] || info.Version != parts[2] {
			t.Fatalf("%q: group/version %q/%q", r.URL.Path, info.Group, info.Version)
		}
		rest = parts[3:]
	default:
		want := requestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
		if !reflect.DeepEqual(info, want) {
			t.Fatalf("%s %q: non-resource request parsed as %+v", r.Method, r.URL.Path, info)
		}
		return
	}
	if !info.IsResource {
		t.Fatalf("%q: not a resource request", r.URL.Path)
	}
	// A list or watch names an object only through its fieldSelector
	// (metadata.name), never through the path.
	if info.Verb == "list" || info.Verb == "watch" {
		if info.Name != "" {
			if name, _ := fields.ParseSelectorOrDie(r.URL.Query().Get("fieldSelector")).RequiresExactMatch("metadata.name"); name != info.Name {
				t.Fatalf("%q: list named %q, not by its fieldSelector", r.URL, info.Name)
			}
		}
		info.Name = ""
	}
	for _, s := range []string{info.Namespace, info.Resource, info.Name} {
		if strings.Contains(s, "/") {
			t.Fatalf("%q: path segment with a slash in %+v", r.URL.Path, info)
		}
	}
	// The pieces put back together must give the path again.
	var segs []string
	if info.Namespace != "" {
		segs = append(segs, "namespaces", info.Namespace)
	}
	segs = append(segs, info.Resource)
	if info.Name != "" || info.Subresource != "" {
		segs = append(segs, info.Name)
	}
	if info.Subresource != "" {
		segs = append(segs, info.Subresource)
	}
	got, want := strings.Join(segs, "/"), strings.Join(rest, "/")
	// "namespaces//pods" names no namespace: a request across all of them,
	// as upstream reads it.
	emptyNS := len(rest) >= 3 && rest[0] == "namespaces" && rest[1] == "" && got == strings.Join(rest[2:], "/")
	if got != want && !emptyNS {
		t.Fatalf("%q: parsed as %+v, which reads back as %q", r.URL.Path, info, got)
	}
	q := r.URL.Query()
	var verb string
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case info.Name != "":
			verb = "get"
		case isTrue(q.Get("watch")):
			verb = "watch"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if info.Name == "" {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(r.Method)
	}
	if info.Verb != verb {
		t.Fatalf("%s %q: verb %q, want %q", r.Method, r.URL, info.Verb, verb)
	}
}

// ---------------------------------------------------------------------------
// FuzzListOptions: list and watch query strings.

var listResources = []string{"pods", "nodes", "events", "secrets", "services", "namespaces"}

func samplePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", Labels: map[string]string{"app": "web", "tier": "front"}},
		Spec:       corev1.PodSpec{NodeName: "node-1", RestartPolicy: corev1.RestartPolicyAlways, SchedulerName: "default-scheduler"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"},
	}
}

func FuzzListOptions(f *testing.F) {
	for _, q := range []string{
		"",
		"limit=500",
		"limit=-1",
		"limit=1e3",
		"limit=9223372036854775808",
		"resourceVersion=0",
		"resourceVersion=12&resourceVersionMatch=Exact",
		"resourceVersion=12&resourceVersionMatch=NotOlderThan&limit=2",
		"resourceVersionMatch=Exact",
		"resourceVersionMatch=Bogus&resourceVersion=1",
		"resourceVersion=-1",
		"resourceVersion=%2B5",
		"resourceVersion=abc",
		"continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTAsInN0YXJ0Ijoid2ViLTBcdTAwMDAifQ&limit=1",
		"continue=abc&resourceVersion=5",
		"continue=abc&resourceVersion=0",
		"labelSelector=app%3Dweb%2Ctier+in+(front,back)%2C!canary",
		"labelSelector=app%3D%3D",
		"labelSelector=a+notin+()",
		"labelSelector=" + strings.Repeat("a", 70) + "%3Db",
		"fieldSelector=spec.nodeName%3Dnode-1%2Cstatus.phase!%3DFailed",
		"fieldSelector=metadata.name%3Dweb-0%2Cmetadata.namespace%3Ddefault",
		"fieldSelector=spec.bogus%3Dx",
		"fieldSelector=a%3D%3D%3Db",
		"fieldSelector=spec.nodeName%3D%5C",
		"fieldSelector=involvedObject.kind%3DPod",
		"fieldSelector=type%3DOpaque",
		"watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
		"watch=1&sendInitialEvents=false",
		"sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=",
		"limit=%zz",
		"resourceVersion=1;limit=2",
	} {
		for _, v := range []uint8{0, 1} {
			f.Add(q, v, "default", uint8(0))
		}
	}
	f.Add("fieldSelector=spec.unschedulable%3Dtrue", uint8(0), "", uint8(1))
	f.Add("fieldSelector=involvedObject.name%3Dx", uint8(0), "default", uint8(2))
	f.Add("fieldSelector=status.phase%3DActive", uint8(1), "", uint8(5))
	svs := make([]*served, len(listResources))
	for i, res := range listResources {
		svs[i] = resourceNamed(f, res)
	}
	f.Fuzz(func(t *testing.T, rawQuery string, verbSel uint8, ns string, resSel uint8) {
		sv := svs[int(resSel)%len(svs)]
		verb := []string{"list", "watch"}[verbSel%2]
		r := httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)
		r.URL.RawQuery = rawQuery
		info := requestInfo{Namespace: ns, Verb: verb, Resource: sv.GVR.Resource, IsResource: true}
		o, err := listOptions(r, info, sv)
		upstreamErrs := upstreamListValidation(r, verb == "watch")
		if err != nil {
			st := requireStatus(t, err, http.StatusBadRequest, http.StatusUnprocessableEntity)
			// kelp's own copies of upstream's ValidateListOptions checks
			// must answer as upstream does: 422 Invalid.
			ownCheck := strings.Contains(st.Message, "resourceVersionMatch") || strings.Contains(st.Message, "sendInitialEvents")
			if ownCheck && len(upstreamErrs) > 0 && st.Code != http.StatusUnprocessableEntity {
				t.Fatalf("list options %q (%s): kelp answers %d %q, upstream ValidateListOptions answers 422 Invalid: %v", rawQuery, verb, st.Code, st.Message, upstreamErrs)
			}
			return
		}
		if vs, ok := r.URL.Query()["sendInitialEvents"]; len(upstreamErrs) > 0 && ok && vs[0] == "" {
			knownBug(t, "list options %q (%s) accepted: an empty sendInitialEvents is ignored, upstream decodes it as false and answers 422 Invalid: %v", rawQuery, verb, upstreamErrs)
		}
		if len(upstreamErrs) > 0 {
			t.Fatalf("list options %q (%s) accepted; upstream answers 422 Invalid: %v", rawQuery, verb, upstreamErrs)
		}
		q := r.URL.Query()
		if o.Namespace != ns || o.ResourceVersion != q.Get("resourceVersion") || o.Continue != q.Get("continue") {
			t.Fatalf("options %+v do not carry the query %q", o, rawQuery)
		}
		if _, err := storage.ParseRV(o.ResourceVersion); err != nil {
			t.Fatalf("accepted resourceVersion %q that storage rejects: %v", o.ResourceVersion, err)
		}
		if o.Limit < 0 {
			t.Fatalf("negative limit %d", o.Limit)
		}
		switch o.RVMatch {
		case "", metav1.ResourceVersionMatchExact, metav1.ResourceVersionMatchNotOlderThan:
		default:
			t.Fatalf("accepted resourceVersionMatch %q", o.RVMatch)
		}
		if verb == "list" && o.RVMatch != "" && o.ResourceVersion == "" {
			t.Fatalf("accepted resourceVersionMatch without resourceVersion")
		}
		if o.Continue != "" && o.ResourceVersion != "" && o.ResourceVersion != "0" {
			t.Fatalf("accepted continue with resourceVersion %q", o.ResourceVersion)
		}
		if o.SendInitialEvents != nil && (verb != "watch" || o.RVMatch != metav1.ResourceVersionMatchNotOlderThan) {
			t.Fatalf("accepted sendInitialEvents on %s with resourceVersionMatch %q", verb, o.RVMatch)
		}
		if o.Predicate.Field != nil {
			if err := sv.CheckFieldSelector(o.Predicate.Field); err != nil {
				t.Fatalf("accepted an unsupported field selector: %v", err)
			}
		}
		// The predicate runs against stored objects; it must not panic.
		obj := sv.New()
		if p, ok := obj.(*corev1.Pod); ok {
			*p = *samplePod()
		}
		_ = o.Predicate.Matches(obj)
		_ = o.Predicate.Empty()
	})
}

// upstreamListValidation is what kube-apiserver's list handler finds wrong
// with the query after decoding it (a decoding error is a 400 there, and
// is not compared): ValidateListOptions, with the WatchList feature on
// (kelp serves sendInitialEvents). Server-side defaulting is left out, so
// only what the client itself sent is judged.
func upstreamListValidation(r *http.Request, watch bool) field.ErrorList {
	q := r.URL.Query()
	q.Del("watch") // the verb says whether this is a watch
	opts := metainternalversion.ListOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(q, metav1.SchemeGroupVersion, &opts); err != nil {
		return nil
	}
	opts.Watch = watch
	return metainternalversionvalidation.ValidateListOptions(&opts, true)
}

// ---------------------------------------------------------------------------
// FuzzDeleteOptions: DELETE bodies and query strings.

func FuzzDeleteOptions(f *testing.F) {
	proto := func(o *metav1.DeleteOptions) []byte {
		c := o.DeepCopy()
		c.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"}
		return protoOf(f, c)
	}
	zero := int64(0)
	kinds := map[string]*served{"pods": resourceNamed(f, "pods"), "deployments": resourceNamed(f, "deployments"), "namespaces": resourceNamed(f, "namespaces")}
	fg := metav1.DeletePropagationForeground
	for _, s := range []struct {
		body      []byte
		ct, query string
	}{
		{nil, "", ""},
		{[]byte(`{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Foreground"}`), mediaJSON, ""},                                    // kubectl delete --cascade=foreground
		{[]byte(`{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","gracePeriodSeconds":0,"propagationPolicy":"Background"}`), mediaJSON, ""}, // kubectl delete --now / --force
		{[]byte(`{"propagationPolicy":"Orphan","dryRun":["All"]}`), "", ""},
		{[]byte(`{"preconditions":{"uid":"8c3d3f0e-2a43-4f55-9d1c-3a1f0b7f5e21","resourceVersion":"12"}}`), mediaJSON, ""},
		{[]byte(`{"orphanDependents":true}`), mediaJSON, ""},
		{[]byte(`{"orphanDependents":true,"propagationPolicy":"Orphan"}`), mediaJSON, ""},
		{[]byte(`{"gracePeriodSeconds":-5}`), mediaJSON, ""},
		{[]byte(`{"gracePeriodSeconds":1.5}`), mediaJSON, ""},
		{[]byte(`{"gracePeriodSeconds":"1"}`), mediaJSON, ""},
		{[]byte(`{"dryRun":["Some"]}`), mediaJSON, ""},
		{[]byte(`{"PropagationPolicy":"Orphan"}`), mediaJSON, ""},
		{[]byte(`{"propagationPolicy":"Everything"}`), mediaJSON, ""},
		{[]byte(`{"propagationPolicy":"Orphan","propagationPolicy":"Bogus"}`), mediaJSON, ""},
		{[]byte(`{`), mediaJSON, ""},
		{[]byte(`null`), mediaJSON, ""},
		{[]byte(`[]`), mediaJSON, ""},
		{[]byte("propagationPolicy: Orphan\n"), mediaYAML, ""},
		{proto(&metav1.DeleteOptions{GracePeriodSeconds: &zero, PropagationPolicy: &fg}), mediaProtobuf, ""},
		{[]byte("k8s\x00garbage"), mediaProtobuf, ""},
		{nil, "", "gracePeriodSeconds=30&propagationPolicy=Background"},
		{nil, "", "gracePeriodSeconds=-1"},
		{nil, "", "gracePeriodSeconds=abc"},
		{nil, "", "gracePeriodSeconds=99999999999999999999"},
		{nil, "", "orphanDependents=false"},
		{nil, "", "orphanDependents=true&propagationPolicy=Foreground"},
		{nil, "", "dryRun=All"},
		{nil, "", "dryRun="},
		{nil, "", "dryRun=All&dryRun=Other"},
		{[]byte(`{"dryRun":["All"]}`), mediaJSON, "dryRun=All"},
		{[]byte(`{"propagationPolicy":"Orphan"}`), mediaJSON, "orphanDependents=0"},
	} {
		f.Add(s.body, s.ct, s.query)
	}
	running := samplePod()
	grace := int64(45)
	running.Spec.TerminationGracePeriodSeconds = &grace
	running.Finalizers = []string{metav1.FinalizerOrphanDependents}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "default", Generation: 2,
		Finalizers: []string{"example.com/keep", metav1.FinalizerDeleteDependents}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}}}
	f.Fuzz(func(t *testing.T, body []byte, ct, rawQuery string) {
		r := httptest.NewRequest(http.MethodDelete, "/api/v1/namespaces/default/pods/web-0", bytes.NewReader(body))
		r.URL.RawQuery = rawQuery
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		w := httptest.NewRecorder()
		opts, err := deleteOptions(w, r)
		if err != nil {
			requireStatus(t, err, http.StatusBadRequest, http.StatusRequestEntityTooLarge)
			return
		}
		if opts == nil {
			t.Fatal("nil options without an error")
		}
		if p := opts.PropagationPolicy; p != nil {
			switch *p {
			case metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan:
			default:
				t.Fatalf("accepted propagationPolicy %q", *p)
			}
			if opts.OrphanDependents != nil {
				t.Fatal("accepted both orphanDependents and propagationPolicy")
			}
		}
		for _, v := range opts.DryRun {
			if v != metav1.DryRunAll {
				t.Fatalf("accepted dryRun %q", v)
			}
		}
		if g := opts.GracePeriodSeconds; g != nil && *g < 0 {
			t.Fatalf("negative grace period %d", *g)
		}
		if _, ok := r.URL.Query()["dryRun"]; ok && len(opts.DryRun) == 0 {
			t.Fatal("dryRun in the query was dropped")
		}
		// What the delete then does with the options.
		for _, cur := range []struct {
			resource string
			obj      runtime.Object
		}{{"pods", running}, {"deployments", deploy}, {"namespaces", ns}} {
			out := markDeleted(kinds[cur.resource], cur.obj, opts)
			checkMarkedDeleted(t, cur.obj, out, opts)
		}
	})
}

func checkMarkedDeleted(t *testing.T, cur, out runtime.Object, opts *metav1.DeleteOptions) {
	t.Helper()
	oa, err := meta.Accessor(out)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := meta.Accessor(cur)
	if oa.GetDeletionTimestamp() == nil {
		t.Fatalf("%T: no deletionTimestamp after delete", out)
	}
	// Namespaces wait for their finalizers without a grace period.
	g := oa.GetDeletionGracePeriodSeconds()
	if _, isNS := out.(*corev1.Namespace); isNS && g == nil {
		zero := int64(0)
		g = &zero
	}
	if g == nil || *g < 0 {
		t.Fatalf("%T: deletionGracePeriodSeconds %v", out, g)
	}
	fs := oa.GetFinalizers()
	if slices.Contains(fs, metav1.FinalizerOrphanDependents) && slices.Contains(fs, metav1.FinalizerDeleteDependents) {
		t.Fatalf("%T: both orphan and foreground finalizers: %v", out, fs)
	}
	if ca.GetDeletionTimestamp() != nil {
		t.Fatalf("%T: markDeleted modified the current object in place", cur)
	}
	if opts.PropagationPolicy != nil && *opts.PropagationPolicy == metav1.DeletePropagationOrphan && !slices.Contains(fs, metav1.FinalizerOrphanDependents) {
		if _, isNS := out.(*corev1.Namespace); !isNS {
			t.Fatalf("%T: propagationPolicy=Orphan without the orphan finalizer: %v", out, fs)
		}
	}
}
