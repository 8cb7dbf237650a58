package replicaset

import (
	"context"

	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Kind is the kind whose pods the controller keeps, seen as ReplicaSets:
// ReplicaSets themselves, or ReplicationControllers converted to and from
// them (upstream runs one controller over both the same way). The sync
// only ever handles *apps.ReplicaSet; what is kind-specific (reads,
// the status write, what events name) is here.
type Kind struct {
	// GVK is the kind the pods' ControllerRef names.
	GVK schema.GroupVersionKind
	// Name is the controller's, for its queue and log.
	Name string
	// Informer is the kind's shared informer.
	Informer cache.SharedIndexInformer
	// Get and List read from the informer's cache.
	Get  func(ns, name string) (*apps.ReplicaSet, error)
	List func(ns string) ([]*apps.ReplicaSet, error)
	// Convert turns one of the informer's objects into a ReplicaSet,
	// false if it is not of the kind.
	Convert func(obj interface{}) (*apps.ReplicaSet, bool)
	// GetLive reads the object from the API server, past the cache.
	GetLive func(ctx context.Context, ns, name string) (*apps.ReplicaSet, error)
	// UpdateStatus writes rs's status through the kind's /status and
	// returns the object as stored.
	UpdateStatus func(ctx context.Context, rs *apps.ReplicaSet) (*apps.ReplicaSet, error)
	// EventObject is the object an event about rs is recorded on.
	EventObject func(rs *apps.ReplicaSet) runtime.Object
	// Unstored, if set, clears the status fields the kind has no place
	// for: a computed status must compare equal to the stored one, or
	// every sync would write it again.
	Unstored func(st *apps.ReplicaSetStatus)
}

// ReplicaSets is the Kind of apps/v1 ReplicaSets.
func ReplicaSets(client kubernetes.Interface, factory informers.SharedInformerFactory) *Kind {
	inf := factory.Apps().V1().ReplicaSets()
	lister := inf.Lister()
	return &Kind{
		GVK:      apps.SchemeGroupVersion.WithKind("ReplicaSet"),
		Name:     "replicaset",
		Informer: inf.Informer(),
		Get:      func(ns, name string) (*apps.ReplicaSet, error) { return lister.ReplicaSets(ns).Get(name) },
		List: func(ns string) ([]*apps.ReplicaSet, error) {
			return lister.ReplicaSets(ns).List(labels.Everything())
		},
		Convert: func(obj interface{}) (*apps.ReplicaSet, bool) {
			rs, ok := obj.(*apps.ReplicaSet)
			return rs, ok
		},
		GetLive: func(ctx context.Context, ns, name string) (*apps.ReplicaSet, error) {
			return client.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		UpdateStatus: func(ctx context.Context, rs *apps.ReplicaSet) (*apps.ReplicaSet, error) {
			return client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
		},
		EventObject: func(rs *apps.ReplicaSet) runtime.Object { return rs },
	}
}
