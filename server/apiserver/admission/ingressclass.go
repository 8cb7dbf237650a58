package admission

import (
	"cmp"
	"context"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

var ingressClassesResource = networkingv1.SchemeGroupVersion.WithResource("ingressclasses")

// defaultIngressClass gives an Ingress created without a class the
// default IngressClass, as upstream's DefaultIngressClass plugin: the
// newest of the classes annotated ingressclass.kubernetes.io/
// is-default-class "true" (ties by name), none if there is none. An
// Ingress carrying the legacy kubernetes.io/ingress.class annotation has
// chosen its controller already and is left alone.
type defaultIngressClass struct{ classes ObjectGetter }

func (d defaultIngressClass) Admit(ctx context.Context, a *Attributes) error {
	if a.Operation != "CREATE" || a.Subresource != "" || a.Resource.GroupResource() != networkingv1.Resource("ingresses") {
		return nil
	}
	ing, ok := a.Object.(*networkingv1.Ingress)
	if !ok || ing.Spec.IngressClassName != nil {
		return nil
	}
	if _, ok := ing.Annotations[networkingv1beta1.AnnotationIngressClass]; ok {
		return nil
	}
	objs, err := d.classes.List(ctx, "")
	if err != nil {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, err)
	}
	var defaults []*networkingv1.IngressClass
	for _, o := range objs {
		if c, ok := o.(*networkingv1.IngressClass); ok && c.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true" {
			defaults = append(defaults, c)
		}
	}
	if len(defaults) == 0 {
		return nil
	}
	newest := slices.MinFunc(defaults, func(x, y *networkingv1.IngressClass) int {
		if c := y.CreationTimestamp.Compare(x.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(x.Name, y.Name)
	})
	name := newest.Name
	ing.Spec.IngressClassName = &name
	return nil
}
