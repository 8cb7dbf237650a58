package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const testIssuer = "https://kubernetes.default.svc.cluster.local"

var (
	keyOnce sync.Once
	testKey *rsa.PrivateKey
)

// sharedKey is one RSA key for all tests: generating one takes a while.
func sharedKey(t testing.TB) *rsa.PrivateKey {
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		testKey = k
	})
	return testKey
}

// fakeTokenObjects is ServiceAccountObjects over maps keyed ns/name.
type fakeTokenObjects struct {
	accounts map[string]*corev1.ServiceAccount
	pods     map[string]*corev1.Pod
	secrets  map[string]*corev1.Secret
	nodes    map[string]*corev1.Node
}

func lookup[T any](m map[string]T, resource, key string) (T, error) {
	if v, ok := m[key]; ok {
		return v, nil
	}
	var zero T
	return zero, apierrors.NewNotFound(schema.GroupResource{Resource: resource}, key)
}

func (f *fakeTokenObjects) ServiceAccount(ns, name string) (*corev1.ServiceAccount, error) {
	return lookup(f.accounts, "serviceaccounts", ns+"/"+name)
}
func (f *fakeTokenObjects) Pod(ns, name string) (*corev1.Pod, error) {
	return lookup(f.pods, "pods", ns+"/"+name)
}
func (f *fakeTokenObjects) Secret(ns, name string) (*corev1.Secret, error) {
	return lookup(f.secrets, "secrets", ns+"/"+name)
}
func (f *fakeTokenObjects) Node(name string) (*corev1.Node, error) {
	return lookup(f.nodes, "nodes", name)
}

type tokenFixture struct {
	signer *TokenSigner
	auth   *ServiceAccountAuthenticator
	objs   *fakeTokenObjects
	sa     *corev1.ServiceAccount
	pod    *corev1.Pod
	secret *corev1.Secret
	node   *corev1.Node
}

func newTokenFixture(t testing.TB) *tokenFixture {
	signer, err := NewTokenSigner(testIssuer, sharedKey(t))
	if err != nil {
		t.Fatal(err)
	}
	f := &tokenFixture{signer: signer,
		sa:     &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "sa-uid"}},
		pod:    &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "pod-uid"}, Spec: corev1.PodSpec{NodeName: "n1"}},
		secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app-token", UID: "secret-uid"}},
		node:   &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}},
	}
	f.objs = &fakeTokenObjects{
		accounts: map[string]*corev1.ServiceAccount{"ns/app": f.sa},
		pods:     map[string]*corev1.Pod{"ns/web": f.pod},
		secrets:  map[string]*corev1.Secret{"ns/app-token": f.secret},
		nodes:    map[string]*corev1.Node{"n1": f.node},
	}
	f.auth = &ServiceAccountAuthenticator{Signer: signer, Audiences: []string{testIssuer}, Objects: f.objs}
	return f
}

func (f *tokenFixture) mint(t testing.TB, b TokenBinding, auds []string, exp time.Duration) string {
	t.Helper()
	if b.ServiceAccount == nil {
		b.ServiceAccount = f.sa
	}
	tok, _, err := f.signer.BoundToken(b, auds, exp, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestServiceAccountTokenAuthentication(t *testing.T) {
	f := newTokenFixture(t)
	api := []string{testIssuer}
	now := time.Now()
	podToken := f.mint(t, TokenBinding{Pod: f.pod, Node: f.node}, api, time.Hour)

	u, ok, err := f.auth.AuthenticateToken(podToken, now)
	if !ok || err != nil {
		t.Fatalf("pod token: ok=%v err=%v", ok, err)
	}
	if u.Name != "system:serviceaccount:ns:app" || u.UID != "sa-uid" ||
		!slices.Equal(u.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"}) {
		t.Errorf("user %+v", u)
	}
	for k, want := range map[string]string{"authentication.kubernetes.io/pod-name": "web", "authentication.kubernetes.io/pod-uid": "pod-uid",
		"authentication.kubernetes.io/node-name": "n1", "authentication.kubernetes.io/node-uid": "node-uid"} {
		if got := u.Extra[k]; !slices.Equal(got, []string{want}) {
			t.Errorf("extra %s = %v, want %s", k, got, want)
		}
	}
	if id := u.Extra["authentication.kubernetes.io/credential-id"]; len(id) != 1 || len(id[0]) < 5 || id[0][:4] != "JTI=" {
		t.Errorf("credential-id %v", id)
	}

	// Through the request: a bearer header.
	r, _ := http.NewRequest("GET", "/api", nil)
	r.Header.Set("Authorization", "Bearer "+podToken)
	if u, ok, err := f.auth.Authenticate(r); !ok || err != nil || u.Name != "system:serviceaccount:ns:app" {
		t.Errorf("Authenticate: %+v %v %v", u, ok, err)
	}

	other, err := NewTokenSigner(testIssuer, mustKey(t))
	if err != nil {
		t.Fatal(err)
	}
	otherToken, _, _ := other.BoundToken(TokenBinding{ServiceAccount: f.sa}, api, time.Hour, 0)
	foreign, _ := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{Issuer: "https://dex.example"}).SignedString(sharedKey(t))
	hs, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Issuer: testIssuer}).SignedString([]byte("secret"))

	for _, tc := range []struct {
		name   string
		token  func() string
		at     time.Time
		setup  func()
		notOur bool
	}{
		{name: "expired (past the minute of leeway)", token: func() string { return podToken }, at: now.Add(61*time.Minute + time.Second)},
		{name: "not yet valid", token: func() string { return podToken }, at: now.Add(-61 * time.Second)},
		{name: "wrong audience", token: func() string { return f.mint(t, TokenBinding{}, []string{"vault"}, time.Hour) }},
		{name: "signed by another key", token: func() string { return otherToken }},
		{name: "HMAC with a guessed secret", token: func() string { return hs }},
		{name: "tampered", token: func() string { return podToken[:len(podToken)-4] + "AAAA" }},
		{name: "account gone", token: func() string { return f.mint(t, TokenBinding{}, api, time.Hour) },
			setup: func() { delete(f.objs.accounts, "ns/app") }},
		{name: "account recreated", token: func() string { return f.mint(t, TokenBinding{}, api, time.Hour) },
			setup: func() {
				f.objs.accounts["ns/app"] = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "new"}}
			}},
		{name: "pod gone", token: func() string { return podToken }, setup: func() { delete(f.objs.pods, "ns/web") }},
		{name: "pod recreated", token: func() string { return podToken },
			setup: func() {
				f.objs.pods["ns/web"] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "other"}}
			}},
		{name: "pod deleted over a minute ago", token: func() string { return podToken }, setup: func() {
			p := f.pod.DeepCopy()
			p.DeletionTimestamp = &metav1.Time{Time: now.Add(-61 * time.Second)}
			f.objs.pods["ns/web"] = p
		}},
		{name: "secret gone", token: func() string { return f.mint(t, TokenBinding{Secret: f.secret}, api, time.Hour) },
			setup: func() { delete(f.objs.secrets, "ns/app-token") }},
		{name: "node gone", token: func() string { return f.mint(t, TokenBinding{Node: f.node}, api, time.Hour) },
			setup: func() { delete(f.objs.nodes, "n1") }},
		{name: "legacy token no longer in its secret", token: func() string {
			tok, _ := f.signer.LegacyToken(f.sa, f.secret)
			return tok
		}},
		{name: "not a JWT", token: func() string { return "abc.def" }, notOur: true},
		{name: "another issuer", token: func() string { return foreign }, notOur: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f = newTokenFixture(t)
			tok := tc.token()
			if tc.setup != nil {
				tc.setup()
			}
			at := tc.at
			if at.IsZero() {
				at = now
			}
			u, ok, err := f.auth.AuthenticateToken(tok, at)
			if tc.notOur {
				if ok || err != nil {
					t.Errorf("ok=%v err=%v, want not ours", ok, err)
				}
				return
			}
			if !ok || !apierrors.IsUnauthorized(err) {
				t.Errorf("user %+v ok=%v err=%v, want 401", u, ok, err)
			}
		})
	}

	// A minute of clock skew is allowed either way, as upstream.
	f = newTokenFixture(t)
	tok := f.mint(t, TokenBinding{}, api, time.Hour)
	for _, at := range []time.Time{now.Add(60*time.Minute + 59*time.Second), now.Add(-59 * time.Second)} {
		if _, _, err := f.auth.AuthenticateToken(tok, at); err != nil {
			t.Errorf("at %s: %v", at.Sub(now), err)
		}
	}
	// A pod being deleted keeps its tokens for a minute.
	f = newTokenFixture(t)
	p := f.pod.DeepCopy()
	p.DeletionTimestamp = &metav1.Time{Time: now.Add(-30 * time.Second)}
	f.objs.pods["ns/web"] = p
	if _, _, err := f.auth.AuthenticateToken(f.mint(t, TokenBinding{Pod: f.pod}, api, time.Hour), now); err != nil {
		t.Errorf("pod deleted 30 s ago: %v", err)
	}
	// A lookup failure other than NotFound is the server's: 500, not 401.
	f.objs.accounts = nil
	f.auth.Objects = failingObjects{f.objs}
	if _, _, err := f.auth.AuthenticateToken(f.mint(t, TokenBinding{}, api, time.Hour), now); !apierrors.IsInternalError(err) {
		t.Errorf("failing lookup: %v, want 500", err)
	}
}

type failingObjects struct{ *fakeTokenObjects }

func (failingObjects) ServiceAccount(string, string) (*corev1.ServiceAccount, error) {
	return nil, apierrors.NewTimeoutError("etcd", 1)
}

func TestLegacyServiceAccountToken(t *testing.T) {
	f := newTokenFixture(t)
	tok, err := f.signer.LegacyToken(f.sa, f.secret)
	if err != nil {
		t.Fatal(err)
	}
	f.secret.Data = map[string][]byte{"token": []byte(tok)}
	u, ok, err := f.auth.AuthenticateToken(tok, time.Now().Add(10*365*24*time.Hour))
	if !ok || err != nil || u.Name != "system:serviceaccount:ns:app" {
		t.Fatalf("legacy token: %+v %v %v", u, ok, err)
	}
	c := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(tok, c); err != nil {
		t.Fatal(err)
	}
	if c["iss"] != "kubernetes/serviceaccount" || c["kubernetes.io/serviceaccount/secret.name"] != "app-token" ||
		c["kubernetes.io/serviceaccount/service-account.uid"] != "sa-uid" || c["exp"] != nil {
		t.Errorf("legacy claims %v", c)
	}
	delete(f.objs.secrets, "ns/app-token")
	if _, _, err := f.auth.AuthenticateToken(tok, time.Now()); !apierrors.IsUnauthorized(err) {
		t.Errorf("secret deleted: %v, want 401", err)
	}
}

// The discovery documents name the issuer, and the key set's key is the
// signer's under the kid the tokens carry.
func TestTokenSignerDiscovery(t *testing.T) {
	f := newTokenFixture(t)
	tok := f.mint(t, TokenBinding{}, []string{testIssuer}, time.Hour)
	parsed, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
	if err != nil {
		t.Fatal(err)
	}
	if string(f.signer.JWKS()) == "" || parsed.Header["kid"] != f.signer.keyID {
		t.Errorf("kid %v, want %s", parsed.Header["kid"], f.signer.keyID)
	}
	if got := string(f.signer.OpenIDConfiguration("https://x/openid/v1/jwks")); got != `{"id_token_signing_alg_values_supported":["RS256"],"issuer":"`+testIssuer+`","jwks_uri":"https://x/openid/v1/jwks","response_types_supported":["id_token"],"subject_types_supported":["public"]}` {
		t.Errorf("openid-configuration %s", got)
	}
}

func mustKey(t testing.TB) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// BenchmarkServiceAccountTokenValidation is one validation of a pod-bound
// token, as every request carrying it pays: the signature (cached after
// the first use) and the ServiceAccount and pod checks against the
// objects (maps here; the API server's watch caches are maps too). The
// p99 of single validations is reported in µs; the target is
// 100 µs. The uncached variant verifies the RSA signature every time.
func BenchmarkServiceAccountTokenValidation(b *testing.B) {
	for _, cached := range []bool{true, false} {
		name := "cached"
		if !cached {
			name = "uncached-signature"
		}
		b.Run(name, func(b *testing.B) {
			f := newTokenFixture(b)
			tok := f.mint(b, TokenBinding{Pod: f.pod, Node: f.node}, []string{testIssuer}, time.Hour)
			now := time.Now()
			durations := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if !cached {
					f.auth.verified = nil
				}
				start := time.Now()
				_, _, err := f.auth.AuthenticateToken(tok, now)
				durations = append(durations, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
			p99 := durations[len(durations)*99/100]
			b.ReportMetric(float64(p99.Nanoseconds())/1000, "p99-µs")
		})
	}
}
