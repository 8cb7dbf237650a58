package apiserver

import (
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/printers"
)

// table renders obj (an object or a list) as a meta.k8s.io/v1 Table.
// includeObject decides what each row carries: PartialObjectMetadata by
// default, the whole object, or nothing.
func (s *Server) table(r *http.Request, obj runtime.Object, withColumns bool, sv *served) (*metav1.Table, error) {
	var t *metav1.Table
	var err error
	if sv != nil && sv.Table != nil {
		t, err = sv.Table(obj)
	} else {
		t, err = printers.TableFor(obj, time.Now())
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	t.Kind, t.APIVersion = "Table", "meta.k8s.io/v1"
	if !withColumns {
		t.ColumnDefinitions = nil
	}
	include := r.URL.Query().Get("includeObject")
	for i := range t.Rows {
		row := &t.Rows[i]
		item := row.Object.Object
		switch include {
		case "None":
			row.Object = runtime.RawExtension{}
		case "Object":
			row.Object = runtime.RawExtension{Object: item}
		default:
			if item != nil {
				row.Object = runtime.RawExtension{Object: metadataOf(item)}
			}
		}
	}
	return t, nil
}
