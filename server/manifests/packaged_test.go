package manifests

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/config"
)

var testVars = map[string]string{
	"CLUSTER_DNS":              "10.43.0.10",
	"LOCAL_PATH_STORAGE_CLASS": config.LocalPathStorageClass,
	"LOCAL_PATH_PROVISIONER":   config.LocalPathProvisioner,
}

// local-storage.yaml is the class bootstrap used to make.
func TestLocalStorage(t *testing.T) {
	data, err := renderPackaged("local-storage", testVars)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("local-storage.yaml: %d objects, %v", len(objs), err)
	}
	var sc storagev1.StorageClass
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, &sc); err != nil {
		t.Fatal(err)
	}
	if sc.Name != config.LocalPathStorageClass || sc.Provisioner != config.LocalPathProvisioner ||
		sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" ||
		*sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer || string(*sc.ReclaimPolicy) != "Delete" {
		t.Errorf("local-storage: %+v", sc)
	}
}

// coredns.yaml is the Service the server used to ensure: selector-less
// (each agent publishes its node's EndpointSlice), at the cluster DNS
// address, node-local.
func TestCoreDNS(t *testing.T) {
	data, err := renderPackaged("coredns", testVars)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("coredns.yaml: %d objects, %v", len(objs), err)
	}
	var svc corev1.Service
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Namespace != "kube-system" || svc.Name != "kube-dns" || svc.Spec.ClusterIP != "10.43.0.10" || svc.Spec.Selector != nil ||
		svc.Spec.InternalTrafficPolicy == nil || *svc.Spec.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyLocal ||
		len(svc.Spec.Ports) != 2 || svc.Labels["k8s-app"] != "kube-dns" {
		t.Errorf("kube-dns: %+v", svc)
	}
	for i, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
		if p := svc.Spec.Ports[i]; p.Port != 53 || p.TargetPort.IntValue() != 53 || p.Protocol != proto {
			t.Errorf("port %d: %+v", i, p)
		}
	}
}

func TestRenderNeedsEveryValue(t *testing.T) {
	if _, err := renderPackaged("local-storage", map[string]string{"LOCAL_PATH_STORAGE_CLASS": "x"}); err == nil ||
		!strings.Contains(err.Error(), "%{LOCAL_PATH_PROVISIONER}%") {
		t.Errorf("a missing value: %v", err)
	}
	for _, name := range Packaged() {
		if !IsPackaged(name + ".yaml") {
			t.Errorf("%s.yaml not packaged", name)
		}
	}
}

func TestWritePackaged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	path := filepath.Join(dir, "local-storage.yaml")
	want, _ := renderPackaged("local-storage", testVars)
	read := func() string {
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return "<none>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}

	unknown, err := WritePackaged(dir, []string{"traefik"}, testVars)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(); got != string(want) {
		t.Errorf("written: %q", got)
	}
	if !reflect.DeepEqual(unknown, []string{"traefik"}) {
		t.Errorf("unknown %v, want [traefik]", unknown)
	}

	// An edit is overwritten at the next start, as k3s does.
	os.WriteFile(path, []byte("edited"), 0o600)
	if _, err := WritePackaged(dir, nil, testVars); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != string(want) {
		t.Errorf("after an edit: %q", got)
	}

	// Unless a .skip file (either spelling) keeps it.
	for _, skip := range []string{"local-storage.yaml.skip", "local-storage.skip"} {
		os.WriteFile(path, []byte("edited"), 0o600)
		os.WriteFile(filepath.Join(dir, skip), nil, 0o600)
		if _, err := WritePackaged(dir, nil, testVars); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != "edited" {
			t.Errorf("with %s: %q", skip, got)
		}
		os.Remove(filepath.Join(dir, skip))
	}

	// Disabled, it is removed.
	if _, err := WritePackaged(dir, []string{"local-storage"}, testVars); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "<none>" {
		t.Errorf("disabled: %q", got)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestSkipAndManifestNames(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.yaml.skip"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "b.skip"), nil, 0o600)
	for file, want := range map[string]bool{"a.yaml": true, "b.json": true, "b.yml": true, "c.yaml": false, "a.json": false} {
		if got := skipped(dir, file); got != want {
			t.Errorf("skipped(%s) = %v", file, got)
		}
	}
	for file, want := range map[string]bool{"a.yaml": true, "a.yml": true, "a.json": true, ".a.yaml": false, "a.yaml.skip": false, "a.txt": false, "a.yaml~": false} {
		if got := isManifest(file); got != want {
			t.Errorf("isManifest(%s) = %v", file, got)
		}
	}
}
