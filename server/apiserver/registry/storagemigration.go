package registry

import (
	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// storagemigration.k8s.io/v1: StorageVersionMigration, a request to
// rewrite every stored object of one resource. The storage version
// migrator (server/controllers/storageversionmigrator) carries it out and
// reports through the status conditions; upstream has no defaults for it,
// and its spec is immutable.

func storageVersionMigrations() *Resource {
	return &Resource{
		GVR: gvr("storagemigration.k8s.io", "v1", "storageversionmigrations"), Kind: "StorageVersionMigration", Singular: "storageversionmigration",
		New:     func() runtime.Object { return &svmv1.StorageVersionMigration{} },
		NewList: func() runtime.Object { return &svmv1.StorageVersionMigrationList{} },
		Status:  true,
		Strategy: Strategy{
			Default:                NoDefaults,
			Validate:               validator(validation.StorageVersionMigration),
			ValidateUpdate:         updateValidator(validation.StorageVersionMigrationUpdate),
			ValidateStatusUpdate:   updateValidator(validation.StorageVersionMigrationStatusUpdate),
			PrepareForStatusUpdate: keepMetadata,
		},
	}
}
