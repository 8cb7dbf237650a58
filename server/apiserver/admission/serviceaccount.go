package admission

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
)

// Upstream's names for the token volume ServiceAccount admission adds.
const (
	// DefaultServiceAccountName is the account a pod runs as unless it
	// names another.
	DefaultServiceAccountName = "default"
	// TokenMountPath is where every container sees its token, CA bundle
	// and namespace.
	TokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// tokenVolumePrefix + 5 random characters names the volume.
	tokenVolumePrefix = "kube-api-access-"
	// TokenExpirationSeconds is the lifetime the volume asks for: an hour
	// and seven seconds, the value the API server recognises to extend
	// the token (see apiserver's warnOnlyExpirationSeconds).
	TokenExpirationSeconds = 3607
	rootCAConfigMap        = "kube-root-ca.crt"
)

// serviceAccount is upstream's ServiceAccount admission plugin for pod
// creates: it defaults serviceAccountName to "default", refuses a pod whose
// ServiceAccount does not exist, and, unless the pod or its ServiceAccount
// opts out with automountServiceAccountToken=false, adds the projected
// kube-api-access-<x> volume (a bound token, the kube-root-ca.crt bundle,
// the namespace) mounted read-only at TokenMountPath in every container
// and init container that has nothing there yet. The kubelet fills the
// token in (agent/kubelet's serviceAccountToken projection).
type serviceAccount struct {
	accounts ObjectGetter
	// retryInterval spaces the lookups of a missing "default" account.
	retryInterval func() time.Duration
}

func newServiceAccount(accounts ObjectGetter) serviceAccount {
	return serviceAccount{accounts: accounts, retryInterval: func() time.Duration {
		return time.Duration(100+rand.IntN(100)) * time.Millisecond
	}}
}

func (s serviceAccount) Admit(ctx context.Context, a *Attributes) error {
	p, ok := creatingPod(a)
	if !ok {
		return nil
	}
	// Mirror pods (of static pods) may not use the API as an account;
	// kelp runs none, but leaves them alone as upstream does.
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return nil
	}
	// The deprecated field names the account when the new one does not,
	// as upstream's v1 conversion reads it; afterwards both agree.
	if p.Spec.ServiceAccountName == "" {
		p.Spec.ServiceAccountName = p.Spec.DeprecatedServiceAccount
	}
	if p.Spec.ServiceAccountName == "" {
		p.Spec.ServiceAccountName = DefaultServiceAccountName
	}
	p.Spec.DeprecatedServiceAccount = p.Spec.ServiceAccountName
	sa, err := s.lookup(ctx, a.Namespace, p.Spec.ServiceAccountName)
	if err != nil {
		return forbidden(a, "error looking up service account %s/%s: %v", a.Namespace, p.Spec.ServiceAccountName, err)
	}
	if automount(p, sa) {
		mountToken(p)
	}
	return nil
}

// lookup finds the ServiceAccount: the getter reads the watch cache, then
// etcd. The "default" account is looked for up to ten times, as upstream:
// the ServiceAccount controller may be creating it in a namespace made a
// moment ago.
func (s serviceAccount) lookup(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	attempts := 1
	if name == DefaultServiceAccountName {
		attempts = 10
	}
	for i := 0; i < attempts; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(s.retryInterval()):
			}
		}
		obj, err := s.accounts.Get(ctx, namespace, name)
		if err == nil {
			sa, ok := obj.(*corev1.ServiceAccount)
			if !ok {
				return nil, fmt.Errorf("unexpected %T", obj)
			}
			return sa, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("serviceaccount"), name)
}

// automount: the pod's choice, else the ServiceAccount's, else yes.
func automount(p *corev1.Pod, sa *corev1.ServiceAccount) bool {
	if p.Spec.AutomountServiceAccountToken != nil {
		return *p.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// mountToken is upstream's mountServiceAccountToken: a kube-api-access
// volume already in the pod is reused; a container that mounts something
// at TokenMountPath keeps it.
func mountToken(p *corev1.Pod) {
	name := ""
	exists := false
	taken := map[string]bool{}
	for _, v := range p.Spec.Volumes {
		taken[v.Name] = true
		if strings.HasPrefix(v.Name, tokenVolumePrefix) {
			name, exists = v.Name, true
		}
	}
	for name == "" || (!exists && taken[name]) {
		name = tokenVolumePrefix + utilrand.String(5)
	}
	mount := corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: TokenMountPath}
	needed := false
	add := func(cs []corev1.Container) {
		for i := range cs {
			has := false
			for _, m := range cs[i].VolumeMounts {
				has = has || m.MountPath == TokenMountPath
			}
			if !has {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount)
				needed = true
			}
		}
	}
	add(p.Spec.InitContainers)
	add(p.Spec.Containers)
	if needed && !exists {
		p.Spec.Volumes = append(p.Spec.Volumes, TokenVolume(name))
	}
}

// TokenVolume is the projected volume upstream's admission adds, with the
// defaults already filled in (admission runs after defaulting).
func TokenVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(int32(corev1.ProjectedVolumeSourceDefaultMode)),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(TokenExpirationSeconds))}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: rootCAConfigMap},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}
}
