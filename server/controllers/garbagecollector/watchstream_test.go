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

// writeJSONEvents writes events as JSON objects one after the other.
func writeJSONEvents(t *testing.T, w io.Writer, events []streamEvent) {
	for _, ev := range events {
		obj, err := json.Marshal(ev.obj)
		if err != nil {
			t.Error(err)
			return
		}
		line, _ := json.Marshal(metav1.WatchEvent{Type: string(ev.typ), Object: apiruntime.RawExtension{Raw: obj}})
		_, _ = w.Write(append(line, '\n'))
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

// The production watch reads a real watch stream, protobuf or JSON, asks
// for metadata from the given resourceVersion with the loop's options,
// and ends with io.EOF when the server ends the stream.
func TestHTTPWatchesDecodeStreams(t *testing.T) {
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
	for _, tc := range []struct {
		contentType string
		write       func(*testing.T, io.Writer, []streamEvent)
	}{
		{"application/vnd.kubernetes.protobuf;stream=watch", writeProtobufEvents},
		{"application/json", writeJSONEvents},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				q := r.URL.Query()
				if r.URL.Path != "/apis/apps/v1/deployments" || q.Get("watch") != "true" || q.Get("resourceVersion") != "5" ||
					q.Get("allowWatchBookmarks") != "true" || q.Get("timeoutSeconds") != "300" {
					t.Errorf("request %s", r.URL)
				}
				if a := r.Header.Get("Accept"); !strings.HasPrefix(a, "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,") {
					t.Errorf("Accept %q", a)
				}
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(http.StatusOK)
				tc.write(t, w, events)
			}))
			defer srv.Close()
			watches, err := newHTTPWatches(&rest.Config{Host: srv.URL}, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			seconds := int64(300)
			s, err := watches.Watch(context.Background(), deployments, metav1.ListOptions{ResourceVersion: "5", AllowWatchBookmarks: true, TimeoutSeconds: &seconds})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i, want := range events {
				typ, obj, err := s.Decode()
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if typ != want.typ {
					t.Fatalf("event %d: type %s, want %s", i, typ, want.typ)
				}
				if typ == watch.Error {
					if st, ok := obj.(*metav1.Status); !ok || !isGone(apierrors.FromObject(st)) {
						t.Fatalf("error event carries %#v, want the 410 Status", obj)
					}
					continue
				}
				m, ok := obj.(*metav1.PartialObjectMetadata)
				w := want.obj.(*metav1.PartialObjectMetadata)
				if !ok || m.Name != w.Name || m.UID != w.UID || m.ResourceVersion != w.ResourceVersion {
					t.Fatalf("event %d: %#v, want %s rv %s", i, obj, w.Name, w.ResourceVersion)
				}
			}
			if _, _, err := s.Decode(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the last event: %v, want io.EOF", err)
			}
		})
	}
}

// A watch the server refuses is its Status error (410 makes the loop
// list again), or a generic error with the response's code.
func TestHTTPWatchesRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "deployments") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusGone)
			st := expired.ErrStatus
			st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
			_ = json.NewEncoder(w).Encode(&st)
			return
		}
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer srv.Close()
	watches, err := newHTTPWatches(&rest.Config{Host: srv.URL}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watches.Watch(context.Background(), deployments, metav1.ListOptions{ResourceVersion: "1"}); !isGone(err) {
		t.Fatalf("watch answered 410: %v, want an Expired error", err)
	}
	_, err = watches.Watch(context.Background(), pods, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no") {
		t.Fatalf("watch answered 403: %v, want Forbidden with the body", err)
	}
}

// The monitors' point: per watched resource the loop over httpWatches
// costs two goroutines fewer than the reflector over the metadata client
// it replaced (whose resync goroutine and StreamWatcher it does without).
// Both run against the same HTTP/2 server, whose per-stream goroutines
// count the same for both.
func TestMonitorGoroutinesPerResource(t *testing.T) {
	const n = 20
	var open atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"1"},"items":[]}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			// The reflector streams its initial list; it is empty.
			_, _ = io.WriteString(w, `{"type":"BOOKMARK","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",`+
				`"metadata":{"resourceVersion":"1","annotations":{"k8s.io/initial-events-end":"true"}}}}`+"\n")
		}
		w.(http.Flusher).Flush()
		open.Add(1)
		defer open.Add(-1)
		<-r.Context().Done()
	}))
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
	loop := perResource("monitor loop", func(ctx context.Context, meta metadata.Interface, httpClient *http.Client, i int) {
		watches, err := newHTTPWatches(cfg, httpClient)
		if err != nil {
			t.Error(err)
			return
		}
		_, run := newMonitor(ctx, meta, watches, g, gvr(i), gvr(i).GroupVersion().WithKind("Thing"))
		run()
	})
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
	t.Logf("goroutines per watched resource (client and server): monitor loop %.2f, reflector %.2f", loop, reflector)
	if reflector-loop < 1.9 {
		t.Fatalf("the monitor loop costs %.2f goroutines per resource, the reflector %.2f: want 2 fewer", loop, reflector)
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
