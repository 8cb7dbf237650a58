package registry

import (
	"reflect"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// flowcontrol.apiserver.k8s.io/v1: API Priority and Fairness's
// configuration. The API server keeps upstream's mandatory and suggested
// objects and the FlowSchemas' Dangling condition
// (server/controllers/apfconfig), but classifies no request by them: kelp
// limits requests with the max-in-flight filter.

func flowSchemas() *Resource {
	return &Resource{
		GVR: gvr("flowcontrol.apiserver.k8s.io", "v1", "flowschemas"), Kind: "FlowSchema", Singular: "flowschema",
		New:     func() runtime.Object { return &flowcontrolv1.FlowSchema{} },
		NewList: func() runtime.Object { return &flowcontrolv1.FlowSchemaList{} },
		Status:  true,
		Strategy: Strategy{
			Default:                defaulter(defaults.FlowSchema),
			Validate:               validator(validation.FlowSchema),
			ValidateUpdate:         updateValidator(validation.FlowSchemaUpdate),
			ValidateStatusUpdate:   updateValidator(validation.FlowSchemaStatusUpdate),
			PrepareForStatusUpdate: keepMetadata,
		},
	}
}

func priorityLevelConfigurations() *Resource {
	return &Resource{
		GVR: gvr("flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations"), Kind: "PriorityLevelConfiguration", Singular: "prioritylevelconfiguration",
		New:     func() runtime.Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
		NewList: func() runtime.Object { return &flowcontrolv1.PriorityLevelConfigurationList{} },
		Status:  true,
		Strategy: Strategy{
			Default:                defaulter(defaults.PriorityLevelConfiguration),
			Validate:               validator(validation.PriorityLevelConfiguration),
			ValidateUpdate:         updateValidator(validation.PriorityLevelConfigurationUpdate),
			ValidateStatusUpdate:   updateValidator(validation.PriorityLevelConfigurationStatusUpdate),
			PrepareForStatusUpdate: keepMetadata,
		},
	}
}

// keepMetadata: a /status write changes the status alone; metadata stays
// the stored object's but for managedFields, which record the write (the
// flowcontrol kinds' status strategies upstream).
func keepMetadata(obj, old runtime.Object) {
	n, ok := structField(obj, "ObjectMeta")
	o, ok2 := structField(old, "ObjectMeta")
	if !ok || !ok2 || n.Type() != o.Type() {
		return
	}
	managed := n.FieldByName("ManagedFields").Interface()
	n.Set(o)
	n.FieldByName("ManagedFields").Set(reflect.ValueOf(managed))
}
