package defaults_test

import (
	"testing"

	"k8s.io/utils/ptr"

	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
)

func TestCSIDriverDefaults(t *testing.T) {
	d := &storagev1.CSIDriver{}
	defaults.CSIDriver(d)
	want := storagev1.CSIDriverSpec{
		AttachRequired:                ptr.To(true),
		PodInfoOnMount:                ptr.To(false),
		VolumeLifecycleModes:          []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		StorageCapacity:               ptr.To(false),
		FSGroupPolicy:                 ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy),
		RequiresRepublish:             ptr.To(false),
		SELinuxMount:                  ptr.To(false),
		PreventPodSchedulingIfMissing: ptr.To(false),
	}
	if !apiequality.Semantic.DeepEqual(d.Spec, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", d.Spec, want)
	}

	// What a client sets is kept.
	set := &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{
		AttachRequired:       ptr.To(false),
		SELinuxMount:         ptr.To(true),
		FSGroupPolicy:        ptr.To(storagev1.FileFSGroupPolicy),
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral},
	}}
	defaults.CSIDriver(set)
	if *set.Spec.AttachRequired || !*set.Spec.SELinuxMount || *set.Spec.FSGroupPolicy != storagev1.FileFSGroupPolicy ||
		len(set.Spec.VolumeLifecycleModes) != 1 || set.Spec.VolumeLifecycleModes[0] != storagev1.VolumeLifecycleEphemeral {
		t.Fatalf("set fields overwritten: %+v", set.Spec)
	}
}
