package apiserver

import (
	"context"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kelp-project/kelp/server/apiserver/apply"
)

// writeOptions are the per-request facts the write path needs beyond the
// object: who manages the fields, and whether this is a server-side apply
// (whose result already carries its managedFields).
type writeOptions struct {
	manager string
	applied bool
}

type writeOptionsKey struct{}

func withWriteOptions(ctx context.Context, o writeOptions) context.Context {
	return context.WithValue(ctx, writeOptionsKey{}, o)
}

func writeOptionsFrom(ctx context.Context) writeOptions {
	o, _ := ctx.Value(writeOptionsKey{}).(writeOptions)
	return o
}

// fieldManagerOf reads fieldManager (defaulting to the client's program
// name, as upstream) and rejects force outside apply.
func fieldManagerOf(r *http.Request, isApply bool) (string, error) {
	q := r.URL.Query()
	m := q.Get("fieldManager")
	if _, ok := q["force"]; ok && !isApply {
		return "", apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "PatchOptions"}, "",
			field.ErrorList{field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch")})
	}
	if m == "" && !isApply {
		m = apply.ManagerName(r.UserAgent())
	}
	if m != "" {
		if errs := metav1validation.ValidateFieldManager(m, field.NewPath("fieldManager")); len(errs) > 0 {
			return "", apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "UpdateOptions"}, "", errs)
		}
	}
	return m, nil
}
