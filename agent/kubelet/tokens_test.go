package kubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// tokenAPI answers the kubelet's TokenRequests on the fake client: each
// token is "token-<n>", expiring after the requested seconds from clock.
type tokenAPI struct {
	clock    *time.Time
	requests []*authenticationv1.TokenRequest
	fail     bool
}

func (a *tokenAPI) install(tk *testKubelet) {
	tk.tokens.now = func() time.Time { return *a.clock }
	tk.client.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := action.(k8stesting.CreateAction)
		if !ok || action.GetSubresource() != "token" {
			return false, nil, nil
		}
		if a.fail {
			return true, nil, errors.NewServiceUnavailable("down")
		}
		tr := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		a.requests = append(a.requests, tr)
		tr.Status = authenticationv1.TokenRequestStatus{Token: fmt.Sprintf("token-%d", len(a.requests)),
			ExpirationTimestamp: metav1.NewTime(a.clock.Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))}
		return true, tr, nil
	})
}

func tokenPod(expiration int64) *corev1.Pod {
	pod := testPod("web", "app")
	pod.Spec.ServiceAccountName = "app"
	pod.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(int32(0o644)),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiration}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}}}}
	return pod
}

func readToken(t *testing.T, tk *testKubelet, pod *corev1.Pod) string {
	t.Helper()
	if err := tk.prepareVolumes(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(tk.volumeDir(pod, "kube-api-access-abcde"), "token"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The token is bound to the pod, kept until 80% of its lifetime, then
// replaced; the file is rewritten.
func TestProjectedTokenIsBoundAndRefreshedAt80Percent(t *testing.T) {
	pod := tokenPod(600)
	tk := newTestKubelet(t, pod)
	start := time.Now()
	clock := start
	api := &tokenAPI{clock: &clock}
	api.install(tk)

	if got := readToken(t, tk, pod); got != "token-1" {
		t.Fatalf("token %q", got)
	}
	req := api.requests[0]
	if ref := req.Spec.BoundObjectRef; ref == nil || ref.Kind != "Pod" || ref.APIVersion != "v1" || ref.Name != "web" || ref.UID != pod.UID {
		t.Errorf("bound to %+v, want pod web %s", req.Spec.BoundObjectRef, pod.UID)
	}
	if *req.Spec.ExpirationSeconds != 600 || len(req.Spec.Audiences) != 0 {
		t.Errorf("spec %+v, want 600 s and the API's audiences", req.Spec)
	}
	if data, _ := os.ReadFile(filepath.Join(tk.volumeDir(pod, "kube-api-access-abcde"), "namespace")); string(data) != "default" {
		t.Errorf("namespace file %q", data)
	}

	clock = start.Add(479 * time.Second) // just before 80% of 600 s
	if got := readToken(t, tk, pod); got != "token-1" || len(api.requests) != 1 {
		t.Errorf("at 79%%: token %q after %d requests, want token-1 after 1", got, len(api.requests))
	}
	clock = start.Add(481 * time.Second)
	if got := readToken(t, tk, pod); got != "token-2" {
		t.Errorf("past 80%%: token %q, want token-2", got)
	}

	// While the API server is away an unexpired token keeps serving; an
	// expired one is an error.
	api.fail = true
	clock = clock.Add(500 * time.Second)
	if got := readToken(t, tk, pod); got != "token-2" {
		t.Errorf("API down: token %q, want token-2", got)
	}
	clock = clock.Add(200 * time.Second)
	if err := tk.prepareVolumes(context.Background(), pod); err == nil {
		t.Error("expired token and no API: no error")
	}

	// A pod that is gone takes its tokens with it.
	tk.forget(pod.UID)
	if len(tk.tokens.tokens) != 0 {
		t.Errorf("tokens of a forgotten pod kept: %v", tk.tokens.tokens)
	}
}

// A long-lived token is refreshed after 24 hours, well before 80% of it.
func TestProjectedTokenRefreshedAfter24Hours(t *testing.T) {
	pod := tokenPod(7 * 24 * 3600)
	pod.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken.Audience = "vault"
	tk := newTestKubelet(t, pod)
	start := time.Now()
	clock := start
	api := &tokenAPI{clock: &clock}
	api.install(tk)
	readToken(t, tk, pod)
	if auds := api.requests[0].Spec.Audiences; len(auds) != 1 || auds[0] != "vault" {
		t.Errorf("audiences %v, want [vault]", auds)
	}
	clock = start.Add(23 * time.Hour)
	if got := readToken(t, tk, pod); got != "token-1" {
		t.Errorf("after 23 h: %q", got)
	}
	clock = start.Add(24*time.Hour + time.Second)
	if got := readToken(t, tk, pod); got != "token-2" {
		t.Errorf("after 24 h: %q, want token-2", got)
	}
}
