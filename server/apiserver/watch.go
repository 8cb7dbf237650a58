package apiserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kelp-project/kelp/server/apiserver/storage"
)

// defaultWatchTimeout is upstream's --min-request-timeout (1800 s),
// randomised so that reconnecting clients spread out.
const defaultWatchTimeout = 30 * time.Minute

// watch streams events from the watch cache. The stream is chunked JSON
// (one WatchEvent per line) or length-prefixed protobuf frames, flushed
// per event. A resourceVersion that is too old is answered as
// kube-apiserver answers it: 200, then one ERROR event carrying 410.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, info requestInfo, sv *served) {
	o, err := listOptions(r, info, sv)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a := negotiate(r)
	if a.invalid {
		s.writeError(w, r, notAcceptable())
		return
	}
	timeout := time.Duration(float64(defaultWatchTimeout) * (1 + rand.Float64()))
	if v := r.URL.Query().Get("timeoutSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.writeError(w, r, apierrors.NewBadRequest("timeoutSeconds must be a non-negative integer"))
			return
		}
		timeout = time.Duration(n) * time.Second
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.writeError(w, r, apierrors.NewInternalError(errNoFlush))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	wi, werr := sv.store.Watch(ctx, o)
	media := a.media
	if a.as == "Table" {
		media = mediaJSON
	}
	ct := media
	if media == mediaProtobuf {
		ct = mediaProtobuf + ";stream=watch"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	enc := &eventEncoder{w: w, media: media, table: a.as == "Table", s: s, r: r, sv: sv,
		metadataOnly: a.as == "PartialObjectMetadata" || a.as == "PartialObjectMetadataList"}
	if werr != nil {
		_ = enc.write(watch.Event{Type: watch.Error, Object: toStatus(werr)})
		flusher.Flush()
		return
	}
	defer wi.Stop()
	flusher.Flush()
	// A watch of the cache is read in this goroutine (storage.Puller);
	// one a store converts (another version's, a webhook's) through its
	// channel. Events are flushed when no other is ready.
	next, pending := func() (watch.Event, bool) {
		select {
		case <-ctx.Done():
			return watch.Event{}, false
		case ev, ok := <-wi.ResultChan():
			return ev, ok
		}
	}, func() bool { return len(wi.ResultChan()) > 0 }
	if p, ok := wi.(storage.Puller); ok {
		next, pending = func() (watch.Event, bool) { return p.Next(ctx) }, p.Pending
	}
	for {
		ev, ok := next()
		if !ok {
			return
		}
		if err := enc.write(ev); err != nil {
			return
		}
		if !pending() {
			flusher.Flush()
		}
	}
}

type eventEncoder struct {
	w           http.ResponseWriter
	media       string
	table       bool
	sentColumns bool
	// metadataOnly streams PartialObjectMetadata, as metadata informers
	// (the garbage collector's) expect; they cannot decode full objects.
	metadataOnly bool
	s            *Server
	r            *http.Request
	sv           *served
	buf          bytes.Buffer
}

var errNoFlush = errors.New("the response writer cannot stream")

// write encodes one event. Table watches carry one-row Tables, with the
// column definitions in the first event only, as upstream.
func (e *eventEncoder) write(ev watch.Event) error {
	obj := ev.Object
	if e.table && ev.Type != watch.Error && ev.Type != watch.Bookmark {
		t, err := e.s.table(e.r, obj, !e.sentColumns, e.sv)
		if err != nil {
			return err
		}
		e.sentColumns = true
		obj = t
	} else if e.table && ev.Type == watch.Bookmark {
		obj = &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: resourceVersionOf(obj)}}
	}
	if e.metadataOnly && ev.Type != watch.Error {
		obj = metadataOf(obj)
	}
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		obj.GetObjectKind().SetGroupVersionKind(e.sv.GVK())
	}
	e.buf.Reset()
	media := e.media
	if media == mediaProtobuf {
		if _, ok := obj.(interface{ Marshal() ([]byte, error) }); !ok {
			media = mediaJSON
		}
	}
	if err := encode(&e.buf, media, obj); err != nil {
		return err
	}
	if e.media == mediaProtobuf {
		// Frames hold the raw WatchEvent message (no "k8s\x00" envelope),
		// as upstream's protobuf stream serializer writes them; the object
		// inside keeps its envelope.
		we := &metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: e.buf.Bytes()}}
		frame, err := we.Marshal()
		if err != nil {
			return err
		}
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(frame)))
		if _, err := e.w.Write(n[:]); err != nil {
			return err
		}
		_, err = e.w.Write(frame)
		return err
	}
	line, err := json.Marshal(struct {
		Type   watch.EventType `json:"type"`
		Object json.RawMessage `json:"object"`
	}{ev.Type, bytes.TrimSpace(e.buf.Bytes())})
	if err != nil {
		return err
	}
	_, err = e.w.Write(append(line, '\n'))
	return err
}

func resourceVersionOf(obj runtime.Object) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetResourceVersion()
	}
	return ""
}
