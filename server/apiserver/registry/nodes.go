package registry

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// nodes keep the status a kubelet registers them with.
func nodes() *Resource {
	return &Resource{
		GVR: gvr("", "v1", "nodes"), Kind: "Node", Singular: "node", ShortNames: []string{"no"},
		New: func() runtime.Object { return &corev1.Node{} }, NewList: func() runtime.Object { return &corev1.NodeList{} },
		Status: true, KeepStatusOnCreate: true,
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"spec.unschedulable": strconv.FormatBool(o.(*corev1.Node).Spec.Unschedulable)}
		},
		Strategy: Strategy{
			Default:              defaulter(defaults.Node),
			Validate:             validator(validation.Node),
			ValidateUpdate:       updateValidator(validation.NodeUpdate),
			ValidateStatusUpdate: updateValidator(validation.NodeStatusUpdate),
		},
	}
}
