package admission

import (
	"context"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func TestDefaultIngressClass(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ic := func(name string, isDefault bool, age time.Duration) *networkingv1.IngressClass {
		c := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(base.Add(-age))},
			Spec: networkingv1.IngressClassSpec{Controller: "example.com/" + name}}
		if isDefault {
			c.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
		}
		return c
	}
	ingresses := networkingv1.SchemeGroupVersion.WithResource("ingresses")
	for _, tc := range []struct {
		name       string
		classes    []*networkingv1.IngressClass
		asked      *string
		annotation bool
		op         string
		want       *string
	}{
		{name: "no class gets the default", classes: []*networkingv1.IngressClass{ic("nginx", false, 0), ic("traefik", true, time.Hour)}, want: ptr.To("traefik")},
		{name: "several defaults: the newest", classes: []*networkingv1.IngressClass{ic("old", true, time.Hour), ic("new", true, time.Minute)}, want: ptr.To("new")},
		{name: "several of one age: the first name", classes: []*networkingv1.IngressClass{ic("b", true, 0), ic("a", true, 0)}, want: ptr.To("a")},
		{name: "no default", classes: []*networkingv1.IngressClass{ic("nginx", false, 0)}, want: nil},
		{name: "an explicit class stays", classes: []*networkingv1.IngressClass{ic("traefik", true, 0)}, asked: ptr.To("nginx"), want: ptr.To("nginx")},
		{name: "the legacy annotation is a class", classes: []*networkingv1.IngressClass{ic("traefik", true, 0)}, annotation: true, want: nil},
		{name: "updates are left alone", classes: []*networkingv1.IngressClass{ic("traefik", true, 0)}, op: "UPDATE", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := &fakeObjects{items: map[string]runtime.Object{}}
			for _, c := range tc.classes {
				objs.items["/"+c.Name] = c
			}
			ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec: networkingv1.IngressSpec{IngressClassName: tc.asked}}
			if tc.annotation {
				ing.Annotations = map[string]string{"kubernetes.io/ingress.class": "nginx"}
			}
			op := tc.op
			if op == "" {
				op = "CREATE"
			}
			a := &Attributes{Operation: op, Resource: ingresses, Namespace: "default", Name: "web", Object: ing}
			if err := (defaultIngressClass{classes: objs}).Admit(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			if got := ing.Spec.IngressClassName; ptr.Deref(got, "<nil>") != ptr.Deref(tc.want, "<nil>") {
				t.Errorf("ingressClassName = %v, want %v", ptr.Deref(got, "<nil>"), ptr.Deref(tc.want, "<nil>"))
			}
		})
	}
}
