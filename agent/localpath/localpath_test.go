package localpath

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/kelp-project/kelp/config"
)

const node = "n1"

// The node's hostname label differs from its name here, so the tests see
// which one the volumes are pinned by.
const hostname = "n1-host"

func localPathClass(reclaim corev1.PersistentVolumeReclaimPolicy) *storagev1.StorageClass {
	wfc := storagev1.VolumeBindingWaitForFirstConsumer
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: config.LocalPathStorageClass},
		Provisioner: config.LocalPathProvisioner, ReclaimPolicy: &reclaim, VolumeBindingMode: &wfc}
}

// claim is a claim the PV binder handed to the provisioner for node.
func claim(ns, name, uid, selected string) *corev1.PersistentVolumeClaim {
	class := config.LocalPathStorageClass
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), Annotations: map[string]string{
			storagehelpers.AnnStorageProvisioner:     config.LocalPathProvisioner,
			storagehelpers.AnnBetaStorageProvisioner: config.LocalPathProvisioner,
			storagehelpers.AnnSelectedNode:           selected,
		}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
		},
	}
}

type fixture struct {
	t        *testing.T
	p        *Provisioner
	client   *fake.Clientset
	recorder *record.FakeRecorder
	dataDir  string
	root     string
}

func newFixture(t *testing.T, dataDir string, objs ...runtime.Object) *fixture {
	t.Helper()
	objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{corev1.LabelHostname: hostname}}})
	client := fake.NewClientset(objs...)
	return startFixture(t, dataDir, client)
}

// startFixture starts a provisioner (as a restarted agent would) on client.
func startFixture(t *testing.T, dataDir string, client *fake.Clientset) *fixture {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	p := New(Config{NodeName: node, DataDir: dataDir}, client, factory, recorder)
	factory.Start(t.Context().Done())
	for typ, ok := range factory.WaitForCacheSync(t.Context().Done()) {
		if !ok {
			t.Fatalf("cache of %v not synced", typ)
		}
	}
	return &fixture{t: t, p: p, client: client, recorder: recorder, dataDir: dataDir, root: config.LocalStorageDir(dataDir)}
}

// events drains what was recorded so far.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (f *fixture) syncClaim(ns, name string) error {
	return f.p.syncClaim(f.t.Context(), ns+"/"+name)
}

func (f *fixture) volumes() []corev1.PersistentVolume {
	f.t.Helper()
	l, err := f.client.CoreV1().PersistentVolumes().List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return l.Items
}

// waitVolumeCached waits until the provisioner's informer holds name.
func (f *fixture) waitVolumeCached(name string) {
	f.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := f.p.volumes.Get(name); err == nil {
			return
		}
	}
	f.t.Fatalf("volume %s never reached the informer", name)
}

func TestProvisionsOnlyItsNodesClaims(t *testing.T) {
	mine := claim("default", "data", "uid-1", node)
	other := claim("default", "elsewhere", "uid-2", "n2")
	foreign := claim("default", "foreign", "uid-3", node)
	foreign.Annotations[storagehelpers.AnnStorageProvisioner] = "example.com/nfs"
	foreign.Annotations[storagehelpers.AnnBetaStorageProvisioner] = "example.com/nfs"
	bound := claim("default", "bound", "uid-4", node)
	bound.Spec.VolumeName = "static-pv"
	waiting := claim("default", "waiting", "uid-5", "")
	delete(waiting.Annotations, storagehelpers.AnnSelectedNode)
	f := newFixture(t, t.TempDir(), localPathClass(corev1.PersistentVolumeReclaimDelete), mine, other, foreign, bound, waiting)
	for _, c := range []*corev1.PersistentVolumeClaim{mine, other, foreign, bound, waiting} {
		if err := f.syncClaim(c.Namespace, c.Name); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
	}
	pvs := f.volumes()
	if len(pvs) != 1 {
		t.Fatalf("volumes %v, want only pvc-uid-1", pvs)
	}
	dir := filepath.Join(f.root, "pvc-uid-1_default_data")
	fs := corev1.PersistentVolumeFilesystem
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	want := corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-1",
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": "kelp.dev/local-path"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:                    &fs,
			StorageClassName:              "local-path",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirOrCreate}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{hostname}}},
			}}}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: "data", UID: "uid-1"},
		},
	}
	got := pvs[0]
	if got.Name != want.Name || !reflect.DeepEqual(got.Labels, want.Labels) || !reflect.DeepEqual(got.Annotations, want.Annotations) ||
		!reflect.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("volume\n got %+v\nwant %+v", got, want)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o777 {
		t.Errorf("volume dir %s: %v %v", dir, fi, err)
	}
	if fi, err := os.Stat(f.root); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("storage root %s: %v %v", f.root, fi, err)
	}
	entries, _ := os.ReadDir(f.root)
	if len(entries) != 1 {
		t.Errorf("storage root holds %v, want only the one volume", entries)
	}
	events := f.events()
	wantEvents := []string{
		`Normal Provisioning External provisioner is provisioning volume for claim "default/data"`,
		`Normal ProvisioningSucceeded Successfully provisioned volume pvc-uid-1`,
	}
	if !reflect.DeepEqual(events, wantEvents) {
		t.Errorf("events\n got %q\nwant %q", events, wantEvents)
	}
}

func TestProvisionIsIdempotent(t *testing.T) {
	data := t.TempDir()
	c := claim("apps", "db", "uid-7", node)
	retain := localPathClass(corev1.PersistentVolumeReclaimRetain)
	f := newFixture(t, data, retain, c)
	// A directory left by an earlier attempt (its PV create lost) is reused.
	dir := filepath.Join(config.LocalStorageDir(data), "pvc-uid-7_apps_db")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.syncClaim("apps", "db"); err != nil {
		t.Fatal(err)
	}
	pvs := f.volumes()
	if len(pvs) != 1 || pvs[0].Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || pvs[0].Spec.HostPath.Path != dir {
		t.Fatalf("volumes after the first sync: %+v", pvs)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "keep")); err != nil || string(b) != "x" {
		t.Errorf("the existing directory's content: %q %v", b, err)
	}
	f.events()
	// Again, before the informer has seen the volume (the API is asked),
	// and after.
	if err := f.syncClaim("apps", "db"); err != nil {
		t.Fatal(err)
	}
	f.waitVolumeCached("pvc-uid-7")
	if err := f.syncClaim("apps", "db"); err != nil {
		t.Fatal(err)
	}
	// A restarted agent: a new provisioner on the same cluster and data dir.
	g := startFixture(t, data, f.client)
	if err := g.syncClaim("apps", "db"); err != nil {
		t.Fatal(err)
	}
	if pvs := f.volumes(); len(pvs) != 1 {
		t.Errorf("volumes after resyncs: %d", len(pvs))
	}
	if ev := append(f.events(), g.events()...); len(ev) != 0 {
		t.Errorf("resyncs recorded %q", ev)
	}
	// The same claim's PV is never re-created under another name.
	if _, err := f.client.CoreV1().PersistentVolumes().Get(t.Context(), "pvc-uid-7", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
}

func TestBlockModeFails(t *testing.T) {
	c := claim("default", "raw", "uid-8", node)
	block := corev1.PersistentVolumeBlock
	c.Spec.VolumeMode = &block
	f := newFixture(t, t.TempDir(), localPathClass(corev1.PersistentVolumeReclaimDelete), c)
	if err := f.syncClaim("default", "raw"); err != nil {
		t.Fatal(err)
	}
	if pvs := f.volumes(); len(pvs) != 0 {
		t.Errorf("a block claim got volumes %v", pvs)
	}
	if _, err := os.Stat(f.root); !os.IsNotExist(err) {
		t.Errorf("storage root made for a block claim: %v", err)
	}
	ev := f.events()
	if len(ev) != 1 || ev[0] != "Warning ProvisioningFailed kelp.dev/local-path does not support block volume provisioning" {
		t.Errorf("events %q", ev)
	}
}

func TestRefusesEscapingNames(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	// The API admits no such UID nor names; a provisioner still never
	// follows one out of its directory.
	evil := claim("default", "a", "../../../victim", node)
	dots := claim("..", "x", "uid-10", node) // one path element: stays inside
	f := newFixture(t, data, localPathClass(corev1.PersistentVolumeReclaimDelete), evil, dots)
	if err := f.syncClaim("default", "a"); err == nil {
		t.Error("a claim whose UID leaves the storage dir was provisioned")
	}
	ev := f.events()
	if len(ev) != 2 || !strings.HasPrefix(ev[1], `Warning ProvisioningFailed failed to provision volume with StorageClass "local-path": `) ||
		!strings.Contains(ev[1], "is not a directory name under") {
		t.Errorf("events %q", ev)
	}
	for _, name := range []string{"../../victim", "a/b", "x/../../.."} {
		c := claim("default", name, "uid-11", node)
		if pv, err := f.p.volumeFor(t.Context(), c, "pvc-uid-11", "local-path"); err == nil {
			t.Errorf("claim named %q: volume at %s", name, pv.Spec.HostPath.Path)
		}
	}
	if err := f.syncClaim("..", "x"); err != nil {
		t.Fatal(err)
	}
	pvs := f.volumes()
	if len(pvs) != 1 || pvs[0].Spec.HostPath.Path != filepath.Join(f.root, "pvc-uid-10_.._x") {
		t.Fatalf("volumes %+v", pvs)
	}
	if entries, _ := os.ReadDir(filepath.Dir(data)); len(entries) != 1 || entries[0].Name() != "data" {
		t.Errorf("made %v next to the data dir", entries)
	}
	if entries, _ := os.ReadDir(data); len(entries) != 1 || entries[0].Name() != "storage" {
		t.Errorf("made %v in the data dir", entries)
	}
	for _, name := range []string{"", ".", "..", "a/b", "../x", "x\x00"} {
		if p, err := underRoot("/d/storage", name); err == nil {
			t.Errorf("underRoot(%q) = %s", name, p)
		}
	}
	if p, err := underRoot("/d/storage", "pvc-1_ns_a..b"); err != nil || p != "/d/storage/pvc-1_ns_a..b" {
		t.Errorf("underRoot of a plain name: %s %v", p, err)
	}
}

// released is a volume the provisioner made for a claim now gone.
func released(root, name, claimName string, reclaim corev1.PersistentVolumeReclaimPolicy, host string) *corev1.PersistentVolume {
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"),
			Annotations: map[string]string{storagehelpers.AnnDynamicallyProvisioned: config.LocalPathProvisioner}},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: filepath.Join(root, name+"_default_"+claimName), Type: &dirOrCreate}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{host}}},
			}}}},
			ClaimRef: &corev1.ObjectReference{Namespace: "default", Name: claimName, UID: "gone"},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased},
	}
}

func TestDeletesReleasedVolumes(t *testing.T) {
	data := t.TempDir()
	root := config.LocalStorageDir(data)
	del := released(root, "pvc-a", "a", corev1.PersistentVolumeReclaimDelete, hostname)
	keep := released(root, "pvc-b", "b", corev1.PersistentVolumeReclaimRetain, hostname)
	elsewhere := released(root, "pvc-c", "c", corev1.PersistentVolumeReclaimDelete, "n2-host")
	bound := released(root, "pvc-d", "d", corev1.PersistentVolumeReclaimDelete, hostname)
	bound.Status.Phase = corev1.VolumeBound
	static := released(root, "pvc-e", "e", corev1.PersistentVolumeReclaimDelete, hostname)
	delete(static.Annotations, storagehelpers.AnnDynamicallyProvisioned)
	// Volumes whose path is not one of its own directories: an edited
	// path, another volume's directory, a path out of the root.
	outside := filepath.Join(t.TempDir(), "victim")
	forged := released(root, "pvc-f", "f", corev1.PersistentVolumeReclaimDelete, hostname)
	forged.Spec.HostPath.Path = outside
	stolen := released(root, "pvc-g", "g", corev1.PersistentVolumeReclaimDelete, hostname)
	stolen.Spec.HostPath.Path = keep.Spec.HostPath.Path
	dotdot := released(root, "pvc-h", "h", corev1.PersistentVolumeReclaimDelete, hostname)
	dotdot.Spec.HostPath.Path = root + "/pvc-h_x/../../victim"
	all := []*corev1.PersistentVolume{del, keep, elsewhere, bound, static, forged, stolen, dotdot}
	var objs []runtime.Object
	for _, pv := range all {
		objs = append(objs, pv)
		if err := os.MkdirAll(pv.Spec.HostPath.Path, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pv.Spec.HostPath.Path, "file"), []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(data, "victim"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, data, objs...)
	for _, pv := range all {
		if err := f.p.syncVolume(t.Context(), pv.Name); err != nil {
			t.Errorf("%s: %v", pv.Name, err)
		}
	}
	if _, err := os.Stat(del.Spec.HostPath.Path); !os.IsNotExist(err) {
		t.Errorf("released Delete volume's dir: %v", err)
	}
	if _, err := f.client.CoreV1().PersistentVolumes().Get(t.Context(), "pvc-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("released Delete volume: %v", err)
	}
	for _, pv := range all[1:] {
		if _, err := f.client.CoreV1().PersistentVolumes().Get(t.Context(), pv.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s deleted: %v", pv.Name, err)
		}
		if _, err := os.Stat(filepath.Join(pv.Spec.HostPath.Path, "file")); err != nil {
			t.Errorf("%s's directory emptied: %v", pv.Name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "victim")); err != nil {
		t.Errorf("the dir a forged path names: %v", err)
	}
	ev := f.events()
	if len(ev) != 3 {
		t.Errorf("events %q, want a refusal for each forged volume", ev)
	}
	for _, e := range ev {
		if !strings.HasPrefix(e, "Warning VolumeFailedDelete refusing to remove ") {
			t.Errorf("event %q", e)
		}
	}
}

func TestDeleteRetriesADirThatCannotGo(t *testing.T) {
	data := t.TempDir()
	pv := released(config.LocalStorageDir(data), "pvc-a", "a", corev1.PersistentVolumeReclaimDelete, hostname)
	f := newFixture(t, data, pv)
	f.p.removeAll = func(string) error { return errors.New("device or resource busy") }
	if err := f.p.syncVolume(t.Context(), "pvc-a"); err == nil {
		t.Fatal("no error for a directory that could not be removed: it would not be retried")
	}
	if _, err := f.client.CoreV1().PersistentVolumes().Get(t.Context(), "pvc-a", metav1.GetOptions{}); err != nil {
		t.Errorf("the volume went before its directory: %v", err)
	}
	ev := f.events()
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning VolumeFailedDelete removing "+pv.Spec.HostPath.Path+": device or resource busy") {
		t.Errorf("events %q", ev)
	}
	f.p.removeAll = os.RemoveAll
	if err := f.p.syncVolume(t.Context(), "pvc-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CoreV1().PersistentVolumes().Get(t.Context(), "pvc-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the retry: %v", err)
	}
}

// TestRun drives the loops through the informers: a claim the binder hands
// over is provisioned, and its volume, once Released, deleted.
func TestRun(t *testing.T) {
	data := t.TempDir()
	f := newFixture(t, data, localPathClass(corev1.PersistentVolumeReclaimDelete))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { f.p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	c := claim("default", "web", "uid-20", node)
	if _, err := f.client.CoreV1().PersistentVolumeClaims("default").Create(t.Context(), c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pv *corev1.PersistentVolume
	poll(t, "the volume", func() bool {
		var err error
		pv, err = f.client.CoreV1().PersistentVolumes().Get(t.Context(), "pvc-uid-20", metav1.GetOptions{})
		return err == nil
	})
	pv.Status.Phase = corev1.VolumeReleased
	if _, err := f.client.CoreV1().PersistentVolumes().UpdateStatus(t.Context(), pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the volume's deletion", func() bool {
		_, err := f.client.CoreV1().PersistentVolumes().Get(t.Context(), "pvc-uid-20", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := os.Stat(pv.Spec.HostPath.Path); !os.IsNotExist(err) {
		t.Errorf("directory after deletion: %v", err)
	}
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
