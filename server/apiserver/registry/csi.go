package registry

import (
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// The CSI kinds of storage.k8s.io/v1. kelp runs no CSI driver, attacher
// or external provisioner: they are stored and served for the clients
// and tests that write and read them, and nothing acts on them.

func csiDrivers() *Resource {
	return &Resource{
		GVR: gvr("storage.k8s.io", "v1", "csidrivers"), Kind: "CSIDriver", Singular: "csidriver",
		New: func() runtime.Object { return &storagev1.CSIDriver{} }, NewList: func() runtime.Object { return &storagev1.CSIDriverList{} },
		Strategy: Strategy{
			Default:              defaulter(defaults.CSIDriver),
			Validate:             validator(validation.CSIDriver),
			ValidateUpdate:       updateValidator(validation.CSIDriverUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

// csiNodes: a node's registered drivers (the kubelet's plugin manager
// writes them upstream); status is the drivers' storage health.
func csiNodes() *Resource {
	return &Resource{
		GVR: gvr("storage.k8s.io", "v1", "csinodes"), Kind: "CSINode", Singular: "csinode",
		New: func() runtime.Object { return &storagev1.CSINode{} }, NewList: func() runtime.Object { return &storagev1.CSINodeList{} },
		Status: true,
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.CSINode),
			ValidateUpdate:       updateValidator(validation.CSINodeUpdate),
			ValidateStatusUpdate: updateValidator(validation.CSINodeStatusUpdate),
		},
	}
}

// volumeAttachments: the attach-detach controller's requests to a CSI
// attacher (upstream); the attacher reports through /status.
func volumeAttachments() *Resource {
	return &Resource{
		GVR: gvr("storage.k8s.io", "v1", "volumeattachments"), Kind: "VolumeAttachment", Singular: "volumeattachment",
		New: func() runtime.Object { return &storagev1.VolumeAttachment{} }, NewList: func() runtime.Object { return &storagev1.VolumeAttachmentList{} },
		Status: true,
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.VolumeAttachment),
			ValidateUpdate:       updateValidator(validation.VolumeAttachmentUpdate),
			ValidateStatusUpdate: updateValidator(validation.VolumeAttachmentUpdate),
		},
	}
}

func csiStorageCapacities() *Resource {
	return &Resource{
		GVR: gvr("storage.k8s.io", "v1", "csistoragecapacities"), Kind: "CSIStorageCapacity", Singular: "csistoragecapacity", Namespaced: true,
		New: func() runtime.Object { return &storagev1.CSIStorageCapacity{} }, NewList: func() runtime.Object { return &storagev1.CSIStorageCapacityList{} },
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.CSIStorageCapacity),
			ValidateUpdate:       updateValidator(validation.CSIStorageCapacityUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

func volumeAttributesClasses() *Resource {
	return &Resource{
		GVR: gvr("storage.k8s.io", "v1", "volumeattributesclasses"), Kind: "VolumeAttributesClass", Singular: "volumeattributesclass", ShortNames: []string{"vac"},
		New: func() runtime.Object { return &storagev1.VolumeAttributesClass{} }, NewList: func() runtime.Object { return &storagev1.VolumeAttributesClassList{} },
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.VolumeAttributesClass),
			ValidateUpdate:       updateValidator(validation.VolumeAttributesClassUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}
