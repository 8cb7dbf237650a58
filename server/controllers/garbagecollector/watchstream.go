package garbagecollector

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// watchSource opens a watch of one resource's metadata.
type watchSource interface {
	Watch(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (eventStream, error)
}

// eventStream is an open watch read synchronously: Decode blocks for the
// next event and returns io.EOF (or another read error) when the stream
// ends, or ends with its context. Close ends it.
type eventStream interface {
	Decode() (watch.EventType, runtime.Object, error)
	Close()
}

// partialObjectMetadataAccept asks for metadata only, protobuf preferred,
// as the metadata client's watch does.
const partialObjectMetadataAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
	"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// maxErrorBody bounds how much of a failed watch's response is read for
// its Status.
const maxErrorBody = 1 << 20

// metadataCodecs are the metadata client's: they know PartialObjectMetadata,
// WatchEvent and Status, in protobuf and JSON.
var metadataCodecs = metainternalversionscheme.Codecs

// httpWatches opens watches as HTTP requests and decodes their streams in
// the reader's goroutine. client-go's Request.Watch would hand the stream
// to a StreamWatcher, which decodes in a goroutine of its own per watch.
type httpWatches struct {
	client *rest.RESTClient
}

// newHTTPWatches builds the watch client from cfg as the metadata client
// is built (metadata.ConfigFor: its user agent and content types), over
// httpClient so that both share connections.
func newHTTPWatches(cfg *rest.Config, httpClient *http.Client) (*httpWatches, error) {
	c := metadata.ConfigFor(cfg)
	// Requests name their whole path (AbsPath); the rest client needs a
	// group version and API path to be built.
	c.GroupVersion = &schema.GroupVersion{}
	c.APIPath = "/"
	rc, err := rest.RESTClientForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, err
	}
	return &httpWatches{client: rc}, nil
}

// resourcePath is the collection path of a resource in all namespaces.
func resourcePath(gvr schema.GroupVersionResource) []string {
	if gvr.Group == "" {
		return []string{"api", gvr.Version, gvr.Resource}
	}
	return []string{"apis", gvr.Group, gvr.Version, gvr.Resource}
}

func (w *httpWatches) Watch(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (eventStream, error) {
	opts.Watch = true
	u := w.client.Get().AbsPath(resourcePath(gvr)...).
		SpecificallyVersionedParams(&opts, metav1.ParameterCodec, metav1.SchemeGroupVersion).URL()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", partialObjectMetadataAccept)
	// Not rate limited, as client-go's watches are not: a watch is one
	// long request.
	resp, err := w.client.Client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, responseError(resp, gvr)
	}
	contentType := resp.Header.Get("Content-Type")
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("watch of %s: content type %q: %w", gvr, contentType, err)
	}
	info, ok := runtime.SerializerInfoForMediaType(metadataCodecs.SupportedMediaTypes(), mediaType)
	if !ok || info.StreamSerializer == nil {
		resp.Body.Close()
		return nil, fmt.Errorf("watch of %s: cannot read a stream of %q", gvr, contentType)
	}
	frames := info.StreamSerializer.Framer.NewFrameReader(resp.Body)
	// The objects in the events are decoded by content (protobuf's
	// envelope or JSON), whatever the stream's framing.
	return restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), metadataCodecs.UniversalDeserializer()), nil
}

// responseError is a failed watch request's error: the Status the server
// sent, or a generic error with the response's code and body.
func responseError(resp *http.Response, gvr schema.GroupVersionResource) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if obj, err := runtime.Decode(metadataCodecs.UniversalDeserializer(), body); err == nil {
		if status, ok := obj.(*metav1.Status); ok && status.Status != metav1.StatusSuccess {
			return &apierrors.StatusError{ErrStatus: *status}
		}
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, "watch", gvr.GroupResource(), "", strings.TrimSpace(string(body)), 0, true)
}

// clientWatches opens watches through a metadata client's Watch, for a
// collector built by New from a metadata.Interface alone (the fake client
// in tests): the client's watch.Interface is read through its channel.
type clientWatches struct {
	client metadata.Interface
}

func (c clientWatches) Watch(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (eventStream, error) {
	w, err := c.client.Resource(gvr).Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &channelStream{ctx: ctx, w: w}, nil
}

// channelStream reads a watch.Interface as an eventStream.
type channelStream struct {
	ctx context.Context
	w   watch.Interface
}

func (s *channelStream) Decode() (watch.EventType, runtime.Object, error) {
	select {
	case <-s.ctx.Done():
		return "", nil, s.ctx.Err()
	case ev, ok := <-s.w.ResultChan():
		if !ok {
			return "", nil, io.EOF
		}
		return ev.Type, ev.Object, nil
	}
}

func (s *channelStream) Close() { s.w.Stop() }
