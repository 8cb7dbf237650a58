package garbagecollector

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// streamEvent is an event a test server writes.
type streamEvent struct {
	typ watch.EventType
	obj apiruntime.Object
}

func metadataEvent(typ watch.EventType, name, rv string) streamEvent {
	return streamEvent{typ, &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: rv},
	}}
}

// writeProtobufEvents writes events as kelp's API server does: each a
// 4-byte big-endian length and a WatchEvent message whose object is the
// object's protobuf with its "k8s\x00" envelope.
func writeProtobufEvents(t *testing.T, w io.Writer, events []streamEvent) {
	enc := protobuf.NewSerializer(metadataScheme(t), metadataScheme(t))
	for _, ev := range events {
		var obj bytes.Buffer
		if err := enc.Encode(ev.obj, &obj); err != nil {
			t.Error(err)
			return
		}
		frame, err := (&metav1.WatchEvent{Type: string(ev.typ), Object: apiruntime.RawExtension{Raw: obj.Bytes()}}).Marshal()
		if err != nil {
			t.Error(err)
			return
		}
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(frame)))
		_, _ = w.Write(n[:])
		_, _ = w.Write(frame)
	}
}

func metadataScheme(t *testing.T) *apiruntime.Scheme {
	s := apiruntime.NewScheme()
	if err := metav1.AddMetaToScheme(s); err != nil {
		t.Fatal(err)
	}
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	return s
}

// watchServer is the API server's watch as the tests serve it: it checks
// the request and writes events, then ends the stream.
func watchServer(t *testing.T, events []streamEvent) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/apis/apps/v1/deployments" || q.Get("watch") != "true" || q.Get("resourceVersion") != "5" ||
			q.Get("allowWatchBookmarks") != "true" || q.Get("timeoutSeconds") != "300" {
			t.Errorf("request %s", r.URL)
		}
		if a := r.Header.Get("Accept"); a != partialObjectMetadataAccept {
			t.Errorf("Accept %q", a)
		}
		if ua := r.Header.Get("User-Agent"); ua == "" {
			t.Error("no User-Agent")
		}
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
		w.WriteHeader(http.StatusOK)
		writeProtobufEvents(t, w, events)
	})
}

// watchesBoth runs f with the watches over HTTP from h and in process to
// h: the two ways streamWatches sends a watch.
func watchesBoth(t *testing.T, h http.Handler, f func(t *testing.T, w *streamWatches)) {
	t.Run("http", func(t *testing.T) {
		srv := httptest.NewServer(h)
		defer srv.Close()
		w, err := newStreamWatches(&rest.Config{Host: srv.URL}, srv.Client(), nil)
		if err != nil {
			t.Fatal(err)
		}
		f(t, w)
	})
	t.Run("in process", func(t *testing.T) {
		w, err := newStreamWatches(&rest.Config{Host: "https://in-process.invalid"}, http.DefaultClient, h)
		if err != nil {
			t.Fatal(err)
		}
		f(t, w)
	})
}

// The production watch reads a real protobuf watch stream, asks for
// metadata from the given resourceVersion with the loop's options, gives
// each event as it comes and ends (nil) when the server ends the stream.
func TestStreamWatchesDecodeStreams(t *testing.T) {
	status := expired.ErrStatus
	status.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
	events := []streamEvent{
		metadataEvent(watch.Added, "a", "6"),
		{watch.Bookmark, &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
			ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"},
		}},
		metadataEvent(watch.Modified, "a", "8"),
		metadataEvent(watch.Deleted, "a", "9"),
		{watch.Error, &status},
	}
	watchesBoth(t, watchServer(t, events), func(t *testing.T, watches *streamWatches) {
		seconds := int64(300)
		i := 0
		err := watches.Watch(context.Background(), deployments, metav1.ListOptions{ResourceVersion: "5", AllowWatchBookmarks: true, TimeoutSeconds: &seconds},
			func(typ watch.EventType, obj apiruntime.Object) error {
				defer func() { i++ }()
				if i >= len(events) {
					t.Fatalf("event %d: %s, more than were sent", i, typ)
				}
				want := events[i]
				if typ != want.typ {
					t.Fatalf("event %d: type %s, want %s", i, typ, want.typ)
				}
				if typ == watch.Error {
					if st, ok := obj.(*metav1.Status); !ok || !isGone(apierrors.FromObject(st)) {
						t.Fatalf("error event carries %#v, want the 410 Status", obj)
					}
					return nil
				}
				m, ok := obj.(*metav1.PartialObjectMetadata)
				w := want.obj.(*metav1.PartialObjectMetadata)
				if !ok || m.Name != w.Name || m.UID != w.UID || m.ResourceVersion != w.ResourceVersion {
					t.Fatalf("event %d: %#v, want %s rv %s", i, obj, w.Name, w.ResourceVersion)
				}
				return nil
			})
		if err != nil {
			t.Fatalf("the stream's end: %v, want nil", err)
		}
		if i != len(events) {
			t.Fatalf("%d events, want %d", i, len(events))
		}
	})
}

// Frames are whole however the bytes are cut; what each returns stops the
// stream and is its error; a frame too big or unreadable is an errRelist;
// a stream cut inside a frame simply ended.
func TestEventFrames(t *testing.T) {
	var stream bytes.Buffer
	writeProtobufEvents(t, &stream, []streamEvent{
		metadataEvent(watch.Added, "a", "1"), metadataEvent(watch.Modified, "a", "2"), metadataEvent(watch.Deleted, "a", "3"),
	})
	all := stream.Bytes()
	for _, piece := range []int{1, 3, 4, 5, 17, len(all)} {
		var rvs []string
		f := &eventFrames{each: func(_ watch.EventType, obj apiruntime.Object) error {
			rvs = append(rvs, obj.(*metav1.PartialObjectMetadata).ResourceVersion)
			return nil
		}}
		for b := all; len(b) > 0; b = b[min(piece, len(b)):] {
			if n, err := f.Write(b[:min(piece, len(b))]); err != nil || n != min(piece, len(b)) {
				t.Fatalf("pieces of %d: Write = %d, %v", piece, n, err)
			}
		}
		if strings.Join(rvs, ",") != "1,2,3" || f.end(nil) != nil || f.buf != nil {
			t.Fatalf("pieces of %d: events at %v, end %v, %d bytes held", piece, rvs, f.end(nil), len(f.buf))
		}
	}

	stop := errors.New("stop")
	seen := 0
	f := &eventFrames{each: func(watch.EventType, apiruntime.Object) error { seen++; return stop }}
	if _, err := f.Write(all); err != stop || f.end(nil) != stop || seen != 1 {
		t.Fatalf("each failing: Write %v, end %v after %d events; want its error after one", err, f.end(nil), seen)
	}
	if _, err := f.Write(all); err != stop || seen != 1 {
		t.Fatalf("a Write after each failed: %v, %d events", err, seen)
	}

	var relist *errRelist
	for name, b := range map[string][]byte{
		"too big":    {0xff, 0, 0, 0},
		"unreadable": {0, 0, 0, 2, 0xff, 0xff},
	} {
		f := &eventFrames{each: func(watch.EventType, apiruntime.Object) error { t.Fatal("an event from garbage"); return nil }}
		if _, err := f.Write(b); !errors.As(err, &relist) || !errors.As(f.end(nil), &relist) {
			t.Fatalf("%s: %v, want an errRelist", name, err)
		}
	}

	f = &eventFrames{each: func(watch.EventType, apiruntime.Object) error { t.Fatal("an event from a cut frame"); return nil }}
	if _, err := f.Write(all[:10]); err != nil || f.end(io.ErrUnexpectedEOF) != nil {
		t.Fatalf("a stream cut inside a frame: %v, end %v", err, f.end(io.ErrUnexpectedEOF))
	}
	if err := f.end(errors.New("tls: bad record MAC")); !errors.As(err, &relist) {
		t.Fatalf("another read error: %v, want an errRelist", err)
	}
}

// A watch the server refuses is its Status error (410 makes the loop
// list again), or a generic error with the response's code; a 200 that
// is no protobuf stream is an error too.
func TestStreamWatchesRefused(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "deployments"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusGone)
			st := expired.ErrStatus
			st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
			_ = json.NewEncoder(w).Encode(&st)
		case strings.Contains(r.URL.Path, "pods"):
			http.Error(w, "no", http.StatusForbidden)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"type":"ADDED"}`)
		}
	})
	watchesBoth(t, h, func(t *testing.T, watches *streamWatches) {
		none := func(watch.EventType, apiruntime.Object) error { t.Fatal("an event from a refused watch"); return nil }
		if err := watches.Watch(context.Background(), deployments, metav1.ListOptions{ResourceVersion: "1"}, none); !isGone(err) {
			t.Fatalf("watch answered 410: %v, want an Expired error", err)
		}
		err := watches.Watch(context.Background(), pods, metav1.ListOptions{}, none)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no") {
			t.Fatalf("watch answered 403: %v, want Forbidden with the body", err)
		}
		err = watches.Watch(context.Background(), schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, metav1.ListOptions{}, none)
		if err == nil || !strings.Contains(err.Error(), "not a protobuf watch stream") {
			t.Fatalf("a JSON answer: %v, want an error naming it", err)
		}
	})
}

// In process, a handler's abort (http.ErrAbortHandler, as a proxy aborts)
// ends the stream as a cut connection would; another panic is not hidden.
func TestInProcessAbort(t *testing.T) {
	aborting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
		writeProtobufEvents(t, w, []streamEvent{metadataEvent(watch.Added, "a", "1")})
		panic(http.ErrAbortHandler)
	})
	w, err := newStreamWatches(&rest.Config{Host: "https://in-process.invalid"}, http.DefaultClient, aborting)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := w.Watch(context.Background(), deployments, metav1.ListOptions{}, func(watch.EventType, apiruntime.Object) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("an aborted watch: %v after %d events, want nil after 1", err, n)
	}
	w.inProcess = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("a bug") })
	defer func() {
		if p := recover(); p != "a bug" {
			t.Fatalf("recovered %v, want the handler's panic", p)
		}
	}()
	_ = w.Watch(context.Background(), deployments, metav1.ListOptions{}, func(watch.EventType, apiruntime.Object) error { return nil })
	t.Fatal("the handler's panic was swallowed")
}

// The monitors' point: per watched resource the loop over streamWatches
// costs two goroutines fewer than the reflector over the metadata client
// it replaced (whose resync goroutine and StreamWatcher it does without),
// both against the same HTTP/2 server, whose per-stream goroutines count
// the same for both. In process, the server's handler runs in the loop's
// goroutine: one goroutine per resource, client and server together.
func TestMonitorGoroutinesPerResource(t *testing.T) {
	const n = 20
	var open atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"1"},"items":[]}`)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
		w.WriteHeader(http.StatusOK)
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			// The reflector streams its initial list; it is empty.
			writeProtobufEvents(t, w, []streamEvent{{watch.Bookmark, &metav1.PartialObjectMetadata{
				TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
				ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1",
					Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}},
			}}})
		}
		w.(http.Flusher).Flush()
		open.Add(1)
		defer open.Add(-1)
		<-r.Context().Done()
	})
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}}
	gvr := func(i int) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "r" + string(rune('a'+i))}
	}

	// perResource starts n watchers and returns the goroutines they add,
	// per watcher, once all n watches are open.
	perResource := func(name string, start func(ctx context.Context, meta metadata.Interface, httpClient *http.Client, i int)) float64 {
		httpClient, err := rest.HTTPClientFor(metadata.ConfigFor(cfg))
		if err != nil {
			t.Fatal(err)
		}
		meta, err := metadata.NewForConfigAndClient(cfg, httpClient)
		if err != nil {
			t.Fatal(err)
		}
		// The connection is up before counting.
		if _, err := meta.Resource(gvr(0)).List(context.Background(), metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		base := stableGoroutines(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, n)
		for i := range n {
			go func() { start(ctx, meta, httpClient, i); done <- struct{}{} }()
		}
		eventually(t, name+": all watches open", func() bool { return open.Load() == n })
		got := float64(stableGoroutines(t)-base) / n
		cancel()
		for range n {
			<-done
		}
		eventually(t, name+": all watches closed", func() bool { return open.Load() == 0 })
		httpClient.CloseIdleConnections()
		return got
	}

	g := newGraph(func(types.UID) {}, func(types.UID) {})
	monitorOver := func(inProcess http.Handler) func(context.Context, metadata.Interface, *http.Client, int) {
		return func(ctx context.Context, meta metadata.Interface, httpClient *http.Client, i int) {
			watches, err := newStreamWatches(cfg, httpClient, inProcess)
			if err != nil {
				t.Error(err)
				return
			}
			_, run := newMonitor(ctx, meta, watches, g, gvr(i), gvr(i).GroupVersion().WithKind("Thing"))
			run()
		}
	}
	loop := perResource("monitor loop", monitorOver(nil))
	inProcess := perResource("monitor loop in process", monitorOver(h))
	reflector := perResource("reflector", func(ctx context.Context, meta metadata.Interface, _ *http.Client, i int) {
		res := meta.Resource(gvr(i))
		lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (apiruntime.Object, error) {
				return res.List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return res.Watch(ctx, opts)
			},
		}, meta)
		cache.NewReflectorWithOptions(lw, &metav1.PartialObjectMetadata{}, cache.NewStore(cache.MetaNamespaceKeyFunc),
			cache.ReflectorOptions{}).RunWithContext(ctx)
	})
	t.Logf("goroutines per watched resource (client and server): monitor loop %.2f, in process %.2f, reflector %.2f", loop, inProcess, reflector)
	if reflector-loop < 1.9 {
		t.Fatalf("the monitor loop costs %.2f goroutines per resource, the reflector %.2f: want 2 fewer", loop, reflector)
	}
	if inProcess > 1.05 {
		t.Fatalf("the monitor loop in process costs %.2f goroutines per resource, want 1", inProcess)
	}
}

// stableGoroutines is the goroutine count once it has stopped changing.
func stableGoroutines(t *testing.T) int {
	t.Helper()
	last, same := -1, 0
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		n := runtime.NumGoroutine()
		if n == last {
			same++
		} else {
			last, same = n, 0
		}
		return same >= 10, nil
	})
	if err != nil {
		t.Fatalf("the goroutine count did not settle (last %d)", last)
	}
	return last
}
