package integration

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

const apiAudience = "https://kubernetes.default.svc.cluster.local"

// tokenClient is a client that presents only the bearer token.
func (s *testServer) tokenClient(t *testing.T, token string) *kubernetes.Clientset {
	t.Helper()
	cfg := &rest.Config{Host: s.config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: s.config.CAData}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// whoami is the user a token authenticates as, or the error (401).
func (s *testServer) whoami(t *testing.T, token string) (authenticationv1.UserInfo, error) {
	t.Helper()
	r, err := s.tokenClient(t, token).AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

func wantUnauthorized(t *testing.T, s *testServer, what, token string) {
	t.Helper()
	if u, err := s.whoami(t, token); !apierrors.IsUnauthorized(err) {
		t.Errorf("%s: whoami = %+v, %v; want 401", what, u, err)
	}
}

// waitUnauthorized waits for a token to be refused: what it names is read
// from the watch caches, which follow a deletion within moments.
func waitUnauthorized(t *testing.T, s *testServer, what, token string) {
	t.Helper()
	waitFor(t, what+" refused", func() bool {
		_, err := s.whoami(t, token)
		return apierrors.IsUnauthorized(err)
	})
}

// writeTokenKubeconfig writes a kubeconfig that authenticates with token
// only (no client certificate), as a user handed a token would have.
func (s *testServer) writeTokenKubeconfig(t *testing.T, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: s.config.Host, CertificateAuthorityData: s.config.CAData}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "token.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// jwtPayload decodes a token's claims without checking them.
func jwtPayload(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is no JWT", token)
	}
	data, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// serverKey is the server's service-account signing key, read from its
// data dir as only someone on the server machine could.
func serverKey(t *testing.T, s *testServer) *rsa.PrivateKey {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(s.dataDir, "server", "tls", "service.key"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	key, err := x509.ParsePKCS1PrivateKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestServiceAccountTokens(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	cs := s.client()
	s.mustKubectl("create", "namespace", "sa-test")
	s.mustKubectl("-n", "sa-test", "create", "serviceaccount", "app")

	// kubectl create token works, and kubectl with that token alone is the
	// ServiceAccount.
	token := strings.TrimSpace(s.mustKubectl("-n", "sa-test", "create", "token", "app"))
	out := s.mustKubectl("--kubeconfig", s.writeTokenKubeconfig(t, token), "auth", "whoami", "-o", "json")
	var review authenticationv1.SelfSubjectReview
	if err := json.Unmarshal([]byte(out), &review); err != nil {
		t.Fatalf("whoami: %v\n%s", err, out)
	}
	u := review.Status.UserInfo
	sa, err := cs.CoreV1().ServiceAccounts("sa-test").Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u.Username != "system:serviceaccount:sa-test:app" || u.UID != string(sa.UID) ||
		!slices.Equal(u.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:sa-test", "system:authenticated"}) {
		t.Errorf("whoami: %+v", u)
	}
	if id := u.Extra["authentication.kubernetes.io/credential-id"]; len(id) != 1 || !strings.HasPrefix(id[0], "JTI=") {
		t.Errorf("credential-id %v", id)
	}

	// The claims are upstream's.
	c := jwtPayload(t, token)
	exp, iat := c["exp"].(float64), c["iat"].(float64)
	k8s, _ := c["kubernetes.io"].(map[string]any)
	if c["iss"] != apiAudience || c["sub"] != "system:serviceaccount:sa-test:app" || exp-iat != 3600 || c["nbf"] != c["iat"] ||
		k8s["namespace"] != "sa-test" || k8s["serviceaccount"].(map[string]any)["uid"] != string(sa.UID) {
		t.Errorf("claims %v", c)
	}
	if aud, _ := c["aud"].([]any); len(aud) != 1 || aud[0] != apiAudience {
		t.Errorf("aud %v, want [%s]", c["aud"], apiAudience)
	}

	t.Run("OIDC discovery verifies the token", func(t *testing.T) {
		raw := func(path string) []byte {
			body, err := cs.RESTClient().Get().AbsPath(path).DoRaw(ctx)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			return body
		}
		var oidc struct {
			Issuer  string   `json:"issuer"`
			JWKSURI string   `json:"jwks_uri"`
			Algs    []string `json:"id_token_signing_alg_values_supported"`
		}
		if err := json.Unmarshal(raw("/.well-known/openid-configuration"), &oidc); err != nil {
			t.Fatal(err)
		}
		if oidc.Issuer != apiAudience || !strings.HasSuffix(oidc.JWKSURI, "/openid/v1/jwks") || !slices.Equal(oidc.Algs, []string{"RS256"}) {
			t.Errorf("openid-configuration %+v", oidc)
		}
		var jwks struct {
			Keys []struct{ Kty, Kid, Alg, Use, N, E string } `json:"keys"`
		}
		if err := json.Unmarshal(raw("/openid/v1/jwks"), &jwks); err != nil {
			t.Fatal(err)
		}
		if len(jwks.Keys) != 1 || jwks.Keys[0].Kty != "RSA" || jwks.Keys[0].Alg != "RS256" || jwks.Keys[0].Use != "sig" {
			t.Fatalf("jwks %+v", jwks)
		}
		k := jwks.Keys[0]
		n, _ := base64.RawURLEncoding.DecodeString(k.N)
		e, _ := base64.RawURLEncoding.DecodeString(k.E)
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		parts := strings.Split(token, ".")
		var header struct{ Alg, Kid string }
		hdr, _ := base64.RawURLEncoding.DecodeString(parts[0])
		_ = json.Unmarshal(hdr, &header)
		if header.Alg != "RS256" || header.Kid != k.Kid {
			t.Errorf("header %+v, want RS256 with kid %s", header, k.Kid)
		}
		sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
		sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
			t.Errorf("the JWKS does not verify the token: %v", err)
		}
	})

	t.Run("bad tokens get 401", func(t *testing.T) {
		parts := strings.Split(token, ".")
		// Another subject under the same signature.
		forged := strings.Replace(string(mustDecode(t, parts[1])), "sa-test:app", "sa-test:adm", 1)
		wantUnauthorized(t, s, "forged claims", parts[0]+"."+base64.RawURLEncoding.EncodeToString([]byte(forged))+"."+parts[2])
		// The right claims signed by another key.
		other, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		claims := jwt.MapClaims(jwtPayload(t, token))
		wantUnauthorized(t, s, "another key", sign(t, other, claims))
		// Expired, signed by the server's own key.
		claims["iat"], claims["nbf"], claims["exp"] = time.Now().Add(-2*time.Hour).Unix(), time.Now().Add(-2*time.Hour).Unix(), time.Now().Add(-time.Hour).Unix()
		wantUnauthorized(t, s, "expired", sign(t, serverKey(t, s), claims))
		// Not yet valid.
		claims["iat"], claims["nbf"], claims["exp"] = time.Now().Unix(), time.Now().Add(time.Hour).Unix(), time.Now().Add(2*time.Hour).Unix()
		wantUnauthorized(t, s, "not yet valid", sign(t, serverKey(t, s), claims))
		// Another audience.
		wrong := strings.TrimSpace(s.mustKubectl("-n", "sa-test", "create", "token", "app", "--audience", "vault"))
		wantUnauthorized(t, s, "audience vault", wrong)
		wantUnauthorized(t, s, "garbage", "not-a-jwt")
		// The good one still works.
		if _, err := s.whoami(t, token); err != nil {
			t.Errorf("good token: %v", err)
		}
	})

	t.Run("token bound to a pod dies with it", func(t *testing.T) {
		pod, err := cs.CoreV1().Pods("sa-test").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: corev1.PodSpec{ServiceAccountName: "app", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bound := strings.TrimSpace(s.mustKubectl("-n", "sa-test", "create", "token", "app", "--bound-object-kind", "Pod", "--bound-object-name", "web"))
		u, err := s.whoami(t, bound)
		if err != nil {
			t.Fatal(err)
		}
		if got := u.Extra["authentication.kubernetes.io/pod-name"]; !slices.Equal(got, []string{"web"}) {
			t.Errorf("pod-name extra %v", got)
		}
		if got := u.Extra["authentication.kubernetes.io/pod-uid"]; !slices.Equal(got, []string{string(pod.UID)}) {
			t.Errorf("pod-uid extra %v", got)
		}
		// The kube-api-access lifetime (3607 s) is extended to a year with
		// warnafter, and the status still says 3607 s, as upstream.
		tr, err := cs.CoreV1().ServiceAccounts("sa-test").CreateToken(ctx, "app", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To(int64(3607)),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web", UID: pod.UID}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ext := jwtPayload(t, tr.Status.Token)
		kc := ext["kubernetes.io"].(map[string]any)
		if got := ext["exp"].(float64) - ext["iat"].(float64); got != 365*24*3600 {
			t.Errorf("extended token lives %v s, want a year", got)
		}
		if got := kc["warnafter"].(float64) - ext["iat"].(float64); got != 3607 {
			t.Errorf("warnafter %v s after iat, want 3607", got)
		}
		if pc := kc["pod"].(map[string]any); pc["name"] != "web" || pc["uid"] != string(pod.UID) {
			t.Errorf("pod claim %v", pc)
		}
		if left := time.Until(tr.Status.ExpirationTimestamp.Time); left > 3607*time.Second || left < 3500*time.Second {
			t.Errorf("status expiration in %s, want 3607 s", left)
		}
		// A stale UID is refused at once, 409 as upstream.
		_, err = cs.CoreV1().ServiceAccounts("sa-test").CreateToken(ctx, "app", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web", UID: "stale"}}}, metav1.CreateOptions{})
		if !apierrors.IsConflict(err) {
			t.Errorf("stale pod UID: %v, want 409", err)
		}
		out, err := s.kubectl("-n", "sa-test", "create", "token", "default", "--bound-object-kind", "Pod", "--bound-object-name", "web")
		if err == nil || !strings.Contains(out, "pod running with different serviceaccount name") {
			t.Errorf("token of another account bound to the pod: %v\n%s", err, out)
		}
		if err := cs.CoreV1().Pods("sa-test").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the pod gone", func() bool {
			_, err := cs.CoreV1().Pods("sa-test").Get(ctx, "web", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		waitUnauthorized(t, s, "token of a deleted pod", bound)
	})

	t.Run("bad token requests", func(t *testing.T) {
		_, err := cs.CoreV1().ServiceAccounts("sa-test").CreateToken(ctx, "app", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To(int64(60))}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "may not specify a duration less than 10 minutes") {
			t.Errorf("60 s token: %v, want 422", err)
		}
		out, err := s.kubectl("-n", "sa-test", "create", "token", "nope")
		if err == nil || !strings.Contains(out, `serviceaccounts "nope" not found`) {
			t.Errorf("token of a missing account: %v\n%s", err, out)
		}
		_, err = cs.CoreV1().ServiceAccounts("sa-test").CreateToken(ctx, "app", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "ConfigMap", APIVersion: "v1", Name: "x"}}}, metav1.CreateOptions{})
		if !apierrors.IsBadRequest(err) {
			t.Errorf("bound to a ConfigMap: %v, want 400", err)
		}
		var code int
		err = cs.RESTClient().Post().AbsPath("/api/v1/namespaces/sa-test/serviceaccounts/app/token").SetHeader("Content-Type", "application/json").
			Body([]byte(`{"spec":{"expirationSeconds":"soon"}}`)).Do(ctx).StatusCode(&code).Error()
		if code != http.StatusBadRequest || !apierrors.IsBadRequest(err) {
			t.Errorf("undecodable TokenRequest: %d %v", code, err)
		}
	})

	t.Run("legacy token Secret is filled in", func(t *testing.T) {
		_, err := cs.CoreV1().Secrets("sa-test").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-token",
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "app"}}, Type: corev1.SecretTypeServiceAccountToken}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var secret *corev1.Secret
		waitFor(t, "the token controller to fill the Secret", func() bool {
			secret, err = cs.CoreV1().Secrets("sa-test").Get(ctx, "app-token", metav1.GetOptions{})
			return err == nil && len(secret.Data["token"]) > 0
		})
		if string(secret.Data["namespace"]) != "sa-test" || !strings.Contains(string(secret.Data["ca.crt"]), "BEGIN CERTIFICATE") ||
			secret.Annotations[corev1.ServiceAccountUIDKey] != string(sa.UID) {
			t.Errorf("secret %v %v", secret.Annotations, secret.Data)
		}
		legacy := string(secret.Data["token"])
		if u, err := s.whoami(t, legacy); err != nil || u.Username != "system:serviceaccount:sa-test:app" {
			t.Errorf("legacy token: %+v %v", u, err)
		}
		if err := cs.CoreV1().Secrets("sa-test").Delete(ctx, "app-token", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitUnauthorized(t, s, "the deleted Secret's token", legacy)
	})

	t.Run("pods get the kube-api-access volume", func(t *testing.T) {
		pod, err := cs.CoreV1().Pods("sa-test").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mounted"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.ServiceAccountName != "default" || len(pod.Spec.Volumes) != 1 || !strings.HasPrefix(pod.Spec.Volumes[0].Name, "kube-api-access-") {
			t.Fatalf("pod spec %+v", pod.Spec)
		}
		m := pod.Spec.Containers[0].VolumeMounts
		if len(m) != 1 || m[0].MountPath != "/var/run/secrets/kubernetes.io/serviceaccount" || !m[0].ReadOnly {
			t.Errorf("mounts %+v", m)
		}
		_, err = cs.CoreV1().Pods("sa-test").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nosa"},
			Spec: corev1.PodSpec{ServiceAccountName: "ghost", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `error looking up service account sa-test/ghost: serviceaccount "ghost" not found`) {
			t.Errorf("pod of a missing account: %v", err)
		}
		waitFor(t, "kube-root-ca.crt in the namespace", func() bool {
			cm, err := cs.CoreV1().ConfigMaps("sa-test").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err == nil && strings.Contains(cm.Data["ca.crt"], "BEGIN CERTIFICATE")
		})
	})

	t.Run("a deleted ServiceAccount's tokens die, also after it is recreated", func(t *testing.T) {
		s.mustKubectl("-n", "sa-test", "create", "serviceaccount", "short")
		tok := strings.TrimSpace(s.mustKubectl("-n", "sa-test", "create", "token", "short"))
		if _, err := s.whoami(t, tok); err != nil {
			t.Fatal(err)
		}
		s.mustKubectl("-n", "sa-test", "delete", "serviceaccount", "short")
		waitUnauthorized(t, s, "deleted account", tok)
		s.mustKubectl("-n", "sa-test", "create", "serviceaccount", "short")
		waitUnauthorized(t, s, "recreated account", tok)
		// and stays refused once the new account is in the cache.
		time.Sleep(200 * time.Millisecond)
		wantUnauthorized(t, s, "recreated account", tok)
	})

	t.Run("the signing key survives a restart", func(t *testing.T) {
		s.restart()
		if u, err := s.whoami(t, token); err != nil || u.Username != "system:serviceaccount:sa-test:app" {
			t.Errorf("after restart: %+v %v", u, err)
		}
	})
}

func TestServiceAccountUserKubeconfig(t *testing.T) {
	s := startServer(t)
	out, err := exec.Command(kelpBin, "kubeconfig", "--data-dir", s.dataDir, "--server", s.config.Host, "--user", "bob", "--group", "devs").Output()
	if err != nil {
		t.Fatalf("kelp kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "bob.kubeconfig")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	who := s.mustKubectl("--kubeconfig", path, "auth", "whoami", "-o", "json")
	var review authenticationv1.SelfSubjectReview
	if err := json.Unmarshal([]byte(who), &review); err != nil {
		t.Fatalf("%v\n%s", err, who)
	}
	if u := review.Status.UserInfo; u.Username != "bob" || !slices.Equal(u.Groups, []string{"devs", "system:authenticated"}) {
		t.Errorf("whoami: %+v", u)
	}
}

func mustDecode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sign(t *testing.T, key *rsa.PrivateKey, claims jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TokenReview (webhook token authentication) answers for a token and the
// audiences asked: the API server's by default, others for tokens minted
// for them; a bad token is unauthenticated with an error, never a failed
// request; an empty token is 422.
func TestTokenReview(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	s.mustKubectl("create", "namespace", "tr")
	s.mustKubectl("-n", "tr", "create", "serviceaccount", "app")
	apiToken := strings.TrimSpace(s.mustKubectl("-n", "tr", "create", "token", "app"))
	vaultToken := strings.TrimSpace(s.mustKubectl("-n", "tr", "create", "token", "app", "--audience", "vault"))
	review := func(token string, audiences ...string) authenticationv1.TokenReviewStatus {
		t.Helper()
		r, err := s.client().AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	st := review(apiToken)
	if !st.Authenticated || st.User.Username != "system:serviceaccount:tr:app" || !slices.Contains(st.User.Groups, "system:serviceaccounts:tr") ||
		!slices.Equal(st.Audiences, []string{apiAudience}) || st.User.UID == "" {
		t.Errorf("review of an API token: %+v", st)
	}
	if st := review(apiToken, "vault"); st.Authenticated || st.Error == "" {
		t.Errorf("an API token reviewed for vault: %+v", st)
	}
	if st := review(vaultToken, "vault", "other"); !st.Authenticated || !slices.Equal(st.Audiences, []string{"vault"}) {
		t.Errorf("a vault token reviewed for vault: %+v", st)
	}
	if st := review(vaultToken); st.Authenticated {
		t.Errorf("a vault token is valid for the API server: %+v", st)
	}
	if st := review("not-a-token"); st.Authenticated || st.Error == "" {
		t.Errorf("review of garbage: %+v", st)
	}
	_, err := s.client().AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("a TokenReview without a token: %v, want 422", err)
	}
}
