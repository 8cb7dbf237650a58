package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelp-project/kelp/config"
)

// storagePod is a pod on claim "data" mounted at /data, running script.
func storagePod(name, claim, script string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: app, image: busybox:1.35, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "` + script + `"],
    volumeMounts: [{name: data, mountPath: /data}]}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: ` + claim + `}}]
`
}

// Local storage end to end, as k3s's local-path provisioner serves it: a
// claim on the default class waits for its pod, is provisioned on the
// pod's node as a directory under <data-dir>/storage and bound; the pod
// writes there, a later pod reads it back; deleting the claim removes the
// directory once no pod uses it; kelp killall leaves the data of the
// claims that remain.
func TestStorage(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	node := c.node()
	storage := config.LocalStorageDir(c.dataDir)

	c.waitFor(30*time.Second, "the default StorageClass", func() bool {
		sc, err := c.cs.StorageV1().StorageClasses().Get(ctx, config.LocalPathStorageClass, metav1.GetOptions{})
		return err == nil && sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true"
	})
	// No storageClassName: the default class's.
	c.apply(t, `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
`)
	c.apply(t, storagePod("writer", "data", "echo written by $(hostname) > /data/hello && exec sleep 3600"))
	c.waitFor(120*time.Second, "the writer Running", func() bool {
		p := c.pod("writer")
		return p.Status.Phase == corev1.PodRunning
	})
	claim, err := c.cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Phase != corev1.ClaimBound || claim.Spec.VolumeName != "pvc-"+string(claim.UID) ||
		claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName != config.LocalPathStorageClass {
		t.Fatalf("claim: %+v %+v", claim.Spec, claim.Status)
	}
	pv, err := c.cs.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(storage, "pvc-"+string(claim.UID)+"_default_data")
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != dir || len(terms) != 1 || len(terms[0].MatchExpressions) != 1 ||
		terms[0].MatchExpressions[0].Key != corev1.LabelHostname || terms[0].MatchExpressions[0].Values[0] != node.Labels[corev1.LabelHostname] ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Status.Phase != corev1.VolumeBound ||
		pv.Annotations["pv.kubernetes.io/provisioned-by"] != config.LocalPathProvisioner || pv.Spec.ClaimRef.UID != claim.UID {
		t.Fatalf("volume: %+v %+v", pv.Spec, pv.Status)
	}
	c.waitFor(10*time.Second, "the file in the volume's directory", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "hello"))
		return err == nil && string(b) == "written by writer\n"
	})
	out := c.mustKubectl("get", "events", "--field-selector", "involvedObject.kind=PersistentVolumeClaim,involvedObject.name=data")
	for _, want := range []string{"Provisioning", "ProvisioningSucceeded", `External provisioner is provisioning volume for claim "default/data"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the claim's events lack %q:\n%s", want, out)
		}
	}

	// The writer goes; a new pod reads what it wrote.
	c.mustKubectl("delete", "pod", "writer", "--wait=true", "--timeout=60s")
	c.apply(t, storagePod("reader", "data", "cat /data/hello && exec sleep 3600"))
	c.waitFor(60*time.Second, "the reader's log", func() bool {
		logs, _ := c.kubectl("logs", "reader")
		return strings.Contains(logs, "written by writer")
	})

	// Deleted while the reader uses it: the claim stays (its protection)
	// and so does the directory, until the reader is gone.
	c.mustKubectl("delete", "pvc", "data", "--wait=false")
	time.Sleep(3 * time.Second)
	if cl, err := c.cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{}); err != nil || cl.DeletionTimestamp == nil {
		t.Fatalf("the claim in use should be kept, Terminating: %v %v", cl, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "hello")); err != nil {
		t.Fatalf("the directory went while a pod uses it: %v", err)
	}
	c.mustKubectl("delete", "pod", "reader", "--wait=true", "--timeout=60s")
	c.waitFor(60*time.Second, "the claim, the volume and its directory gone", func() bool {
		_, errC := c.cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
		_, errV := c.cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		_, errD := os.Stat(dir)
		return apierrors.IsNotFound(errC) && apierrors.IsNotFound(errV) && os.IsNotExist(errD)
	})

	// kelp killall stops the node but keeps the data of a claim that
	// remains: <data-dir>/storage is the users'.
	c.apply(t, `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: kept}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 16Mi}}
`)
	c.apply(t, storagePod("keeper", "kept", "echo kept > /data/kept && exec sleep 3600"))
	var keptFile string
	c.waitFor(120*time.Second, "the keeper's file", func() bool {
		cl, err := c.cs.CoreV1().PersistentVolumeClaims("default").Get(ctx, "kept", metav1.GetOptions{})
		if err != nil || cl.Spec.VolumeName == "" {
			return false
		}
		keptFile = filepath.Join(storage, "pvc-"+string(cl.UID)+"_default_kept", "kept")
		b, err := os.ReadFile(keptFile)
		return err == nil && string(b) == "kept\n"
	})
	c.stop()
	if out, err := exec.Command(kelpBin, c.agentArgs("killall")...).CombinedOutput(); err != nil {
		t.Fatalf("kelp killall: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(keptFile); err != nil || string(b) != "kept\n" {
		t.Errorf("after kelp killall, the kept claim's file: %q %v", b, err)
	}
}
