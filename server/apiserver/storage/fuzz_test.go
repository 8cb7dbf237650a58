package storage

// Native Go fuzz targets for what clients hand the store: resourceVersions
// and continue tokens. Bad input must come back as a Kubernetes Status
// error (400, 410, or upstream's 504 for a resourceVersion from the future),
// never a panic or a 500. The targets run as unit tests over their seed
// corpus (f.Add and testdata/fuzz/<Target>/, which keeps the inputs of
// bugs fuzzing found); see scripts/fuzz.sh to fuzz.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	rpctypes "go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// requireStatus asserts err is a Status error with an allowed code and
// returns the Status.
func requireStatus(t *testing.T, err error, allowed ...int32) metav1.Status {
	t.Helper()
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		t.Fatalf("error is not an API Status (the client would get a 500): %T: %v", err, err)
	}
	st := se.Status()
	if !slices.Contains(allowed, st.Code) {
		t.Fatalf("status code %d (%s), want one of %v: %s", st.Code, st.Reason, allowed, st.Message)
	}
	want := map[int32]metav1.StatusReason{
		http.StatusBadRequest:     metav1.StatusReasonBadRequest,
		http.StatusGone:           metav1.StatusReasonExpired,
		http.StatusGatewayTimeout: metav1.StatusReasonTimeout,
	}[st.Code]
	if want != "" && st.Reason != want {
		t.Fatalf("status code %d with reason %q, want %q", st.Code, st.Reason, want)
	}
	if st.Message == "" {
		t.Fatalf("status %d without a message", st.Code)
	}
	return st
}

// ---------------------------------------------------------------------------
// FuzzParseRV

func FuzzParseRV(f *testing.F) {
	for _, s := range []string{
		"", "0", "1", "42", "00", "007", "9223372036854775807", "9223372036854775808",
		"18446744073709551616", "-1", " 1", "1 ", "1e3", "0x10", "1_000",
		"abc", "１２", "\x00", "\"1\"", "%31",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRV(s)
		if again, err2 := ParseRV(s); again != v || (err == nil) != (err2 == nil) {
			t.Fatalf("ParseRV(%q) is not deterministic", s)
		}
		// Upstream reads a resourceVersion with strconv.ParseUint(s, 10, 64):
		// ASCII digits only, no sign. kelp stores int64 revisions.
		u, uerr := strconv.ParseUint(s, 10, 64)
		upstreamOK := s == "" || (uerr == nil && u <= math.MaxInt64)
		if err != nil {
			st := requireStatus(t, err, http.StatusBadRequest)
			if !strings.Contains(st.Message, strconv.Quote(s)) {
				t.Fatalf("ParseRV(%q): message does not name the input: %s", s, st.Message)
			}
			if upstreamOK {
				t.Fatalf("ParseRV(%q) rejected a valid resourceVersion: %v", s, err)
			}
			return
		}
		if v < 0 {
			t.Fatalf("ParseRV(%q) = %d", s, v)
		}
		if !upstreamOK {
			t.Fatalf("ParseRV(%q) = %d, but it is not an unsigned decimal integer (upstream's ParseUint answers 400)", s, v)
		}
		if s == "" && v != 0 || s != "" && int64(u) != v {
			t.Fatalf("ParseRV(%q) = %d, want %d", s, v, u)
		}
	})
}

// ---------------------------------------------------------------------------
// FuzzListEtcd: continue tokens, resourceVersions and limits through List's
// paged etcd read, against an in-memory stand-in for etcd's KV API.

const (
	fakeRev       = 100 // the fake etcd's current revision
	fakeCompacted = 20  // revisions below this are compacted
	podsPrefix    = "/registry/pods/"
)

// fakeKV answers Range requests the way etcd does: keys in [key, end) in
// byte order, WithLimit (<= 0 is no limit), More and Count, WithRev with
// ErrCompacted and ErrFutureRev. Every other method is nil and panics.
type fakeKV struct {
	clientv3.KV
	keys []string
	vals map[string][]byte
	mods map[string]int64
	gets int
}

const maxGets = 1000

func (f *fakeKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	f.gets++
	if f.gets > maxGets {
		return nil, errors.New("fakeKV: too many Range requests for one list")
	}
	op := clientv3.OpGet(key, opts...)
	switch rev := op.Rev(); {
	case rev > fakeRev:
		return nil, rpctypes.ErrFutureRev
	case rev > 0 && rev < fakeCompacted:
		return nil, rpctypes.ErrCompacted
	}
	end := string(op.RangeBytes())
	var in []string
	for _, k := range f.keys {
		switch {
		case end == "" && k == key, end == "\x00" && k >= key, end != "" && end != "\x00" && k >= key && k < end:
			in = append(in, k)
		}
	}
	resp := &clientv3.GetResponse{Header: &pb.ResponseHeader{Revision: fakeRev}, Count: int64(len(in))}
	if l := op.Limit(); l > 0 && int64(len(in)) > l {
		in, resp.More = in[:l], true
	}
	for _, k := range in {
		resp.Kvs = append(resp.Kvs, &mvccpb.KeyValue{Key: []byte(k), Value: f.vals[k], ModRevision: f.mods[k], CreateRevision: f.mods[k], Version: 1})
	}
	return resp, nil
}

func podAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	p := obj.(*corev1.Pod)
	return labels.Set(acc.GetLabels()), fields.Set{
		"metadata.name": acc.GetName(), "metadata.namespace": acc.GetNamespace(), "spec.nodeName": p.Spec.NodeName,
	}, nil
}

var fuzzNamespaces = []string{"", "default", "kube-system", "team-a", "empty", "def"}

// newFakeStore is a pod store over fakeKV holding pods in a few namespaces
// (including "default" and "default-2", whose keys share a prefix).
func newFakeStore(t testing.TB) (*Store, *fakeKV) {
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	kv := &fakeKV{vals: map[string][]byte{}, mods: map[string]int64{}}
	c := clientv3.NewCtxClient(context.Background())
	c.KV = kv
	s := &Store{client: c, gr: schema.GroupResource{Resource: "pods"}, prefix: podsPrefix, codec: newCodec(gvk, false, false),
		newFunc: func() runtime.Object { return &corev1.Pod{} }, attrs: podAttrs}
	rev := int64(fakeCompacted + 1)
	add := func(ns, name string, lbl map[string]string, node string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl}, Spec: corev1.PodSpec{NodeName: node}}
		data, err := s.codec.encode(p)
		if err != nil {
			t.Fatal(err)
		}
		k := s.Key(ns, name)
		kv.keys = append(kv.keys, k)
		kv.vals[k], kv.mods[k] = data, rev
		rev += 3
	}
	for i := range 7 {
		add("default", fmt.Sprintf("web-%d", i), map[string]string{"app": "web", "idx": strconv.Itoa(i % 3)}, fmt.Sprintf("node-%d", i%2))
	}
	add("default", "db-0", map[string]string{"app": "db"}, "node-0")
	add("default-2", "web-0", map[string]string{"app": "web"}, "node-1")
	for i := range 3 {
		add("kube-system", fmt.Sprintf("coredns-%d", i), map[string]string{"k8s-app": "kube-dns"}, "node-0")
	}
	add("team-a", "job-x", nil, "")
	kv.keys = append(kv.keys, "/registry/podsx/default/other", "/registry/pod", "/registry/pods") // neighbours outside the prefix
	sort.Strings(kv.keys)
	return s, kv
}

// usesCache mirrors List's routing: those lists are served by the watch
// cache, which this harness does not run.
func usesCache(o ListOptions, rv int64) bool {
	return o.Continue == "" && o.ResourceVersion != "" && o.RVMatch != metav1.ResourceVersionMatchExact &&
		(rv == 0 || o.RVMatch == metav1.ResourceVersionMatchNotOlderThan || o.Limit == 0)
}

func FuzzListEtcd(f *testing.F) {
	type seed struct {
		tok   []byte
		raw   bool
		nsSel uint8
		limit int64
		rv    string
		exact bool
		label string
	}
	tok := func(v string, rv int64, start string) []byte {
		b, _ := json.Marshal(continueToken{APIVersion: v, RV: rv, Start: start})
		return b
	}
	for _, s := range []seed{
		{nil, false, 1, 0, "", false, ""},
		{nil, false, 1, 2, "", false, ""},
		{nil, false, 0, 3, "", false, "app=web"},
		{nil, false, 0, 1, "", false, "idx=1,app"},
		{nil, false, 1, 4, "", false, "app notin (web)"},
		{nil, false, 2, 1, "", false, ""},
		{nil, false, 4, 5, "", false, ""},
		{nil, false, 5, 1, "", false, ""},
		{nil, false, 1, 2, "50", false, ""},
		{nil, false, 1, 0, "50", true, ""},
		{nil, false, 1, 0, "5", true, ""},
		{nil, false, 1, math.MaxInt64, "", false, ""},
		{nil, false, 1, math.MaxInt64, "60", false, ""},
		{tok("meta.k8s.io/v1", 50, "web-2\x00"), false, 1, 2, "", false, ""},
		{tok("meta.k8s.io/v1", 50, "web-2\x00"), false, 1, 0, "", false, ""},
		{tok("meta.k8s.io/v1", 50, "default/web-5\x00"), false, 0, 1, "", false, "app=web"},
		{tok("meta.k8s.io/v1", 50, ""), false, 3, 1, "", false, ""},
		{tok("meta.k8s.io/v1", 50, "\xff"), false, 1, 1, "", false, ""},
		{tok("meta.k8s.io/v1", 50, "../kube-system/"), false, 1, 1, "", false, ""},
		{tok("meta.k8s.io/v1", 50, "/"), false, 1, 1, "", false, ""},
		{tok("meta.k8s.io/v1", 5, "web-0"), false, 1, 1, "", false, ""},
		{tok("meta.k8s.io/v1", 0, "web-0"), false, 1, 1, "", false, ""},
		{tok("meta.k8s.io/v1", -3, "web-0"), false, 1, 1, "", false, ""},
		{tok("meta.k8s.io/v2", 50, "web-0"), false, 1, 1, "", false, ""},
		{tok("meta.k8s.io/v1", 50, "web-0"), false, 1, 1, "0", false, ""},
		{[]byte(`{"v":"meta.k8s.io/v1","rv":50,"start":"web-1\u0000","extra":[1,2]}`), false, 1, 1, "", false, ""},
		{[]byte(`{"v":"meta.k8s.io/v1","rv":5e1,"start":"web-1"}`), false, 1, 1, "", false, ""},
		{[]byte(`{"v":"meta.k8s.io/v1","rv":"50","start":"web-1"}`), false, 1, 1, "", false, ""},
		{[]byte(`{"v":"meta.k8s.io/v1","rv":99999999999999999999,"start":""}`), false, 1, 1, "", false, ""},
		{[]byte(`null`), false, 1, 1, "", false, ""},
		{[]byte(`[]`), false, 1, 1, "", false, ""},
		{[]byte(`eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NTAsInN0YXJ0Ijoid2ViLTFcdTAwMDAifQ`), true, 1, 1, "", false, ""},
		{[]byte(`eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NTAsInN0YXJ0Ijoid2ViLTFcdTAwMDAifQ==`), true, 1, 1, "", false, ""},
		{[]byte(`eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NTAsInN0YXJ0Ijoid2ViLTFcdTAwMDAifQ+/`), true, 1, 1, "", false, ""},
		{[]byte("not base64 at all!"), true, 1, 1, "", false, ""},
	} {
		f.Add(s.tok, s.raw, s.nsSel, s.limit, s.rv, s.exact, s.label)
	}
	f.Fuzz(func(t *testing.T, tokIn []byte, raw bool, nsSel uint8, limit int64, rvIn string, exact bool, labelSel string) {
		s, kv := newFakeStore(t)
		ns := fuzzNamespaces[int(nsSel)%len(fuzzNamespaces)]
		o := ListOptions{Namespace: ns, ResourceVersion: rvIn, Limit: limit & math.MaxInt64, Predicate: Predicate{Attrs: podAttrs}}
		if len(tokIn) > 0 {
			o.Continue = base64.RawURLEncoding.EncodeToString(tokIn)
			if raw {
				o.Continue = string(tokIn)
			}
		}
		if exact {
			o.RVMatch = metav1.ResourceVersionMatchExact
		}
		if labelSel != "" {
			sel, err := labels.Parse(labelSel)
			if err != nil {
				return // listOptions answers 400 before storage sees it
			}
			o.Predicate.Label = sel
		}
		rv, err := ParseRV(o.ResourceVersion)
		if err != nil {
			requireStatus(t, err, http.StatusBadRequest)
			return
		}
		// listOptions rejects these before storage sees them.
		if o.Continue != "" && o.ResourceVersion != "" && o.ResourceVersion != "0" || exact && o.ResourceVersion == "" {
			return
		}
		if usesCache(o, rv) {
			return
		}

		// What the store should do with the token, decoded independently.
		var tk continueToken
		tokOK := true
		if o.Continue != "" {
			b, err := base64.RawURLEncoding.DecodeString(o.Continue)
			// As upstream's DecodeContinue: a revision (or -1, the
			// inconsistent continuation of a 410) and a start key.
			tokOK = err == nil && json.Unmarshal(b, &tk) == nil && tk.APIVersion == "meta.k8s.io/v1" &&
				(tk.RV > 0 || tk.RV == inconsistentContinueRV) && tk.Start != "" && !strings.Contains(tk.Start, "..")
		}

		res, err := s.List(context.Background(), o)
		if kv.gets > maxGets {
			t.Fatalf("list did not terminate: %d Range requests", kv.gets)
		}
		readRev := int64(0) // the revision the list reads at
		switch {
		case o.Continue != "":
			readRev = max(tk.RV, 0) // the inconsistent continuation reads the latest
		case exact || rv > 0 && o.Limit > 0:
			readRev = rv
		}
		if err != nil {
			st := requireStatus(t, err, http.StatusBadRequest, http.StatusGone, http.StatusGatewayTimeout, http.StatusInternalServerError)
			switch {
			case !tokOK:
				if st.Code != http.StatusBadRequest || !strings.HasPrefix(st.Message, "continue key is not valid") {
					t.Fatalf("bad continue token answered %d: %s", st.Code, st.Message)
				}
			case readRev > fakeRev && st.Code == http.StatusInternalServerError:
				t.Fatalf("reading at future revision %d (continue=%q resourceVersion=%q match=%q limit=%d) answers 500 %q; upstream answers 504 Timeout \"Too large resource version\" (as kelp's watch cache does), a crafted continue token is a 400 or 410",
					readRev, o.Continue, o.ResourceVersion, o.RVMatch, o.Limit, st.Message)
			case readRev > fakeRev:
				if st.Code != http.StatusGatewayTimeout && st.Code != http.StatusBadRequest && st.Code != http.StatusGone {
					t.Fatalf("future revision answered %d", st.Code)
				}
			case readRev > 0 && readRev < fakeCompacted:
				if st.Code != http.StatusGone {
					t.Fatalf("compacted revision %d answered %d: %s", readRev, st.Code, st.Message)
				}
			default:
				t.Fatalf("list failed: %d %s", st.Code, st.Message)
			}
			if st.Code == http.StatusInternalServerError {
				t.Fatalf("list answered 500: %s", st.Message)
			}
			return
		}
		if !tokOK {
			t.Fatalf("accepted an invalid continue token %q", o.Continue)
		}
		wantRev := int64(fakeRev)
		if readRev > 0 {
			wantRev = readRev
		}
		if res.ResourceVersion != wantRev {
			t.Fatalf("list at revision %d, want %d", res.ResourceVersion, wantRev)
		}

		scope := s.scope(ns)
		start := scope
		if o.Continue != "" {
			start = scope + tk.Start
		}
		// Everything the store holds from start on, in scope and matching.
		var want []string
		for _, k := range kv.keys {
			if strings.HasPrefix(k, scope) && k >= start && o.Predicate.Matches(mustDecode(t, s, kv, k)) {
				want = append(want, k)
			}
		}

		// Follow the continue tokens to the end: pages are in key order,
		// never overlap, and together are exactly want.
		var got []string
		for page := 0; ; page++ {
			if page > 50 {
				t.Fatal("pagination does not end")
			}
			if o.Limit > 0 && int64(len(res.Items)) > o.Limit {
				t.Fatalf("page of %d items over limit %d", len(res.Items), o.Limit)
			}
			for _, item := range res.Items {
				acc, _ := meta.Accessor(item)
				k := s.Key(acc.GetNamespace(), acc.GetName())
				if ns != "" && acc.GetNamespace() != ns {
					t.Fatalf("list in namespace %q returned %s", ns, k)
				}
				if len(got) > 0 && k <= got[len(got)-1] {
					t.Fatalf("item %s after %s: not in key order or repeated", k, got[len(got)-1])
				}
				if acc.GetResourceVersion() != strconv.FormatInt(kv.mods[k], 10) {
					t.Fatalf("%s has resourceVersion %s, want its mod revision %d", k, acc.GetResourceVersion(), kv.mods[k])
				}
				if !o.Predicate.Matches(item) {
					t.Fatalf("%s does not match the selector", k)
				}
				got = append(got, k)
			}
			if res.RemainingItemCount != nil {
				if !o.Predicate.Empty() {
					t.Fatal("remainingItemCount with a selector")
				}
				rest := 0
				for _, k := range want {
					if len(got) > 0 && k > got[len(got)-1] {
						rest++
					}
				}
				if *res.RemainingItemCount != int64(rest) {
					t.Fatalf("remainingItemCount %d, %d items remain", *res.RemainingItemCount, rest)
				}
			}
			if res.Continue == "" {
				break
			}
			if o.Limit == 0 {
				t.Fatal("continue token on an unlimited list")
			}
			b, err := base64.RawURLEncoding.DecodeString(res.Continue)
			var next continueToken
			if err != nil || json.Unmarshal(b, &next) != nil {
				t.Fatalf("store issued an undecodable continue token %q", res.Continue)
			}
			if next.RV != res.ResourceVersion || next.APIVersion != "meta.k8s.io/v1" {
				t.Fatalf("continue token %+v for a list at %d", next, res.ResourceVersion)
			}
			if len(got) > 0 && scope+next.Start <= got[len(got)-1] {
				t.Fatalf("continue token starts at %q, before the last item %s", next.Start, got[len(got)-1])
			}
			kv.gets = 0
			res, err = s.List(context.Background(), ListOptions{Namespace: ns, Limit: o.Limit, Continue: res.Continue, Predicate: o.Predicate})
			if err != nil {
				t.Fatalf("following the store's own continue token: %v", err)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pages returned %q, want %q", got, want)
		}
	})
}

func mustDecode(t *testing.T, s *Store, kv *fakeKV, k string) runtime.Object {
	t.Helper()
	obj, err := s.codec.decode(kv.vals[k], s.newFunc(), kv.mods[k])
	if err != nil {
		t.Fatal(err)
	}
	return obj
}
