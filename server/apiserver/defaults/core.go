package defaults

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// namespace combines SetDefaults_Namespace (the immutable
// kubernetes.io/metadata.name label), SetDefaults_NamespaceStatus (phase
// Active). The "kubernetes" finalizer is the registry's to add on create
// (registry.prepareNamespace), as upstream's strategy does: defaulting it
// here would undo a /finalize that empties the list.
func Namespace(ns *corev1.Namespace) {
	// Nameless namespaces (generateName) get the label once named.
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
}

// secret defaults the type and folds the write-only stringData into data.
// Upstream does the fold while converting v1 to its internal type, so a
// stored or returned Secret never shows stringData and stringData wins over
// data for the same key; kelp stores v1 objects, so it happens here.
func Secret(s *corev1.Secret) {
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
	}
	s.StringData = nil
}

// node is SetObjectDefaults_Node: allocatable defaults to capacity, and the
// status quantities are rounded like every ResourceList.
func Node(n *corev1.Node) {
	if n.Status.Allocatable == nil && n.Status.Capacity != nil {
		n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	}
	roundResourceList(n.Status.Capacity)
	roundResourceList(n.Status.Allocatable)
}

// limitRange is SetDefaults_LimitRangeItem: for Container limits, the
// default limit falls back to max, the default request to the default
// limit, then to min.
func LimitRange(lr *corev1.LimitRange) {
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		if item.Type == corev1.LimitTypeContainer {
			if item.Default == nil {
				item.Default = corev1.ResourceList{}
			}
			if item.DefaultRequest == nil {
				item.DefaultRequest = corev1.ResourceList{}
			}
			for name, q := range item.Max {
				if _, ok := item.Default[name]; !ok {
					item.Default[name] = q.DeepCopy()
				}
			}
			for name, q := range item.Default {
				if _, ok := item.DefaultRequest[name]; !ok {
					item.DefaultRequest[name] = q.DeepCopy()
				}
			}
			for name, q := range item.Min {
				if _, ok := item.DefaultRequest[name]; !ok {
					item.DefaultRequest[name] = q.DeepCopy()
				}
			}
		}
		roundResourceList(item.Max)
		roundResourceList(item.Min)
		roundResourceList(item.Default)
		roundResourceList(item.DefaultRequest)
		roundResourceList(item.MaxLimitRequestRatio)
	}
}

func ResourceQuota(q *corev1.ResourceQuota) {
	roundResourceList(q.Spec.Hard)
	roundResourceList(q.Status.Hard)
	roundResourceList(q.Status.Used)
}

// TokenRequest is upstream's SetDefaults_TokenRequestSpec: an hour unless
// asked otherwise. (Audiences default to the API server's own, which only
// the handler knows.)
func TokenRequest(tr *authenticationv1.TokenRequest) {
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = ptr.To(int64(3600))
	}
}
