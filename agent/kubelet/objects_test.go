package kubelet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestObjectCache(t *testing.T) {
	ctx := context.Background()
	gets := 0
	var answer error
	value := "v1"
	c := newObjectCache(func(_ context.Context, ns, name string) (string, error) {
		gets++
		if answer != nil {
			return "", answer
		}
		return ns + "/" + name + "=" + value, nil
	})
	get := func(notBefore time.Time) (string, error) { return c.Get(ctx, "default", "s", notBefore) }

	if v, err := get(time.Time{}); err != nil || v != "default/s=v1" || gets != 1 {
		t.Fatalf("first read: %q %v, %d gets", v, err, gets)
	}
	// Within the TTL, pods share the copy.
	value = "v2"
	if v, _ := get(time.Time{}); v != "default/s=v1" || gets != 1 {
		t.Fatalf("within the TTL: %q, %d gets", v, gets)
	}
	// A pod first seen after the copy was read reads it again.
	if v, _ := get(time.Now()); v != "default/s=v2" || gets != 2 {
		t.Fatalf("a new pod: %q, %d gets", v, gets)
	}
	// The API server down: the last copy keeps serving.
	c.items["default/s"] = cachedObject[string]{obj: "default/s=v2", fetched: time.Now().Add(-objectTTL)}
	answer = apierrors.NewServiceUnavailable("restarting")
	if v, err := get(time.Time{}); err != nil || v != "default/s=v2" || gets != 3 {
		t.Fatalf("server down: %q %v, %d gets", v, err, gets)
	}
	// Deleted, or no longer the node's to read: forgotten, not cached.
	for _, gone := range []error{apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "s"),
		apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", errors.New("no relationship"))} {
		answer = gone
		if _, err := get(time.Now()); !errors.Is(err, gone) {
			t.Fatalf("err %v, want %v", err, gone)
		}
		if _, ok := c.items["default/s"]; ok {
			t.Fatalf("%v cached", gone)
		}
		before := gets
		if _, err := get(time.Time{}); err == nil || gets != before+1 {
			t.Fatalf("missing object not asked again: %v, %d gets", err, gets-before)
		}
	}
	// Objects nobody asked for in a long while are dropped.
	answer = nil
	c.items["default/old"] = cachedObject[string]{obj: "x", fetched: time.Now().Add(-11 * resyncInterval)}
	if _, err := get(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.items["default/old"]; ok {
		t.Error("stale entry kept")
	}
}

// A pod's Secret and ConfigMap volumes and env are read with one GET per
// object: the Node authorizer allows a node no list or watch of them.
func TestPodSecretsAndConfigMapsAreReadByName(t *testing.T) {
	tk := newTestKubelet(t)
	ctx := context.Background()
	if _, err := tk.client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"password": []byte("hunter2")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"mode": "fast"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tk.client.ClearActions()
	pod := testPod("web", "app")
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
		{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
	}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "mode"}}}}
	tk.addPod(t, pod)
	w := tk.worker(t, pod)
	tk.sync(t, w, pod)

	data, err := os.ReadFile(filepath.Join(tk.volumeDir(pod, "creds"), "password"))
	if err != nil || string(data) != "hunter2" {
		t.Fatalf("secret volume: %q %v", data, err)
	}
	// A Secret lives in memory on the node, as upstream's kubelet keeps it;
	// a ConfigMap on disk.
	if !isMountPoint(tk.volumeDir(pod, "creds")) || isMountPoint(tk.volumeDir(pod, "settings")) {
		t.Errorf("secret volume a tmpfs mount: %v (want true); configMap volume one: %v (want false)",
			isMountPoint(tk.volumeDir(pod, "creds")), isMountPoint(tk.volumeDir(pod, "settings")))
	}
	spec, ok := tk.rt.Spec(createdID(t, tk, "app"))
	if !ok {
		t.Fatalf("app not created: %v", tk.rt.Calls())
	}
	if !containsEnv(spec.Env, "MODE=fast") {
		t.Errorf("env %v lacks MODE=fast", spec.Env)
	}
	gets := map[string]int{}
	for _, a := range tk.client.Actions() {
		r := a.GetResource().Resource
		if r != "secrets" && r != "configmaps" {
			continue
		}
		if a.GetVerb() != "get" {
			t.Errorf("%s %s: the node may only get them", a.GetVerb(), r)
		}
		gets[r]++
	}
	// The ConfigMap serves the volume and the env from one read.
	if gets["secrets"] != 1 || gets["configmaps"] != 1 {
		t.Errorf("gets %v, want one of each", gets)
	}
}

func createdID(t *testing.T, tk *testKubelet, name string) string {
	t.Helper()
	for id, c := range tk.rt.Containers() {
		if c.Labels[labelContainerName] == name {
			return id
		}
	}
	return ""
}

func containsEnv(env []string, kv string) bool {
	for _, e := range env {
		if e == kv {
			return true
		}
	}
	return false
}
