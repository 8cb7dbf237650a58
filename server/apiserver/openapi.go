package apiserver

import (
	"reflect"

	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kelp-project/kelp/server/apiserver/openapi"
	"github.com/kelp-project/kelp/server/apiserver/registry"
)

// openapiResource describes a registry resource for the OpenAPI documents,
// with the subresources this server implements.
func openapiResource(r *registry.Resource) openapi.Resource {
	out := openapi.Resource{
		Group: r.GVR.Group, Version: r.GVR.Version, Kind: r.Kind, Plural: r.GVR.Resource,
		Namespaced: r.Namespaced, Verbs: r.AllVerbs(),
		Type: reflect.TypeOf(r.New()).Elem(), ListType: reflect.TypeOf(r.NewList()).Elem(),
	}
	for _, sub := range subresourcesOf(&served{Resource: r}) {
		os := openapi.Subresource{Name: sub.name, Group: sub.gvk.Group, Version: sub.gvk.Version, Kind: sub.gvk.Kind, Verbs: sub.verbs}
		if sub.gvk.Version != "" || sub.gvk.Kind != r.Kind {
			gv := sub.gvk
			if gv.Version == "" {
				gv.Version = r.GVR.Version
				gv.Group = r.GVR.Group
			}
			if t, ok := scheme.Scheme.AllKnownTypes()[gv]; ok {
				os.Type = t
				os.Group, os.Version = gv.Group, gv.Version
			}
		} else {
			os.Kind = ""
		}
		out.Subresources = append(out.Subresources, os)
	}
	return out
}
