package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kelp-project/kelp/config"
)

// The auto-deploy directory, as a k3s user meets it: files dropped into
// <data-dir>/server/manifests appear in the cluster, edits are applied,
// removals delete, .skip files and --disable are honoured, and a broken
// file says so in an Event without holding the others back.
func TestManifests(t *testing.T) {
	srv := startServer(t)
	cs := srv.client()
	ctx := ctxT(t)
	dir := filepath.Join(srv.dataDir, "server", "manifests")
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	configMap := func(ns, name string) (*corev1.ConfigMap, error) {
		return cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	}
	exists := func(ns, name string) func() bool {
		return func() bool { _, err := configMap(ns, name); return err == nil }
	}
	gone := func(ns, name string) func() bool {
		return func() bool { _, err := configMap(ns, name); return apierrors.IsNotFound(err) }
	}

	t.Run("the packaged local-path class is applied from the directory", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(dir, "local-storage.yaml")); err != nil {
			t.Fatal(err)
		}
		sc, err := cs.StorageV1().StorageClasses().Get(ctx, config.LocalPathStorageClass, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !managedBy(sc.ManagedFields, "kelp-deploy") {
			t.Errorf("local-path not applied by kelp-deploy: %+v", sc.ManagedFields)
		}
		if _, err := configMap("kube-system", "kelp-manifest-local-storage.yaml"); err != nil {
			t.Errorf("its record: %v", err)
		}
	})

	t.Run("the packaged kube-dns Service is at --cluster-dns", func(t *testing.T) {
		svc, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.ClusterIP != config.ClusterDNS || len(svc.Spec.Ports) != 2 || svc.Spec.Selector != nil {
			t.Errorf("kube-dns: %+v", svc.Spec)
		}
	})

	t.Run("a new file appears within 2s, an edit is applied, a removal deletes", func(t *testing.T) {
		start := time.Now()
		write("app.yaml", `apiVersion: v1
kind: Namespace
metadata: {name: app}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: settings, namespace: app}
  data: {level: "1"}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: extra}
`)
		waitWithin(t, 2*time.Second, "app.yaml's objects", func() bool {
			return exists("app", "settings")() && exists("default", "extra")()
		})
		t.Logf("applied after %s", time.Since(start).Round(time.Millisecond))
		cm, _ := configMap("app", "settings")
		if !managedBy(cm.ManagedFields, "kelp-deploy") {
			t.Errorf("not server-side applied by kelp-deploy: %+v", cm.ManagedFields)
		}

		// An edit through a rename, as editors save: the data changes and
		// the object dropped from the file is deleted.
		tmp := filepath.Join(dir, ".app.yaml.tmp")
		os.WriteFile(tmp, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: app}\ndata: {level: \"2\"}\n"), 0o600)
		if err := os.Rename(tmp, filepath.Join(dir, "app.yaml")); err != nil {
			t.Fatal(err)
		}
		waitWithin(t, 2*time.Second, "the edit", func() bool {
			cm, err := configMap("app", "settings")
			return err == nil && cm.Data["level"] == "2" && gone("default", "extra")()
		})

		// A change made in the cluster to a field the file sets is
		// overwritten at the next apply (forced, as k3s).
		cm, _ = configMap("app", "settings")
		cm.Data["level"] = "by hand"
		if _, err := cs.CoreV1().ConfigMaps("app").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		write("app.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: app}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: app}\ndata: {level: \"3\"}\n")
		waitWithin(t, 2*time.Second, "the edit over a manual change", func() bool {
			cm, err := configMap("app", "settings")
			return err == nil && cm.Data["level"] == "3"
		})

		if err := os.Remove(filepath.Join(dir, "app.yaml")); err != nil {
			t.Fatal(err)
		}
		waitWithin(t, 2*time.Second, "app.yaml's objects deleted", func() bool {
			ns, err := cs.CoreV1().Namespaces().Get(ctx, "app", metav1.GetOptions{})
			return (apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp != nil)) &&
				gone("kube-system", "kelp-manifest-app.yaml")()
		})
	})

	t.Run("a .skip file disables a manifest", func(t *testing.T) {
		write("skipped.yaml.skip", "")
		write("skipped.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: skipped}\n")
		write("marker.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: marker}\n")
		// The marker, written after, is applied in the same or a later
		// pass than the skipped file would have been.
		waitWithin(t, 2*time.Second, "marker", exists("default", "marker"))
		if _, err := configMap("default", "skipped"); !apierrors.IsNotFound(err) {
			t.Fatalf("a skipped manifest was applied: %v", err)
		}
		// Without its .skip file it is applied.
		os.Remove(filepath.Join(dir, "skipped.yaml.skip"))
		waitWithin(t, 2*time.Second, "the manifest once its .skip went", exists("default", "skipped"))
		// Skipped again (k3s's other spelling), it is left alone: neither
		// its edits applied nor its objects deleted with it.
		write("skipped.skip", "")
		write("skipped.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: skipped}\ndata: {edited: \"yes\"}\n")
		os.Remove(filepath.Join(dir, "marker.yaml"))
		waitWithin(t, 2*time.Second, "marker deleted", gone("default", "marker"))
		if cm, err := configMap("default", "skipped"); err != nil || cm.Data["edited"] != "" {
			t.Errorf("a skipped manifest was touched: %+v, %v", cm, err)
		}
	})

	t.Run("a broken file gets an error event and does not stop the others", func(t *testing.T) {
		write("broken.yaml", "apiVersion: v1\nkind: [\n")
		write("refused.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Not_Valid}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: beside-refused}\n")
		write("good.json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"from-json"}}`)
		waitWithin(t, 2*time.Second, "the good objects", func() bool {
			return exists("default", "beside-refused")() && exists("default", "from-json")()
		})
		waitEventOn(t, cs, "kelp-manifest-broken.yaml", "ParseFailed", "broken.yaml does not parse")
		waitEventOn(t, cs, "kelp-manifest-refused.yaml", "ApplyFailed", `refused.yaml: ConfigMap default/Not_Valid: ConfigMap "Not_Valid" is invalid`)
		if out := srv.mustKubectl("describe", "configmap", "-n", "kube-system", "kelp-manifest-refused.yaml"); !strings.Contains(out, "ApplyFailed") {
			t.Errorf("kubectl describe shows no ApplyFailed event:\n%s", out)
		}
		if !strings.Contains(srv.logs.String(), "manifests: broken.yaml does not parse") {
			t.Error("the parse error is not logged with the file name")
		}
		// Fixed, it applies.
		write("broken.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fixed}\n")
		waitWithin(t, 2*time.Second, "the fixed file", exists("default", "fixed"))
	})

	t.Run("an object kelp did not create outlives its manifest", func(t *testing.T) {
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "users"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		write("adopts.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: users}\ndata: {from: manifest}\n")
		waitWithin(t, 2*time.Second, "the apply", func() bool {
			cm, err := configMap("default", "users")
			return err == nil && cm.Data["from"] == "manifest"
		})
		os.Remove(filepath.Join(dir, "adopts.yaml"))
		waitWithin(t, 2*time.Second, "the record removed", gone("kube-system", "kelp-manifest-adopts.yaml"))
		if _, err := configMap("default", "users"); err != nil {
			t.Errorf("a user's object was deleted with the manifest: %v", err)
		}
	})

	t.Run("a renamed file keeps its objects, and removing it deletes them", func(t *testing.T) {
		write("before.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: moving}\n")
		waitWithin(t, 2*time.Second, "before.yaml", exists("default", "moving"))
		cm, _ := configMap("default", "moving")
		if err := os.Rename(filepath.Join(dir, "before.yaml"), filepath.Join(dir, "after.yml")); err != nil {
			t.Fatal(err)
		}
		waitWithin(t, 2*time.Second, "the old name's record removed", gone("kube-system", "kelp-manifest-before.yaml"))
		if now, err := configMap("default", "moving"); err != nil || now.UID != cm.UID {
			t.Fatalf("the object did not survive the rename: %v", err)
		}
		os.Remove(filepath.Join(dir, "after.yml"))
		waitWithin(t, 2*time.Second, "the object deleted with the renamed file", gone("default", "moving"))
	})

	t.Run("a file removed while kelp is down is pruned at start", func(t *testing.T) {
		write("down.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: down}\n")
		waitWithin(t, 2*time.Second, "down.yaml", exists("default", "down"))
		// An applied object deleted by hand comes back at the next start,
		// when every file is applied again.
		if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "from-json", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		srv.stop()
		os.Remove(filepath.Join(dir, "down.yaml"))
		srv.start()
		cs = srv.client()
		waitWithin(t, 2*time.Second, "down.yaml's object deleted after the restart", gone("default", "down"))
		waitWithin(t, 2*time.Second, "good.json's object back after the restart", exists("default", "from-json"))
	})
}

// --disable local-storage: no class on a new cluster, and the one an
// earlier start applied is deleted. --disable coredns: no kube-dns
// Service.
func TestManifestsDisable(t *testing.T) {
	srv := startServer(t, "--disable", "local-storage", "--disable", "coredns")
	ctx := ctxT(t)
	list, err := srv.client().StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("--disable local-storage: StorageClasses %v", list.Items)
	}
	if _, err := srv.client().CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("--disable coredns: kube-dns Service: %v", err)
	}
	path := filepath.Join(srv.dataDir, "server", "manifests", "local-storage.yaml")
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("local-storage.yaml written although disabled: %v", err)
	}

	// Enabled, then disabled again.
	srv.stop()
	srv.extraArgs = nil
	srv.start()
	if _, err := srv.client().StorageV1().StorageClasses().Get(ctx, config.LocalPathStorageClass, metav1.GetOptions{}); err != nil {
		t.Fatalf("enabled again: %v", err)
	}
	srv.stop()
	srv.extraArgs = []string{"--disable=traefik,local-storage"}
	srv.start()
	waitWithin(t, 2*time.Second, "local-path deleted", func() bool {
		_, err := srv.client().StorageV1().StorageClasses().Get(ctx, config.LocalPathStorageClass, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("local-storage.yaml left although disabled: %v", err)
	}
	if !strings.Contains(srv.logs.String(), "--disable traefik: kelp packages no such manifest") {
		t.Error("an unknown --disable name is not reported")
	}
}

func managedBy(fields []metav1.ManagedFieldsEntry, manager string) bool {
	for _, f := range fields {
		if f.Manager == manager && f.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

// waitEventOn waits for an Event on a manifest's record.
func waitEventOn(t *testing.T, cs kubernetes.Interface, record, reason, message string) {
	t.Helper()
	var seen []string
	waitWithin(t, 5*time.Second, reason+" on "+record, func() bool {
		list, err := cs.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + record})
		if err != nil {
			return false
		}
		seen = seen[:0]
		for _, e := range list.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == reason && strings.Contains(e.Message, message) && e.InvolvedObject.Kind == "ConfigMap" {
				return true
			}
		}
		return false
	})
}
