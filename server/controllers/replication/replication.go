// Package replication is kelp's ReplicationController controller. As
// upstream's (pkg/controller/replication), it is the ReplicaSet
// controller run over ReplicationControllers: this package only converts
// between the two kinds, so that every rule of keeping pods (expectations,
// adoption, slow start, the deletion order, status) is written once, in
// server/controllers/replicaset.
package replication

import (
	"context"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/kelp-project/kelp/server/controllers/replicaset"
)

// New wires the controller to the factory's ReplicationController and Pod
// informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, recorder record.EventRecorder) *replicaset.Controller {
	return replicaset.NewForKind(client, factory, recorder, Kind(client, factory))
}

// Kind presents ReplicationControllers to the ReplicaSet controller.
func Kind(client kubernetes.Interface, factory informers.SharedInformerFactory) *replicaset.Kind {
	inf := factory.Core().V1().ReplicationControllers()
	lister := inf.Lister()
	return &replicaset.Kind{
		GVK:      v1.SchemeGroupVersion.WithKind("ReplicationController"),
		Name:     "replicationcontroller",
		Informer: inf.Informer(),
		Get: func(ns, name string) (*apps.ReplicaSet, error) {
			rc, err := lister.ReplicationControllers(ns).Get(name)
			if err != nil {
				return nil, err
			}
			return toReplicaSet(rc), nil
		},
		List: func(ns string) ([]*apps.ReplicaSet, error) {
			rcs, err := lister.ReplicationControllers(ns).List(labels.Everything())
			if err != nil {
				return nil, err
			}
			out := make([]*apps.ReplicaSet, len(rcs))
			for i, rc := range rcs {
				out[i] = toReplicaSet(rc)
			}
			return out, nil
		},
		Convert: func(obj interface{}) (*apps.ReplicaSet, bool) {
			rc, ok := obj.(*v1.ReplicationController)
			if !ok {
				return nil, false
			}
			return toReplicaSet(rc), true
		},
		GetLive: func(ctx context.Context, ns, name string) (*apps.ReplicaSet, error) {
			rc, err := client.CoreV1().ReplicationControllers(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return toReplicaSet(rc), nil
		},
		UpdateStatus: func(ctx context.Context, rs *apps.ReplicaSet) (*apps.ReplicaSet, error) {
			rc, err := client.CoreV1().ReplicationControllers(rs.Namespace).UpdateStatus(ctx, toReplicationController(rs), metav1.UpdateOptions{})
			if err != nil {
				return nil, err
			}
			return toReplicaSet(rc), nil
		},
		// Events name the ReplicationController, as kubectl describe rc
		// looks them up.
		EventObject: func(rs *apps.ReplicaSet) runtime.Object { return toReplicationController(rs) },
		// A ReplicationController's status has no terminatingReplicas.
		Unstored: func(st *apps.ReplicaSetStatus) { st.TerminatingReplicas = nil },
	}
}

// toReplicaSet returns a ReplicaSet with rc's metadata, spec and status,
// sharing nothing with rc (which may be the informer's). The map selector
// becomes matchLabels; an empty one (which validation refuses) becomes no
// selector, which the controller leaves alone rather than read as
// "every pod".
func toReplicaSet(rc *v1.ReplicationController) *apps.ReplicaSet {
	rc = rc.DeepCopy()
	rs := &apps.ReplicaSet{
		ObjectMeta: rc.ObjectMeta,
		Spec: apps.ReplicaSetSpec{
			Replicas:        rc.Spec.Replicas,
			MinReadySeconds: rc.Spec.MinReadySeconds,
		},
		Status: apps.ReplicaSetStatus{
			Replicas:             rc.Status.Replicas,
			FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
			ReadyReplicas:        rc.Status.ReadyReplicas,
			AvailableReplicas:    rc.Status.AvailableReplicas,
			ObservedGeneration:   rc.Status.ObservedGeneration,
		},
	}
	if len(rc.Spec.Selector) > 0 {
		rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}
	}
	if rc.Spec.Template != nil {
		rs.Spec.Template = *rc.Spec.Template
	}
	for _, c := range rc.Status.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, apps.ReplicaSetCondition{
			Type: apps.ReplicaSetConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rs
}

// toReplicationController is the inverse of toReplicaSet.
func toReplicationController(rs *apps.ReplicaSet) *v1.ReplicationController {
	rs = rs.DeepCopy()
	rc := &v1.ReplicationController{
		ObjectMeta: rs.ObjectMeta,
		Spec: v1.ReplicationControllerSpec{
			Replicas:        rs.Spec.Replicas,
			MinReadySeconds: rs.Spec.MinReadySeconds,
			Template:        &rs.Spec.Template,
		},
		Status: v1.ReplicationControllerStatus{
			Replicas:             rs.Status.Replicas,
			FullyLabeledReplicas: rs.Status.FullyLabeledReplicas,
			ReadyReplicas:        rs.Status.ReadyReplicas,
			AvailableReplicas:    rs.Status.AvailableReplicas,
			ObservedGeneration:   rs.Status.ObservedGeneration,
		},
	}
	if rs.Spec.Selector != nil {
		rc.Spec.Selector = rs.Spec.Selector.MatchLabels
	}
	for _, c := range rs.Status.Conditions {
		rc.Status.Conditions = append(rc.Status.Conditions, v1.ReplicationControllerCondition{
			Type: v1.ReplicationControllerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rc
}
