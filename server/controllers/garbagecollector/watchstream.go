package garbagecollector

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
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
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// watchSource watches one resource's metadata. Watch opens the watch and
// gives each event to each, in the calling goroutine, until the watch
// ends (nil: the server's timeout, the end of the stream), ctx ends, each
// fails (its error), or the stream cannot be read (an *errRelist). The
// server's refusal to open it is its Status error.
type watchSource interface {
	Watch(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions, each eventFunc) error
}

// eventFunc takes one watch event.
type eventFunc func(watch.EventType, runtime.Object) error

// partialObjectMetadataAccept asks for metadata only, in protobuf, which
// the API server always has for it (PartialObjectMetadata is a built-in
// type), so that every stream is length-delimited frames (eventFrames).
const partialObjectMetadataAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// watchStreamType is the media type of a protobuf watch stream.
const watchStreamType = "application/vnd.kubernetes.protobuf"

// maxErrorBody bounds how much of a failed watch's response is read for
// its Status.
const maxErrorBody = 1 << 20

// maxFrame bounds one event's frame: the API server refuses objects of
// more than 3 MiB, and an event carries only the metadata of one.
const maxFrame = 16 << 20

// metadataCodecs are the metadata client's: they know PartialObjectMetadata,
// WatchEvent and Status, in protobuf and JSON.
var metadataCodecs = metainternalversionscheme.Codecs

// streamWatches opens watches as API requests and decodes their streams
// as the bytes arrive, in the monitor's goroutine: client-go's
// Request.Watch would hand the stream to a StreamWatcher, which decodes
// in a goroutine of its own per watch.
//
// A request goes over the client's connections or, when the collector
// runs in the API server's process, to the server's handler (inProcess),
// which then serves the watch in the monitor's goroutine: a watched
// resource costs that one goroutine, where over HTTP/2 the server's
// handler and the client's stream each take one more, with their buffers.
type streamWatches struct {
	client    *rest.RESTClient
	userAgent string
	inProcess http.Handler
}

// newStreamWatches builds the watch client from cfg as the metadata client
// is built (metadata.ConfigFor: its user agent and content types), over
// httpClient so that both share connections. inProcess, if not nil,
// serves the watches instead (see streamWatches).
func newStreamWatches(cfg *rest.Config, httpClient *http.Client, inProcess http.Handler) (*streamWatches, error) {
	c := metadata.ConfigFor(cfg)
	// Requests name their whole path (AbsPath); the rest client needs a
	// group version and API path to be built.
	c.GroupVersion = &schema.GroupVersion{}
	c.APIPath = "/"
	rc, err := rest.RESTClientForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, err
	}
	ua := c.UserAgent
	if ua == "" {
		ua = rest.DefaultKubernetesUserAgent()
	}
	return &streamWatches{client: rc, userAgent: ua, inProcess: inProcess}, nil
}

// resourcePath is the collection path of a resource in all namespaces.
func resourcePath(gvr schema.GroupVersionResource) []string {
	if gvr.Group == "" {
		return []string{"api", gvr.Version, gvr.Resource}
	}
	return []string{"apis", gvr.Group, gvr.Version, gvr.Resource}
}

func (w *streamWatches) Watch(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions, each eventFunc) error {
	opts.Watch = true
	u := w.client.Get().AbsPath(resourcePath(gvr)...).
		SpecificallyVersionedParams(&opts, metav1.ParameterCodec, metav1.SchemeGroupVersion).URL()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", partialObjectMetadataAccept)
	// For the in-process handler; the client's transport sets the same.
	req.Header.Set("User-Agent", w.userAgent)
	frames := &eventFrames{each: each}
	if w.inProcess != nil {
		return serveInProcess(w.inProcess, req, gvr, frames)
	}
	// Not rate limited, as client-go's watches are not: a watch is one
	// long request.
	resp, err := w.client.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return refusal(resp.StatusCode, body, gvr)
	}
	if err := isWatchStream(resp.Header, gvr); err != nil {
		return err
	}
	_, err = io.Copy(frames, resp.Body)
	return frames.end(err)
}

// isWatchStream checks that a response is the protobuf stream asked for.
func isWatchStream(h http.Header, gvr schema.GroupVersionResource) error {
	contentType := h.Get("Content-Type")
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil || mediaType != watchStreamType {
		return fmt.Errorf("watch of %s: the server sent %q, not a protobuf watch stream", gvr, contentType)
	}
	return nil
}

// refusal is the error of a watch the server did not open: the Status it
// sent, or a generic error with the response's code and body.
func refusal(code int, body []byte, gvr schema.GroupVersionResource) error {
	if obj, err := runtime.Decode(metadataCodecs.UniversalDeserializer(), body); err == nil {
		if status, ok := obj.(*metav1.Status); ok && status.Status != metav1.StatusSuccess {
			return &apierrors.StatusError{ErrStatus: *status}
		}
	}
	return apierrors.NewGenericServerResponse(code, "watch", gvr.GroupResource(), "", strings.TrimSpace(string(body)), 0, true)
}

// eventFrames reads a protobuf watch stream written to it, in whatever
// pieces the bytes come: each frame (a 4-byte big-endian length, then a
// WatchEvent whose object keeps its envelope, as the API server writes
// them) is decoded and given to each as soon as it is whole. Once each
// fails or a frame cannot be read, every Write returns that error.
type eventFrames struct {
	each   eventFunc
	buf    []byte // the start of a frame not yet whole
	failed error
}

func (f *eventFrames) Write(p []byte) (int, error) {
	if f.failed != nil {
		return 0, f.failed
	}
	data := p
	if len(f.buf) > 0 {
		f.buf = append(f.buf, p...)
		data = f.buf
	}
	for len(data) >= 4 {
		n := binary.BigEndian.Uint32(data)
		if n > maxFrame {
			f.failed = &errRelist{fmt.Errorf("reading the watch: an event of %d bytes", n)}
			return 0, f.failed
		}
		if len(data) < 4+int(n) {
			break
		}
		typ, obj, err := decodeEvent(data[4 : 4+n])
		data = data[4+n:]
		if err != nil {
			f.failed = &errRelist{fmt.Errorf("reading the watch: %w", err)}
			return 0, f.failed
		}
		if err := f.each(typ, obj); err != nil {
			f.failed = err
			return 0, err
		}
	}
	// What is left is kept in a buffer of its own (p is the caller's);
	// between events, with nothing left, none is held.
	if len(data) == 0 {
		f.buf = nil
	} else {
		f.buf = append([]byte(nil), data...)
	}
	return len(p), nil
}

// end is what the stream's end means, given the read error it ended with:
// each's error, or an unreadable frame's; nil when the stream simply
// ended (a frame cut short by a dropped connection was never given to
// each, so the loop resumes before it); an *errRelist for another read
// error.
func (f *eventFrames) end(err error) error {
	switch {
	case f.failed != nil:
		return f.failed
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), utilnet.IsProbableEOF(err):
		return nil
	}
	return &errRelist{fmt.Errorf("reading the watch: %w", err)}
}

// decodeEvent decodes one frame: the WatchEvent message, then its object
// (a PartialObjectMetadata, or a bookmark's or an error's object) by its
// envelope, as client-go's watch decoder does.
func decodeEvent(frame []byte) (watch.EventType, runtime.Object, error) {
	var ev metav1.WatchEvent
	if err := ev.Unmarshal(frame); err != nil {
		return "", nil, err
	}
	obj, err := runtime.Decode(metadataCodecs.UniversalDeserializer(), ev.Object.Raw)
	if err != nil {
		return "", nil, err
	}
	return watch.EventType(ev.Type), obj, nil
}

// serveInProcess serves req with the API server's handler in the calling
// goroutine; the watch stream it writes goes straight into frames.
func serveInProcess(h http.Handler, req *http.Request, gvr schema.GroupVersionResource, frames *eventFrames) (err error) {
	w := &inProcessResponse{header: http.Header{}, gvr: gvr, frames: frames}
	defer func() {
		// A handler aborts a response it cannot finish (a proxy whose
		// backend went) with this panic, which net/http's server
		// recovers: for the reader, the stream was cut.
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			err = frames.end(io.ErrUnexpectedEOF)
		}
	}()
	h.ServeHTTP(w, req)
	return w.result()
}

// inProcessResponse is the ResponseWriter of an in-process watch: a 200
// with the protobuf stream feeds frames; any other response is kept (up
// to maxErrorBody) to become its error.
type inProcessResponse struct {
	header  http.Header
	gvr     schema.GroupVersionResource
	code    int   // 0 until the header is written
	notOpen error // a 200 that is not a watch stream
	body    bytes.Buffer
	frames  *eventFrames
}

func (w *inProcessResponse) Header() http.Header { return w.header }

func (w *inProcessResponse) WriteHeader(code int) {
	if w.code != 0 || code < 200 {
		return
	}
	w.code = code
	if code == http.StatusOK {
		w.notOpen = isWatchStream(w.header, w.gvr)
	}
}

func (w *inProcessResponse) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	switch {
	case w.code != http.StatusOK:
		if room := maxErrorBody - w.body.Len(); room > 0 {
			w.body.Write(p[:min(len(p), room)])
		}
		return len(p), nil
	case w.notOpen != nil:
		return 0, w.notOpen
	}
	return w.frames.Write(p)
}

// Flush is the watch handler's flush after each event, which has been
// read already.
func (w *inProcessResponse) Flush() {}

func (w *inProcessResponse) result() error {
	switch {
	case w.code != 0 && w.code != http.StatusOK:
		return refusal(w.code, w.body.Bytes(), w.gvr)
	case w.notOpen != nil:
		return w.notOpen
	}
	return w.frames.end(nil)
}

// clientWatches opens watches through a metadata client's Watch, for a
// collector built by New from a metadata.Interface alone (the fake client
// in tests): the client's watch.Interface is read through its channel.
type clientWatches struct {
	client metadata.Interface
}

func (c clientWatches) Watch(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions, each eventFunc) error {
	w, err := c.client.Resource(gvr).Watch(ctx, opts)
	if err != nil {
		return err
	}
	return readChannel(ctx, w, each)
}

// readChannel gives each the events of w until its channel closes, each
// fails or ctx ends, and stops w.
func readChannel(ctx context.Context, w watch.Interface, each eventFunc) error {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			if err := each(ev.Type, ev.Object); err != nil {
				return err
			}
		}
	}
}
