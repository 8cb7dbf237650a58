// Package apfconfig is what kube-apiserver does with API Priority and
// Fairness's configuration objects, minus the classification of requests
// (kelp limits requests with the max-in-flight filter): it keeps
// upstream's mandatory and suggested FlowSchemas and
// PriorityLevelConfigurations (k8s.io/apiserver's flowcontrol bootstrap,
// as the apiserver's priority-and-fairness-config-producer), and sets each
// FlowSchema's Dangling condition (as its config consumer). Everything
// goes through the API.
package apfconfig

import (
	"context"
	"fmt"
	"strconv"

	"github.com/sirupsen/logrus"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"

	"github.com/kelp-project/kelp/server/apiserver/defaults"
)

// producerFieldManager is upstream's field manager for the objects it
// maintains.
const producerFieldManager = "api-priority-and-fairness-config-producer-v1"

// object is what both kinds are.
type object interface {
	comparable
	metav1.Object
}

// kind is one configuration kind: its client, the reads (the API at
// start, the informers' listers after), and how its spec compares.
type kind[T object] struct {
	name   string
	get    func(name string) (T, error)
	list   func() ([]T, error)
	create func(ctx context.Context, obj T) error
	update func(ctx context.Context, obj T) error
	delete func(ctx context.Context, name string) error
	// specEqual: current's spec is bootstrap's once defaulted.
	specEqual func(bootstrap, current T) bool
	// withSpec is a copy of into with from's spec.
	withSpec func(into, from T) T
	copy     func(T) T
}

func flowSchemaKind(c flowcontrolclient.FlowSchemaInterface, get func(string) (*flowcontrolv1.FlowSchema, error), list func() ([]*flowcontrolv1.FlowSchema, error)) kind[*flowcontrolv1.FlowSchema] {
	return kind[*flowcontrolv1.FlowSchema]{
		name: "FlowSchema", get: get, list: list,
		create: func(ctx context.Context, fs *flowcontrolv1.FlowSchema) error {
			_, err := c.Create(ctx, fs, metav1.CreateOptions{FieldManager: producerFieldManager})
			return err
		},
		update: func(ctx context.Context, fs *flowcontrolv1.FlowSchema) error {
			_, err := c.Update(ctx, fs, metav1.UpdateOptions{FieldManager: producerFieldManager})
			return err
		},
		delete: func(ctx context.Context, name string) error { return c.Delete(ctx, name, metav1.DeleteOptions{}) },
		specEqual: func(boot, cur *flowcontrolv1.FlowSchema) bool {
			want := boot.DeepCopy()
			defaults.FlowSchema(want)
			return equality.Semantic.DeepEqual(want.Spec, cur.Spec)
		},
		withSpec: func(into, from *flowcontrolv1.FlowSchema) *flowcontrolv1.FlowSchema {
			out := into.DeepCopy()
			out.Spec = *from.Spec.DeepCopy()
			return out
		},
		copy: (*flowcontrolv1.FlowSchema).DeepCopy,
	}
}

func priorityLevelKind(c flowcontrolclient.PriorityLevelConfigurationInterface, get func(string) (*flowcontrolv1.PriorityLevelConfiguration, error), list func() ([]*flowcontrolv1.PriorityLevelConfiguration, error)) kind[*flowcontrolv1.PriorityLevelConfiguration] {
	return kind[*flowcontrolv1.PriorityLevelConfiguration]{
		name: "PriorityLevelConfiguration", get: get, list: list,
		create: func(ctx context.Context, pl *flowcontrolv1.PriorityLevelConfiguration) error {
			_, err := c.Create(ctx, pl, metav1.CreateOptions{FieldManager: producerFieldManager})
			return err
		},
		update: func(ctx context.Context, pl *flowcontrolv1.PriorityLevelConfiguration) error {
			_, err := c.Update(ctx, pl, metav1.UpdateOptions{FieldManager: producerFieldManager})
			return err
		},
		delete: func(ctx context.Context, name string) error { return c.Delete(ctx, name, metav1.DeleteOptions{}) },
		specEqual: func(boot, cur *flowcontrolv1.PriorityLevelConfiguration) bool {
			want := boot.DeepCopy()
			defaults.PriorityLevelConfiguration(want)
			// The exempt level's concurrency settings are the
			// administrator's to change.
			if boot.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
				if cur.Spec.Exempt == nil {
					return false
				}
				want.Spec.Exempt.NominalConcurrencyShares = cur.Spec.Exempt.NominalConcurrencyShares
				want.Spec.Exempt.LendablePercent = cur.Spec.Exempt.LendablePercent
			}
			return equality.Semantic.DeepEqual(want.Spec, cur.Spec)
		},
		withSpec: func(into, from *flowcontrolv1.PriorityLevelConfiguration) *flowcontrolv1.PriorityLevelConfiguration {
			out := into.DeepCopy()
			out.Spec = *from.Spec.DeepCopy()
			return out
		},
		copy: (*flowcontrolv1.PriorityLevelConfiguration).DeepCopy,
	}
}

// Ensure makes the configuration upstream's through client, reading with
// it too; the API server calls it at every start, before the admin
// kubeconfig is written (kube-apiserver's
// priority-and-fairness-config-producer post-start hook).
func Ensure(ctx context.Context, client flowcontrolclient.FlowcontrolV1Interface) error {
	fs, pl := client.FlowSchemas(), client.PriorityLevelConfigurations()
	fsKind := flowSchemaKind(fs,
		func(name string) (*flowcontrolv1.FlowSchema, error) { return fs.Get(ctx, name, metav1.GetOptions{}) },
		func() ([]*flowcontrolv1.FlowSchema, error) {
			l, err := fs.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return pointers(l.Items), nil
		})
	plKind := priorityLevelKind(pl,
		func(name string) (*flowcontrolv1.PriorityLevelConfiguration, error) {
			return pl.Get(ctx, name, metav1.GetOptions{})
		},
		func() ([]*flowcontrolv1.PriorityLevelConfiguration, error) {
			l, err := pl.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return pointers(l.Items), nil
		})
	return ensure(ctx, fsKind, plKind)
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// ensure is upstream's order: the suggested objects, then the mandatory
// ones (which win where both name an object), then the removal of
// auto-updated objects upstream no longer has.
func ensure(ctx context.Context, fs kind[*flowcontrolv1.FlowSchema], pl kind[*flowcontrolv1.PriorityLevelConfiguration]) error {
	if err := ensureAll(ctx, pl, bootstrap.SuggestedPriorityLevelConfigurations, false); err != nil {
		return err
	}
	if err := ensureAll(ctx, fs, bootstrap.SuggestedFlowSchemas, false); err != nil {
		return err
	}
	if err := ensureAll(ctx, pl, bootstrap.MandatoryPriorityLevelConfigurations, true); err != nil {
		return err
	}
	if err := ensureAll(ctx, fs, bootstrap.MandatoryFlowSchemas, true); err != nil {
		return err
	}
	if err := removeUnwanted(ctx, fs, append(bootstrap.MandatoryFlowSchemas, bootstrap.SuggestedFlowSchemas...)); err != nil {
		return err
	}
	return removeUnwanted(ctx, pl, append(bootstrap.MandatoryPriorityLevelConfigurations, bootstrap.SuggestedPriorityLevelConfigurations...))
}

func ensureAll[T object](ctx context.Context, k kind[T], boots []T, mandatory bool) error {
	for _, b := range boots {
		if err := ensureOne(ctx, k, b, mandatory); err != nil {
			return fmt.Errorf("%s %s: %w", k.name, b.GetName(), err)
		}
	}
	return nil
}

// ensureOne creates a missing object (always: a deleted suggested object
// comes back too), and puts bootstrap's spec back into a mandatory one, or
// into a suggested one whose autoupdate-spec annotation says so. The
// annotation is kept stating what was decided.
func ensureOne[T object](ctx context.Context, k kind[T], boot T, mandatory bool) error {
	cur, err := k.get(boot.GetName())
	if apierrors.IsNotFound(err) {
		err = k.create(ctx, k.copy(boot))
		if err == nil {
			logrus.Debugf("apf: created %s %s", k.name, boot.GetName())
		}
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil // a concurrent creator: looked at again on its event
		}
		return err
	}
	if err != nil {
		return err
	}
	revised, ok := revise(k, cur, boot, mandatory)
	if !ok {
		return nil
	}
	err = k.update(ctx, revised)
	if err == nil {
		logrus.Infof("apf: updated %s %s to the %s configuration", k.name, boot.GetName(), map[bool]string{true: "mandatory", false: "suggested"}[mandatory])
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // changed meanwhile: its event brings it back here
	}
	return err
}

// revise is upstream's ensure strategy: whether cur needs writing, and
// what to write.
func revise[T object](k kind[T], cur, boot T, mandatory bool) (T, bool) {
	autoUpdate := mandatory || wantsAutoUpdate(cur)
	annotationStale := true
	if v, ok := cur.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]; ok {
		if b, err := strconv.ParseBool(v); err == nil && b == autoUpdate {
			annotationStale = false
		}
	}
	specStale := autoUpdate && !k.specEqual(boot, cur)
	var zero T
	if !annotationStale && !specStale {
		return zero, false
	}
	revised := k.copy(cur)
	if specStale {
		revised = k.withSpec(cur, boot)
	}
	if annotationStale {
		a := revised.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[flowcontrolv1.AutoUpdateAnnotationKey] = strconv.FormatBool(autoUpdate)
		revised.SetAnnotations(a)
	}
	return revised, true
}

// wantsAutoUpdate reads a suggested object's annotation; without a boolean
// there, an object whose spec nobody changed (generation 1) is kept
// current. (One deleted and created again by an administrator with
// another spec is not told apart, as upstream.)
func wantsAutoUpdate(obj metav1.Object) bool {
	if b, err := strconv.ParseBool(obj.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err == nil {
		return b
	}
	return obj.GetGeneration() == 1
}

// removeUnwanted deletes objects annotated autoupdate-spec=true that
// upstream's configuration does not name (it had them once); objects
// without the annotation, or with false, are the administrator's.
func removeUnwanted[T object](ctx context.Context, k kind[T], boots []T) error {
	wanted := map[string]bool{}
	for _, b := range boots {
		wanted[b.GetName()] = true
	}
	objs, err := k.list()
	if err != nil {
		return err
	}
	for _, o := range objs {
		if wanted[o.GetName()] {
			continue
		}
		if b, err := strconv.ParseBool(o.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err != nil || !b {
			continue
		}
		if err := k.delete(ctx, o.GetName()); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting unwanted %s %s: %w", k.name, o.GetName(), err)
		}
		logrus.Infof("apf: deleted %s %s, no longer in the configuration", k.name, o.GetName())
	}
	return nil
}
