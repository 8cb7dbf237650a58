package allocator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/kelp-project/kelp/server/apiserver/storage"
)

// ManagedBy is the ipaddress.kubernetes.io/managed-by label of the
// IPAddresses the allocator creates, upstream's ipallocator name. An
// IPAddress without it (a user's) reserves its IP just the same, but
// Repair never removes it.
const ManagedBy = "ipallocator.k8s.io"

// errNotHolder refuses a release by someone who does not hold the IP.
var errNotHolder = errors.New("the IP is held by another parent")

// UseIPAddresses gives the allocator the IPAddress storage, where every
// cluster IP is claimed: the IPAddress named by the IP is the allocation
// itself, one source of truth for the allocator and for the API, so an
// IPAddress a user creates reserves its IP too. The API server calls it
// once, after opening storage and before serving.
func (s *Services) UseIPAddresses(st *storage.Store) { s.ips = st }

// serviceRef is the parentRef of the IPAddress a Service's cluster IP is,
// owner being the Service's "namespace/name".
func serviceRef(owner string) *networkingv1.ParentReference {
	ns, name, _ := strings.Cut(owner, "/")
	return &networkingv1.ParentReference{Group: "", Resource: "services", Namespace: ns, Name: name}
}

// heldBy tells whether the IPAddress is the cluster IP of the Service owner.
func heldBy(obj runtime.Object, owner string) bool {
	ip, ok := obj.(*networkingv1.IPAddress)
	if !ok || ip.Spec.ParentRef == nil {
		return false
	}
	return *ip.Spec.ParentRef == *serviceRef(owner)
}

// claimIP creates the IPAddress ip for owner. It is ErrAllocated when any
// other IPAddress of that name exists (another Service's, or one a user
// created); an IPAddress the same Service already holds counts as its
// own (held), so a retried write does not fail on its own allocation.
func (s *Services) claimIP(ctx context.Context, ip, owner string) (held bool, err error) {
	if s.ips == nil {
		return false, fmt.Errorf("the IPAddress storage is not open")
	}
	key := s.ips.Key("", ip)
	for range 3 {
		obj := &networkingv1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{
				Name: ip, UID: uuid.NewUUID(), CreationTimestamp: metav1.Now(), Generation: 1,
				Labels: map[string]string{
					networkingv1.LabelIPAddressFamily: string(corev1.IPv4Protocol),
					networkingv1.LabelManagedBy:       ManagedBy,
				},
			},
			Spec: networkingv1.IPAddressSpec{ParentRef: serviceRef(owner)},
		}
		_, err := s.ips.Create(ctx, key, obj, false)
		if !apierrors.IsAlreadyExists(err) {
			return false, err
		}
		cur, err := s.ips.Get(ctx, key)
		switch {
		case apierrors.IsNotFound(err):
			continue // released in between: try again
		case err != nil:
			return false, err
		case heldBy(cur, owner):
			return true, nil
		}
		return false, ErrAllocated{Value: ip}
	}
	return false, ErrAllocated{Value: ip}
}

// ReleaseIP deletes the IPAddress ip if it is owner's.
func (s *Services) ReleaseIP(ctx context.Context, ip, owner string) {
	if s.ips == nil {
		return
	}
	_, _ = s.ips.Delete(ctx, s.ips.Key("", ip), func(cur runtime.Object) error {
		if !heldBy(cur, owner) {
			return errNotHolder
		}
		return nil
	}, false)
}

// Repair makes the allocations match the Services that exist: values
// whose owner is gone or no longer uses them are freed, and values in use
// but unrecorded are claimed. inUse maps owner to its IPs and ports. Only
// IPAddresses labelled ManagedBy are ever freed: a user's stay. A Service
// whose IP another object holds is logged, not fixed (upstream's repair
// loop records the same conflict as an event).
func (s *Services) Repair(ctx context.Context, inUse map[string][]string) error {
	wantIPs, wantPorts := map[string]string{}, map[string]string{}
	for owner, vals := range inUse {
		for _, v := range vals {
			if _, err := strconv.Atoi(v); err == nil {
				wantPorts[portPrefix+v] = owner
			} else {
				wantIPs[v] = owner
			}
		}
	}
	resp, err := s.client.Get(ctx, portPrefix, clientv3.WithPrefix())
	if err != nil {
		return err
	}
	for _, kv := range resp.Kvs {
		if owner, ok := wantPorts[string(kv.Key)]; !ok || owner != string(kv.Value) {
			s.release(ctx, string(kv.Key), string(kv.Value))
		}
	}
	for key, owner := range wantPorts {
		if _, err := s.claim(ctx, key, owner, key); err != nil {
			return fmt.Errorf("repair %s: %w", key, err)
		}
	}

	if s.ips == nil {
		return fmt.Errorf("the IPAddress storage is not open")
	}
	list, err := s.ips.List(ctx, storage.ListOptions{})
	if err != nil {
		return err
	}
	for _, obj := range list.Items {
		ip := obj.(*networkingv1.IPAddress)
		ref := ip.Spec.ParentRef
		if ip.Labels[networkingv1.LabelManagedBy] != ManagedBy || ref == nil || ref.Group != "" || ref.Resource != "services" {
			continue
		}
		if owner := ref.Namespace + "/" + ref.Name; wantIPs[ip.Name] != owner {
			s.ReleaseIP(ctx, ip.Name, owner)
		}
	}
	for ip, owner := range wantIPs {
		_, err := s.claimIP(ctx, ip, owner)
		var taken ErrAllocated
		switch {
		case errors.As(err, &taken):
			logrus.Warnf("service %s has cluster IP %s, but IPAddress %s names another parent: once that IPAddress is deleted, the IP may be handed out again", owner, ip, ip)
		case err != nil:
			return fmt.Errorf("repair cluster IP %s: %w", ip, err)
		}
	}
	// What an older kelp kept for cluster IPs, now IPAddresses.
	if _, err := s.client.Delete(ctx, legacyIPPrefix, clientv3.WithPrefix()); err != nil {
		return err
	}
	return nil
}
