package integration

import (
	"context"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// storageKind is one served storage.k8s.io/v1 kind driven through its
// typed client: a valid object, a merge patch it accepts (checked by
// patched), and an invalid object the server must refuse with 422.
type storageKind struct {
	resource  string
	header    string // kubectl get's columns
	create    func(ctx context.Context) (string, error)
	invalid   func(ctx context.Context) error
	get, del  func(ctx context.Context, name string) error
	list      func(ctx context.Context) (int, error)
	patch     func(ctx context.Context, name string, data []byte) (any, error)
	patchBody string
	patched   func(obj any) bool
}

// The CSI kinds of storage.k8s.io/v1 are served with upstream's
// defaults, validation (422 with causes), discovery and kubectl columns;
// nothing acts on them.
func TestStorageAPIKinds(t *testing.T) {
	s := startServer(t)
	cs := s.client()
	ctx := ctxT(t)
	st := cs.StorageV1()

	for _, k := range storageKinds(cs) {
		t.Run(k.resource, func(t *testing.T) {
			name, err := k.create(ctx)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if err := k.get(ctx, name); err != nil {
				t.Fatalf("get: %v", err)
			}
			if n, err := k.list(ctx); err != nil || n != 1 {
				t.Fatalf("list: %d items, %v", n, err)
			}
			obj, err := k.patch(ctx, name, []byte(k.patchBody))
			if err != nil || !k.patched(obj) {
				t.Fatalf("patch %s: %v (%+v)", k.patchBody, err, obj)
			}
			out := s.mustKubectl("get", k.resource, "-A")
			if header := strings.Join(strings.Fields(strings.SplitN(out, "\n", 2)[0]), " "); header != k.header || !strings.Contains(out, name) {
				t.Errorf("kubectl get %s:\n%s\nwant header %q", k.resource, out, k.header)
			}
			err = k.invalid(ctx)
			var status apierrors.APIStatus
			if !apierrors.IsInvalid(err) || !errorsAs(err, &status) || status.Status().Code != 422 ||
				status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
				t.Errorf("invalid object: want 422 with causes, got %v", err)
			}
			if err := k.del(ctx, name); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if err := k.get(ctx, name); !apierrors.IsNotFound(err) {
				t.Fatalf("get after delete: %v", err)
			}
		})
	}

	// Defaults, and the update rules upstream enforces.
	d, err := st.CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "csi.kelp.test"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sp := d.Spec
	if !deref(sp.AttachRequired) || deref(sp.PodInfoOnMount) || deref(sp.StorageCapacity) || deref(sp.RequiresRepublish) ||
		sp.SELinuxMount == nil || *sp.SELinuxMount || sp.FSGroupPolicy == nil || *sp.FSGroupPolicy != storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy ||
		len(sp.VolumeLifecycleModes) != 1 || sp.VolumeLifecycleModes[0] != storagev1.VolumeLifecyclePersistent {
		t.Errorf("CSIDriver defaults: %+v", sp)
	}
	_, err = st.CSIDrivers().Patch(ctx, d.Name, types.MergePatchType, []byte(`{"spec":{"attachRequired":false}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.attachedRequired: Invalid value: false: field is immutable") {
		t.Errorf("changing attachRequired: %v", err)
	}
	vac, err := st.VolumeAttributesClasses().Create(ctx, &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"},
		DriverName: "csi.kelp.test", Parameters: map[string]string{"iops": "100"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.VolumeAttributesClasses().Patch(ctx, vac.Name, types.MergePatchType, []byte(`{"parameters":{"iops":"200"}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "parameters: Forbidden: updates to parameters are forbidden.") {
		t.Errorf("changing a class's parameters: %v", err)
	}

	// A VolumeAttachment starts without status; its spec is fixed, and its
	// status changes only through /status.
	va, err := st.VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-status"},
		Spec:   storagev1.VolumeAttachmentSpec{Attacher: "csi.kelp.test", NodeName: "node-1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-1")}},
		Status: storagev1.VolumeAttachmentStatus{Attached: true}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if va.Status.Attached {
		t.Error("status kept on create")
	}
	_, err = st.VolumeAttachments().Patch(ctx, va.Name, types.MergePatchType, []byte(`{"spec":{"nodeName":"node-2"}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("moving an attachment: %v", err)
	}
	va, err = st.VolumeAttachments().Patch(ctx, va.Name, types.MergePatchType, []byte(`{"status":{"attached":true,"attachmentMetadata":{"k":"v"}}}`), metav1.PatchOptions{}, "status")
	if err != nil || !va.Status.Attached || va.Status.AttachmentMetadata["k"] != "v" {
		t.Errorf("status patch: %v %+v", err, va.Status)
	}

	rl, err := cs.Discovery().ServerResourcesForGroupVersion("storage.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range rl.APIResources {
		got[r.Name] = r.Namespaced
	}
	for _, want := range []string{"storageclasses", "csidrivers", "csinodes", "volumeattachments", "volumeattachments/status", "csinodes/status", "volumeattributesclasses"} {
		if namespaced, ok := got[want]; !ok || namespaced {
			t.Errorf("discovery: %s served %v, namespaced %v", want, ok, namespaced)
		}
	}
	if !got["csistoragecapacities"] {
		t.Errorf("discovery: csistoragecapacities not served namespaced: %+v", got)
	}
}

func deref(b *bool) bool { return b != nil && *b }

func errorsAs(err error, status *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*status = s
	}
	return ok
}

func storageKinds(cs *kubernetes.Clientset) []storageKind {
	st := cs.StorageV1()
	ns := "default"
	return []storageKind{{
		resource: "csidrivers",
		header:   "NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY TOKENREQUESTS REQUIRESREPUBLISH MODES AGE",
		create: func(ctx context.Context) (string, error) {
			o, err := st.CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "csi.example.com"}}, metav1.CreateOptions{})
			return o.GetName(), err
		},
		invalid: func(ctx context.Context) error {
			_, err := st.CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "bad.example.com"},
				Spec: storagev1.CSIDriverSpec{VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{"Forever"}}}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, n string) error {
			_, err := st.CSIDrivers().Get(ctx, n, metav1.GetOptions{})
			return err
		},
		del: func(ctx context.Context, n string) error {
			return st.CSIDrivers().Delete(ctx, n, metav1.DeleteOptions{})
		},
		list: func(ctx context.Context) (int, error) {
			l, err := st.CSIDrivers().List(ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
		patch: func(ctx context.Context, n string, data []byte) (any, error) {
			return st.CSIDrivers().Patch(ctx, n, types.MergePatchType, data, metav1.PatchOptions{})
		},
		patchBody: `{"spec":{"podInfoOnMount":true}}`,
		patched: func(o any) bool {
			d := o.(*storagev1.CSIDriver)
			return deref(d.Spec.PodInfoOnMount) && d.Generation == 2
		},
	}, {
		resource: "csinodes",
		header:   "NAME DRIVERS AGE",
		create: func(ctx context.Context) (string, error) {
			o, err := st.CSINodes().Create(ctx, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
				Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "csi.example.com", NodeID: "node-1"}}}}, metav1.CreateOptions{})
			return o.GetName(), err
		},
		invalid: func(ctx context.Context) error {
			_, err := st.CSINodes().Create(ctx, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-2"},
				Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "csi.example.com"}}}}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, n string) error {
			_, err := st.CSINodes().Get(ctx, n, metav1.GetOptions{})
			return err
		},
		del: func(ctx context.Context, n string) error { return st.CSINodes().Delete(ctx, n, metav1.DeleteOptions{}) },
		list: func(ctx context.Context) (int, error) {
			l, err := st.CSINodes().List(ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
		patch: func(ctx context.Context, n string, data []byte) (any, error) {
			return st.CSINodes().Patch(ctx, n, types.MergePatchType, data, metav1.PatchOptions{})
		},
		patchBody: `{"metadata":{"labels":{"patched":"yes"}}}`,
		patched:   func(o any) bool { return o.(*storagev1.CSINode).Labels["patched"] == "yes" },
	}, {
		resource: "volumeattachments",
		header:   "NAME ATTACHER PV NODE ATTACHED AGE",
		create: func(ctx context.Context) (string, error) {
			o, err := st.VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-1"},
				Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: "node-1",
					Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-1")}}}, metav1.CreateOptions{})
			return o.GetName(), err
		},
		invalid: func(ctx context.Context) error {
			_, err := st.VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "va-bad"},
				Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: "node-1"}}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, n string) error {
			_, err := st.VolumeAttachments().Get(ctx, n, metav1.GetOptions{})
			return err
		},
		del: func(ctx context.Context, n string) error {
			return st.VolumeAttachments().Delete(ctx, n, metav1.DeleteOptions{})
		},
		list: func(ctx context.Context) (int, error) {
			l, err := st.VolumeAttachments().List(ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
		patch: func(ctx context.Context, n string, data []byte) (any, error) {
			return st.VolumeAttachments().Patch(ctx, n, types.MergePatchType, data, metav1.PatchOptions{})
		},
		patchBody: `{"metadata":{"labels":{"patched":"yes"}}}`,
		patched:   func(o any) bool { return o.(*storagev1.VolumeAttachment).Labels["patched"] == "yes" },
	}, {
		resource: "csistoragecapacities",
		header:   "NAMESPACE NAME STORAGECLASSNAME CAPACITY",
		create: func(ctx context.Context) (string, error) {
			o, err := st.CSIStorageCapacities(ns).Create(ctx, &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "cap-1"},
				StorageClassName: "local", Capacity: ptr.To(resource.MustParse("10Gi"))}, metav1.CreateOptions{})
			return o.GetName(), err
		},
		invalid: func(ctx context.Context) error {
			_, err := st.CSIStorageCapacities(ns).Create(ctx, &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: "cap-bad"},
				StorageClassName: "Not_A_Class"}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, n string) error {
			_, err := st.CSIStorageCapacities(ns).Get(ctx, n, metav1.GetOptions{})
			return err
		},
		del: func(ctx context.Context, n string) error {
			return st.CSIStorageCapacities(ns).Delete(ctx, n, metav1.DeleteOptions{})
		},
		list: func(ctx context.Context) (int, error) {
			l, err := st.CSIStorageCapacities("").List(ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
		patch: func(ctx context.Context, n string, data []byte) (any, error) {
			return st.CSIStorageCapacities(ns).Patch(ctx, n, types.MergePatchType, data, metav1.PatchOptions{})
		},
		patchBody: `{"capacity":"20Gi"}`,
		patched: func(o any) bool {
			c := o.(*storagev1.CSIStorageCapacity)
			return c.Capacity != nil && c.Capacity.String() == "20Gi"
		},
	}, {
		resource: "volumeattributesclasses",
		header:   "NAME DRIVERNAME AGE",
		create: func(ctx context.Context) (string, error) {
			o, err := st.VolumeAttributesClasses().Create(ctx, &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "silver"},
				DriverName: "csi.example.com", Parameters: map[string]string{"iops": "100"}}, metav1.CreateOptions{})
			return o.GetName(), err
		},
		invalid: func(ctx context.Context) error {
			_, err := st.VolumeAttributesClasses().Create(ctx, &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "empty"},
				DriverName: "csi.example.com"}, metav1.CreateOptions{})
			return err
		},
		get: func(ctx context.Context, n string) error {
			_, err := st.VolumeAttributesClasses().Get(ctx, n, metav1.GetOptions{})
			return err
		},
		del: func(ctx context.Context, n string) error {
			return st.VolumeAttributesClasses().Delete(ctx, n, metav1.DeleteOptions{})
		},
		list: func(ctx context.Context) (int, error) {
			l, err := st.VolumeAttributesClasses().List(ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
		patch: func(ctx context.Context, n string, data []byte) (any, error) {
			return st.VolumeAttributesClasses().Patch(ctx, n, types.MergePatchType, data, metav1.PatchOptions{})
		},
		patchBody: `{"metadata":{"labels":{"patched":"yes"}}}`,
		patched:   func(o any) bool { return o.(*storagev1.VolumeAttributesClass).Labels["patched"] == "yes" },
	}}
}
