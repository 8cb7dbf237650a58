package registry

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// The core/v1 kinds without hooks of their own. Pods, Services,
// Namespaces, Nodes and Events have files of their own.

func endpoints() *Resource {
	return &Resource{
		GVR: gvr("", "v1", "endpoints"), Kind: "Endpoints", Singular: "endpoints", ShortNames: []string{"ep"}, Namespaced: true,
		New: func() runtime.Object { return &corev1.Endpoints{} }, NewList: func() runtime.Object { return &corev1.EndpointsList{} },
		Strategy: plainStrategy(defaulter(defaults.Endpoints), validator(validation.Endpoints)),
	}
}

func configMaps() *Resource {
	return &Resource{
		GVR: gvr("", "v1", "configmaps"), Kind: "ConfigMap", Singular: "configmap", ShortNames: []string{"cm"}, Namespaced: true,
		New: func() runtime.Object { return &corev1.ConfigMap{} }, NewList: func() runtime.Object { return &corev1.ConfigMapList{} },
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.ConfigMap),
			ValidateUpdate:       updateValidator(validation.ConfigMapUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

func secrets() *Resource {
	return &Resource{
		GVR: gvr("", "v1", "secrets"), Kind: "Secret", Singular: "secret", Namespaced: true,
		New: func() runtime.Object { return &corev1.Secret{} }, NewList: func() runtime.Object { return &corev1.SecretList{} },
		Fields: func(o runtime.Object) fields.Set { return fields.Set{"type": string(o.(*corev1.Secret).Type)} },
		Strategy: Strategy{
			Default:              defaulter(defaults.Secret),
			Validate:             validator(validation.Secret),
			ValidateUpdate:       updateValidator(validation.SecretUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

func serviceAccounts() *Resource {
	return &Resource{
		GVR: gvr("", "v1", "serviceaccounts"), Kind: "ServiceAccount", Singular: "serviceaccount", ShortNames: []string{"sa"}, Namespaced: true,
		New: func() runtime.Object { return &corev1.ServiceAccount{} }, NewList: func() runtime.Object { return &corev1.ServiceAccountList{} },
		Subresources: []Subresource{{Name: "token", Verbs: []string{"create"},
			GVK: schema.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest"}, Kind: TokenSubresource}},
		Strategy: plainStrategy(NoDefaults, validator(validation.ServiceAccount)),
	}
}

func persistentVolumeClaims() *Resource {
	return &Resource{
		GVR: gvr("", "v1", "persistentvolumeclaims"), Kind: "PersistentVolumeClaim", Singular: "persistentvolumeclaim", ShortNames: []string{"pvc"}, Namespaced: true,
		New: func() runtime.Object { return &corev1.PersistentVolumeClaim{} }, NewList: func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		Status: true,
		Strategy: Strategy{
			Default:              defaulter(defaults.PersistentVolumeClaim),
			Validate:             validator(validation.PersistentVolumeClaim),
			ValidateUpdate:       updateValidator(validation.PersistentVolumeClaimUpdate),
			ValidateStatusUpdate: metaUpdate,
			PrepareForCreate:     func(o runtime.Object) { o.(*corev1.PersistentVolumeClaim).Status.Phase = corev1.ClaimPending },
		},
	}
}

func persistentVolumes() *Resource {
	return &Resource{
		GVR: gvr("", "v1", "persistentvolumes"), Kind: "PersistentVolume", Singular: "persistentvolume", ShortNames: []string{"pv"},
		New: func() runtime.Object { return &corev1.PersistentVolume{} }, NewList: func() runtime.Object { return &corev1.PersistentVolumeList{} },
		Status: true,
		Strategy: Strategy{
			Default:              defaulter(defaults.PersistentVolume),
			Validate:             validator(validation.PersistentVolume),
			ValidateUpdate:       updateValidator(validation.PersistentVolumeUpdate),
			ValidateStatusUpdate: metaUpdate,
			PrepareForCreate:     func(o runtime.Object) { o.(*corev1.PersistentVolume).Status.Phase = corev1.VolumePending },
		},
	}
}

func limitRanges() *Resource {
	return &Resource{
		GVR: gvr("", "v1", "limitranges"), Kind: "LimitRange", Singular: "limitrange", ShortNames: []string{"limits"}, Namespaced: true,
		New: func() runtime.Object { return &corev1.LimitRange{} }, NewList: func() runtime.Object { return &corev1.LimitRangeList{} },
		Strategy: withGenericTable(plainStrategy(defaulter(defaults.LimitRange), validator(validation.LimitRange))),
	}
}

func resourceQuotas() *Resource {
	return &Resource{
		GVR: gvr("", "v1", "resourcequotas"), Kind: "ResourceQuota", Singular: "resourcequota", ShortNames: []string{"quota"}, Namespaced: true,
		New: func() runtime.Object { return &corev1.ResourceQuota{} }, NewList: func() runtime.Object { return &corev1.ResourceQuotaList{} },
		Status: true,
		Strategy: Strategy{
			Default:              defaulter(defaults.ResourceQuota),
			Validate:             validator(validation.ResourceQuota),
			ValidateUpdate:       genericUpdate(validator(validation.ResourceQuota)),
			ValidateStatusUpdate: updateValidator(validation.ResourceQuotaStatusUpdate),
		},
	}
}

func podTemplates() *Resource {
	return &Resource{
		GVR: gvr("", "v1", "podtemplates"), Kind: "PodTemplate", Singular: "podtemplate", Namespaced: true,
		New: func() runtime.Object { return &corev1.PodTemplate{} }, NewList: func() runtime.Object { return &corev1.PodTemplateList{} },
		Strategy: plainStrategy(defaulter(defaults.PodTemplate), validator(validation.PodTemplate)),
	}
}

// replicationControllers: the ReplicaSet controller runs over them too
// (server/controllers/replication). Unlike a ReplicaSet's, the selector
// may change: upstream's update rule is the create rule.
func replicationControllers() *Resource {
	return &Resource{
		GVR: gvr("", "v1", "replicationcontrollers"), Kind: "ReplicationController", Singular: "replicationcontroller", ShortNames: []string{"rc"}, Categories: []string{"all"}, Namespaced: true,
		New: func() runtime.Object { return &corev1.ReplicationController{} }, NewList: func() runtime.Object { return &corev1.ReplicationControllerList{} },
		Status: true,
		Scale: replicasScale(func(o *corev1.ReplicationController) (*int32, int32, *metav1.LabelSelector) {
			return o.Spec.Replicas, o.Status.Replicas, &metav1.LabelSelector{MatchLabels: o.Spec.Selector}
		}, func(o *corev1.ReplicationController, n *int32) { o.Spec.Replicas = n }),
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"status.replicas": strconv.Itoa(int(o.(*corev1.ReplicationController).Status.Replicas))}
		},
		Strategy: Strategy{
			Default:              defaulter(defaults.ReplicationController),
			Validate:             validator(validation.ReplicationController),
			ValidateUpdate:       genericUpdate(validator(validation.ReplicationController)),
			ValidateStatusUpdate: updateValidator(validation.ReplicationControllerStatusUpdate),
		},
	}
}
