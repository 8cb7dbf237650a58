package registry

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func gvr(group, version, resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
}

// All returns every served resource, in discovery order.
func All() []*Resource {
	return []*Resource{
		// core/v1
		{GVR: gvr("", "v1", "namespaces"), Kind: "Namespace", Singular: "namespace", ShortNames: []string{"ns"},
			New: func() runtime.Object { return &corev1.Namespace{} }, NewList: func() runtime.Object { return &corev1.NamespaceList{} },
			Status: true, PrepareForCreate: prepareNamespace,
			Fields: func(o runtime.Object) fields.Set {
				return fields.Set{"status.phase": string(o.(*corev1.Namespace).Status.Phase)}
			}},
		{GVR: gvr("", "v1", "pods"), Kind: "Pod", Singular: "pod", ShortNames: []string{"po"}, Categories: []string{"all"}, Namespaced: true,
			New: func() runtime.Object { return &corev1.Pod{} }, NewList: func() runtime.Object { return &corev1.PodList{} },
			Status: true, PrepareForCreate: preparePod, Fields: podFields},
		{GVR: gvr("", "v1", "services"), Kind: "Service", Singular: "service", ShortNames: []string{"svc"}, Categories: []string{"all"}, Namespaced: true,
			New: func() runtime.Object { return &corev1.Service{} }, NewList: func() runtime.Object { return &corev1.ServiceList{} },
			Status: true, Fields: func(o runtime.Object) fields.Set {
				s := o.(*corev1.Service)
				return fields.Set{"spec.clusterIP": s.Spec.ClusterIP, "spec.type": string(s.Spec.Type)}
			}},
		{GVR: gvr("", "v1", "endpoints"), Kind: "Endpoints", Singular: "endpoints", ShortNames: []string{"ep"}, Namespaced: true,
			New: func() runtime.Object { return &corev1.Endpoints{} }, NewList: func() runtime.Object { return &corev1.EndpointsList{} }},
		{GVR: gvr("", "v1", "configmaps"), Kind: "ConfigMap", Singular: "configmap", ShortNames: []string{"cm"}, Namespaced: true,
			New: func() runtime.Object { return &corev1.ConfigMap{} }, NewList: func() runtime.Object { return &corev1.ConfigMapList{} }},
		{GVR: gvr("", "v1", "secrets"), Kind: "Secret", Singular: "secret", Namespaced: true,
			New: func() runtime.Object { return &corev1.Secret{} }, NewList: func() runtime.Object { return &corev1.SecretList{} },
			Fields: func(o runtime.Object) fields.Set { return fields.Set{"type": string(o.(*corev1.Secret).Type)} }},
		{GVR: gvr("", "v1", "serviceaccounts"), Kind: "ServiceAccount", Singular: "serviceaccount", ShortNames: []string{"sa"}, Namespaced: true,
			New: func() runtime.Object { return &corev1.ServiceAccount{} }, NewList: func() runtime.Object { return &corev1.ServiceAccountList{} }},
		{GVR: gvr("", "v1", "nodes"), Kind: "Node", Singular: "node", ShortNames: []string{"no"},
			New: func() runtime.Object { return &corev1.Node{} }, NewList: func() runtime.Object { return &corev1.NodeList{} },
			Status: true, KeepStatusOnCreate: true,
			Fields: func(o runtime.Object) fields.Set {
				return fields.Set{"spec.unschedulable": strconv.FormatBool(o.(*corev1.Node).Spec.Unschedulable)}
			}},
		{GVR: gvr("", "v1", "events"), Kind: "Event", Singular: "event", ShortNames: []string{"ev"}, Namespaced: true,
			New: func() runtime.Object { return &corev1.Event{} }, NewList: func() runtime.Object { return &corev1.EventList{} },
			Fields: eventFields},
		{GVR: gvr("", "v1", "persistentvolumeclaims"), Kind: "PersistentVolumeClaim", Singular: "persistentvolumeclaim", ShortNames: []string{"pvc"}, Namespaced: true,
			New: func() runtime.Object { return &corev1.PersistentVolumeClaim{} }, NewList: func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
			Status: true, PrepareForCreate: func(o runtime.Object) { o.(*corev1.PersistentVolumeClaim).Status.Phase = corev1.ClaimPending }},
		{GVR: gvr("", "v1", "persistentvolumes"), Kind: "PersistentVolume", Singular: "persistentvolume", ShortNames: []string{"pv"},
			New: func() runtime.Object { return &corev1.PersistentVolume{} }, NewList: func() runtime.Object { return &corev1.PersistentVolumeList{} },
			Status: true, PrepareForCreate: func(o runtime.Object) { o.(*corev1.PersistentVolume).Status.Phase = corev1.VolumePending }},
		{GVR: gvr("", "v1", "limitranges"), Kind: "LimitRange", Singular: "limitrange", ShortNames: []string{"limits"}, Namespaced: true,
			New: func() runtime.Object { return &corev1.LimitRange{} }, NewList: func() runtime.Object { return &corev1.LimitRangeList{} }},
		{GVR: gvr("", "v1", "resourcequotas"), Kind: "ResourceQuota", Singular: "resourcequota", ShortNames: []string{"quota"}, Namespaced: true,
			New: func() runtime.Object { return &corev1.ResourceQuota{} }, NewList: func() runtime.Object { return &corev1.ResourceQuotaList{} },
			Status: true},
		// apps/v1
		{GVR: gvr("apps", "v1", "deployments"), Kind: "Deployment", Singular: "deployment", ShortNames: []string{"deploy"}, Categories: []string{"all"}, Namespaced: true,
			New: func() runtime.Object { return &appsv1.Deployment{} }, NewList: func() runtime.Object { return &appsv1.DeploymentList{} },
			Status: true, Scale: true},
		{GVR: gvr("apps", "v1", "replicasets"), Kind: "ReplicaSet", Singular: "replicaset", ShortNames: []string{"rs"}, Categories: []string{"all"}, Namespaced: true,
			New: func() runtime.Object { return &appsv1.ReplicaSet{} }, NewList: func() runtime.Object { return &appsv1.ReplicaSetList{} },
			Status: true, Scale: true,
			Fields: func(o runtime.Object) fields.Set {
				return fields.Set{"status.replicas": strconv.Itoa(int(o.(*appsv1.ReplicaSet).Status.Replicas))}
			}},
		{GVR: gvr("apps", "v1", "statefulsets"), Kind: "StatefulSet", Singular: "statefulset", ShortNames: []string{"sts"}, Categories: []string{"all"}, Namespaced: true,
			New: func() runtime.Object { return &appsv1.StatefulSet{} }, NewList: func() runtime.Object { return &appsv1.StatefulSetList{} },
			Status: true, Scale: true},
		{GVR: gvr("apps", "v1", "daemonsets"), Kind: "DaemonSet", Singular: "daemonset", ShortNames: []string{"ds"}, Categories: []string{"all"}, Namespaced: true,
			New: func() runtime.Object { return &appsv1.DaemonSet{} }, NewList: func() runtime.Object { return &appsv1.DaemonSetList{} },
			Status: true},
		{GVR: gvr("apps", "v1", "controllerrevisions"), Kind: "ControllerRevision", Singular: "controllerrevision", Namespaced: true,
			New: func() runtime.Object { return &appsv1.ControllerRevision{} }, NewList: func() runtime.Object { return &appsv1.ControllerRevisionList{} }},
		// batch/v1
		{GVR: gvr("batch", "v1", "jobs"), Kind: "Job", Singular: "job", Categories: []string{"all"}, Namespaced: true,
			New: func() runtime.Object { return &batchv1.Job{} }, NewList: func() runtime.Object { return &batchv1.JobList{} },
			Status: true, Fields: func(o runtime.Object) fields.Set {
				return fields.Set{"status.successful": strconv.Itoa(int(o.(*batchv1.Job).Status.Succeeded))}
			}},
		{GVR: gvr("batch", "v1", "cronjobs"), Kind: "CronJob", Singular: "cronjob", ShortNames: []string{"cj"}, Categories: []string{"all"}, Namespaced: true,
			New: func() runtime.Object { return &batchv1.CronJob{} }, NewList: func() runtime.Object { return &batchv1.CronJobList{} },
			Status: true},
		// coordination.k8s.io/v1
		{GVR: gvr("coordination.k8s.io", "v1", "leases"), Kind: "Lease", Singular: "lease", Namespaced: true,
			New: func() runtime.Object { return &coordinationv1.Lease{} }, NewList: func() runtime.Object { return &coordinationv1.LeaseList{} }},
		// discovery.k8s.io/v1
		{GVR: gvr("discovery.k8s.io", "v1", "endpointslices"), Kind: "EndpointSlice", Singular: "endpointslice", Namespaced: true,
			New: func() runtime.Object { return &discoveryv1.EndpointSlice{} }, NewList: func() runtime.Object { return &discoveryv1.EndpointSliceList{} }},
		// events.k8s.io/v1 is stored as core/v1 Events.
		{GVR: gvr("events.k8s.io", "v1", "events"), Kind: "Event", Singular: "event", ShortNames: []string{"ev"}, Namespaced: true,
			StoredAs: &coreEvents, ToStorage: EventToCore, FromStorage: EventFromCore,
			New: func() runtime.Object { return &eventsv1.Event{} }, NewList: func() runtime.Object { return &eventsv1.EventList{} },
			Fields: func(o runtime.Object) fields.Set { return eventFields(EventToCore(o)) }},
		// policy/v1
		{GVR: gvr("policy", "v1", "poddisruptionbudgets"), Kind: "PodDisruptionBudget", Singular: "poddisruptionbudget", ShortNames: []string{"pdb"}, Namespaced: true,
			New: func() runtime.Object { return &policyv1.PodDisruptionBudget{} }, NewList: func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
			Status: true},
		// rbac.authorization.k8s.io/v1
		{GVR: gvr("rbac.authorization.k8s.io", "v1", "roles"), Kind: "Role", Singular: "role", Namespaced: true,
			New: func() runtime.Object { return &rbacv1.Role{} }, NewList: func() runtime.Object { return &rbacv1.RoleList{} }},
		{GVR: gvr("rbac.authorization.k8s.io", "v1", "rolebindings"), Kind: "RoleBinding", Singular: "rolebinding", Namespaced: true,
			New: func() runtime.Object { return &rbacv1.RoleBinding{} }, NewList: func() runtime.Object { return &rbacv1.RoleBindingList{} }},
		{GVR: gvr("rbac.authorization.k8s.io", "v1", "clusterroles"), Kind: "ClusterRole", Singular: "clusterrole",
			New: func() runtime.Object { return &rbacv1.ClusterRole{} }, NewList: func() runtime.Object { return &rbacv1.ClusterRoleList{} }},
		{GVR: gvr("rbac.authorization.k8s.io", "v1", "clusterrolebindings"), Kind: "ClusterRoleBinding", Singular: "clusterrolebinding",
			New: func() runtime.Object { return &rbacv1.ClusterRoleBinding{} }, NewList: func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} }},
		// networking.k8s.io/v1
		{GVR: gvr("networking.k8s.io", "v1", "ingresses"), Kind: "Ingress", Singular: "ingress", ShortNames: []string{"ing"}, Namespaced: true,
			New: func() runtime.Object { return &networkingv1.Ingress{} }, NewList: func() runtime.Object { return &networkingv1.IngressList{} },
			Status: true},
		{GVR: gvr("networking.k8s.io", "v1", "networkpolicies"), Kind: "NetworkPolicy", Singular: "networkpolicy", ShortNames: []string{"netpol"}, Namespaced: true,
			New: func() runtime.Object { return &networkingv1.NetworkPolicy{} }, NewList: func() runtime.Object { return &networkingv1.NetworkPolicyList{} }},
		// authentication.k8s.io/v1 and authorization.k8s.io/v1: reviews.
		{GVR: gvr("authentication.k8s.io", "v1", "selfsubjectreviews"), Kind: "SelfSubjectReview", Singular: "selfsubjectreview",
			Review: true, Verbs: []string{"create"},
			New: func() runtime.Object { return &authenticationv1.SelfSubjectReview{} }, NewList: func() runtime.Object { return &metav1.List{} }},
		{GVR: gvr("authorization.k8s.io", "v1", "selfsubjectaccessreviews"), Kind: "SelfSubjectAccessReview", Singular: "selfsubjectaccessreview",
			Review: true, Verbs: []string{"create"},
			New: func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }, NewList: func() runtime.Object { return &metav1.List{} }},
		// storage.k8s.io/v1
		{GVR: gvr("storage.k8s.io", "v1", "storageclasses"), Kind: "StorageClass", Singular: "storageclass", ShortNames: []string{"sc"},
			New: func() runtime.Object { return &storagev1.StorageClass{} }, NewList: func() runtime.Object { return &storagev1.StorageClassList{} }},
	}
}

var coreEvents = gvr("", "v1", "events")

func podFields(o runtime.Object) fields.Set {
	p := o.(*corev1.Pod)
	return fields.Set{
		"spec.nodeName":            p.Spec.NodeName,
		"spec.restartPolicy":       string(p.Spec.RestartPolicy),
		"spec.schedulerName":       p.Spec.SchedulerName,
		"spec.serviceAccountName":  p.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(p.Spec.HostNetwork),
		"status.phase":             string(p.Status.Phase),
		"status.podIP":             p.Status.PodIP,
		"status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

func eventFields(o runtime.Object) fields.Set {
	e := o.(*corev1.Event)
	return fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         e.Source.Component,
		"type":                           e.Type,
	}
}

// prepareNamespace gives a new namespace the "kubernetes" finalizer, which
// the namespace controller removes once the namespace is empty.
func prepareNamespace(o runtime.Object) {
	ns := o.(*corev1.Namespace)
	ns.Status.Phase = corev1.NamespaceActive
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			return
		}
	}
	ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
}

func preparePod(o runtime.Object) {
	p := o.(*corev1.Pod)
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: QOSClass(p)}
}
