package apiserver

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

const (
	mediaJSON     = "application/json"
	mediaYAML     = "application/yaml"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
	// MaxBodyBytes is upstream's request body limit.
	MaxBodyBytes = 3 * 1024 * 1024
)

// serializers are built once: they are safe for concurrent use.
var (
	jsonSerializer   = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})
	strictJSON       = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{Strict: true})
	yamlSerializer   = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{Yaml: true})
	strictYAML       = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{Yaml: true, Strict: true})
	protoSerializer  = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	supportedDecodes = "application/json, application/yaml, application/vnd.kubernetes.protobuf"
)

// readBody reads a request body, enforcing the 3 MiB limit with a 413.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength > MaxBodyBytes {
		return nil, tooLarge()
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest("reading request body: " + err.Error())
	}
	if len(data) > MaxBodyBytes {
		return nil, tooLarge()
	}
	return data, nil
}

func tooLarge() error {
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", MaxBodyBytes))
}

// mediaType is the request body's media type; a body without a
// Content-Type is JSON, the first of the media types kelp decodes, as
// upstream's NegotiateInputSerializer takes its first. (A patch without
// one is still refused: JSON is no patch type.)
func mediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if strings.TrimSpace(ct) == "" {
		return mediaJSON
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(ct))
	}
	return mt
}

// fieldValidation is the request's fieldValidation directive; Warn is the
// default, as upstream.
func fieldValidation(r *http.Request) (string, error) {
	switch v := r.URL.Query().Get("fieldValidation"); v {
	case "", "Warn":
		return "Warn", nil
	case "Strict", "Ignore":
		return v, nil
	default:
		return "", apierrors.NewBadRequest(fmt.Sprintf("fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got %q", v))
	}
}

// decodeBody reads the request body and decodes it into into.
func decodeBody(w http.ResponseWriter, r *http.Request, gvk schema.GroupVersionKind, into runtime.Object) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeInto(w, r, data, mediaType(r), gvk, into)
}

// decodeInto decodes a body of the given media type into into. Unknown and
// duplicate fields are rejected under Strict, reported as warnings under
// Warn and dropped under Ignore. The body's kind must be the endpoint's.
func decodeInto(w http.ResponseWriter, r *http.Request, data []byte, mt string, gvk schema.GroupVersionKind, into runtime.Object) error {
	validation, err := fieldValidation(r)
	if err != nil {
		return err
	}
	strict, err := decodeStrictly(data, mt, gvk, into)
	if err != nil {
		return err
	}
	return weighStrict(w, validation, strict, badRequest)
}

func badRequest(msg string) error { return apierrors.NewBadRequest(msg) }

// weighStrict applies fieldValidation to what a strict reading found:
// Strict refuses it, as one strict decoding error, with refuse's answer (a
// request body's 400, a patch's 422), Warn names each finding in a
// Warning, Ignore drops them.
func weighStrict(w http.ResponseWriter, validation string, strict []error, refuse func(detail string) error) error {
	if len(strict) == 0 {
		return nil
	}
	switch validation {
	case "Strict":
		return refuse(runtime.NewStrictDecodingError(strict).Error())
	case "Warn":
		for _, e := range strict {
			addWarning(w, e.Error())
		}
	}
	return nil
}

// decodeStrictly decodes a body of the given media type into into, and
// returns apart what a strict reading finds (unknown and duplicate
// fields), for the caller to weigh under the request's fieldValidation:
// a request body and a patched object answer them differently. Any other
// failure is a 400; so is a body of another kind than the endpoint's.
func decodeStrictly(data []byte, mt string, gvk schema.GroupVersionKind, into runtime.Object) ([]error, error) {
	var dec runtime.Decoder
	switch mt {
	case mediaJSON:
		dec = strictJSON
	case mediaYAML, "application/x-yaml", "text/yaml":
		dec = strictYAML
	case mediaProtobuf:
		// Custom objects have no protobuf form: upstream's CRD handler
		// refuses protobuf bodies too.
		if _, ok := into.(*unstructured.Unstructured); ok {
			return nil, unsupportedMediaType(mt)
		}
		dec = protoSerializer
	default:
		return nil, unsupportedMediaType(mt)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, apierrors.NewBadRequest("the request body is empty")
	}
	obj, got, err := dec.Decode(data, &gvk, into)
	var strict []error
	if se, ok := runtime.AsStrictDecodingError(err); ok && obj != nil {
		strict, err = se.Errors(), nil
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(decodeMessage(err))
	}
	if got != nil && (got.Kind != gvk.Kind || got.GroupVersion() != gvk.GroupVersion()) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %s", gvk.Kind, got.Kind))
	}
	if obj != into {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s)", gvk.Kind))
	}
	return strict, nil
}

func decodeMessage(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "Object 'Kind' is missing") {
		return "Object 'Kind' is missing in '" + shorten(msg) + "'"
	}
	return msg
}

func shorten(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

func unsupportedMediaType(mt string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format (%q) - accepted media types include: %s", mt, supportedDecodes),
	}}
}

// addWarning adds a Warning header the way upstream formats it.
func addWarning(w http.ResponseWriter, msg string) {
	// One of each text, as upstream's recorder keeps: a patch is applied
	// again on every retry of a conflicting write.
	v := fmt.Sprintf("299 - %q", msg)
	if !slices.Contains(w.Header().Values("Warning"), v) {
		w.Header().Add("Warning", v)
	}
}

// accept is the negotiated response format.
type accept struct {
	media   string // mediaJSON, mediaYAML or mediaProtobuf
	as      string // "", "Table", "PartialObjectMetadata", "PartialObjectMetadataList"
	pretty  bool
	invalid bool
}

// negotiate reads the Accept header, honouring the first acceptable entry.
func negotiate(r *http.Request) accept {
	h := r.Header.Get("Accept")
	if h == "" {
		return accept{media: mediaJSON}
	}
	for _, part := range strings.Split(h, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		a := accept{}
		switch mt {
		case mediaJSON, "*/*", "application/*":
			a.media = mediaJSON
		case mediaYAML:
			a.media = mediaYAML
		case mediaProtobuf:
			a.media = mediaProtobuf
		default:
			continue
		}
		if as := params["as"]; as != "" {
			if params["g"] != "meta.k8s.io" || (params["v"] != "v1" && params["v"] != "v1beta1") {
				continue
			}
			switch as {
			case "Table", "PartialObjectMetadata", "PartialObjectMetadataList":
				a.as = as
			default:
				continue
			}
			if as == "Table" && a.media == mediaProtobuf {
				// Tables are served as JSON only; the client lists JSON too.
				continue
			}
		}
		return a
	}
	return accept{media: mediaJSON, invalid: true}
}

// encode writes obj in the accepted media type. obj must carry its kind.
func encode(wr io.Writer, media string, obj runtime.Object) error {
	switch media {
	case mediaProtobuf:
		if _, ok := obj.(interface{ Marshal() ([]byte, error) }); ok {
			return protoSerializer.Encode(obj, wr)
		}
		return jsonSerializer.Encode(obj, wr)
	case mediaYAML:
		return yamlSerializer.Encode(obj, wr)
	default:
		return jsonSerializer.Encode(obj, wr)
	}
}

// writeObject writes obj with status code. Protobuf is only used for types
// that support it (Tables and Status fall back to JSON, as upstream).
func (s *Server) writeObject(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object) {
	a := negotiate(r)
	media := a.media
	if media == mediaProtobuf {
		if _, ok := obj.(interface{ Marshal() ([]byte, error) }); !ok {
			media = mediaJSON
		}
	}
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		if gvks, _, err := scheme.Scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
			obj.GetObjectKind().SetGroupVersionKind(gvks[0])
		}
	}
	var buf bytes.Buffer
	if err := encode(&buf, media, obj); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", media)
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// unknownCustomFields applies the request's fieldValidation to the fields
// a custom object's schema does not declare (weighStrict).
func unknownCustomFields(w http.ResponseWriter, r *http.Request, sv *served, obj runtime.Object) error {
	unknown := pruneCustom(sv, obj)
	if len(unknown) == 0 {
		return nil
	}
	validation, err := fieldValidation(r)
	if err != nil {
		return err
	}
	return weighStrict(w, validation, unknown, badRequest)
}

// pruneCustom drops the fields a custom object's schema does not declare,
// whatever the request's fieldValidation says, and names each as a strict
// reading does. Built-in kinds have this done by their Go types while
// decoding.
func pruneCustom(sv *served, obj runtime.Object) []error {
	if sv.Custom == nil || sv.Custom.Prune == nil {
		return nil
	}
	var unknown []error
	for _, p := range sv.Custom.Prune(obj) {
		unknown = append(unknown, fmt.Errorf("unknown field %q", p))
	}
	return unknown
}
