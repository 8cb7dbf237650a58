package apiserver

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kelp-project/kelp/server/apiserver/auth"
	"github.com/kelp-project/kelp/server/apiserver/storage"
)

// The RBAC authorizer decides from an auth.RBACIndex; this keeps it
// current from the watch caches of the four RBAC resources: a list at
// start (so the first request is already decided with every binding),
// then each cache's events as they arrive. A kind-specific adapter, kept
// out of the generic files like nodeobjects.go.

var rbacResources = []string{"clusterroles", "roles", "clusterrolebindings", "rolebindings"}

// startRBACIndex fills the index and follows the caches until ctx ends.
func (s *Server) startRBACIndex(ctx context.Context) (*auth.RBACIndex, error) {
	idx := auth.NewRBACIndex()
	for _, res := range rbacResources {
		sv, ok := s.live().resources[schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: res}]
		if !ok {
			return nil, fmt.Errorf("rbac: %s is not served", res)
		}
		st, ok := sv.store.(*storage.Store)
		if !ok {
			return nil, fmt.Errorf("rbac: %s has no watch cache", res)
		}
		rv, err := relistRBAC(ctx, idx, sv, st)
		if err != nil {
			return nil, fmt.Errorf("rbac: listing %s: %w", res, err)
		}
		go followRBAC(ctx, idx, sv, st, rv)
	}
	return idx, nil
}

// relistRBAC replaces the index's objects of one kind with the cache's.
func relistRBAC(ctx context.Context, idx *auth.RBACIndex, sv *served, st *storage.Store) (int64, error) {
	res, err := st.List(ctx, storage.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, err
	}
	idx.Replace(sv.New(), res.Items)
	return res.ResourceVersion, nil
}

// followRBAC applies one cache's events to the index. A watch the cache
// ends (a relist, a slow consumer) is resumed from the last revision seen,
// or from a fresh list when that is gone.
func followRBAC(ctx context.Context, idx *auth.RBACIndex, sv *served, st *storage.Store, rv int64) {
	for ctx.Err() == nil {
		w, err := st.Watch(ctx, storage.ListOptions{ResourceVersion: strconv.FormatInt(rv, 10)})
		if err == nil {
			rv, err = applyRBACEvents(idx, w, rv)
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			logrus.WithError(err).Debugf("rbac: relisting %s", sv.GVR.Resource)
			for ctx.Err() == nil {
				if rv, err = relistRBAC(ctx, idx, sv, st); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

func applyRBACEvents(idx *auth.RBACIndex, w watch.Interface, rv int64) (int64, error) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified:
			idx.Set(ev.Object)
		case watch.Deleted:
			idx.Delete(ev.Object)
		case watch.Error:
			return rv, fmt.Errorf("watch error: %v", ev.Object)
		}
		if n, err := objectRV(ev.Object); err == nil && n > rv {
			rv = n
		}
	}
	return rv, nil
}

func objectRV(obj runtime.Object) (int64, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return 0, err
	}
	return storage.ParseRV(acc.GetResourceVersion())
}

// roleRules is the rules of the role a binding in namespace refers to:
// from the index, or, for a role too new to be there, through the getter
// admission uses (the watch cache, then etcd).
func (s *Server) roleRules(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, bool) {
	if rules, ok := s.rbac.RoleRefRules(ref, namespace); ok {
		return rules, true
	}
	res, ns := "clusterroles", ""
	if ref.Kind == "Role" {
		res, ns = "roles", namespace
	}
	obj, err := s.getter(schema.GroupVersionResource{Group: rbacv1.GroupName, Version: "v1", Resource: res}).Get(context.Background(), ns, ref.Name)
	if err != nil {
		return nil, false
	}
	switch r := obj.(type) {
	case *rbacv1.Role:
		return r.Rules, ref.Kind == "Role"
	case *rbacv1.ClusterRole:
		return r.Rules, ref.Kind == "ClusterRole"
	}
	return nil, false
}
