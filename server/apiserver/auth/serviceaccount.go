package auth

import (
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Service-account tokens, as kube-apiserver's pkg/serviceaccount: bound
// tokens (TokenRequest, the kubelet's projected volumes) and the legacy
// tokens of kubernetes.io/service-account-token Secrets, both JWTs signed
// RS256 with the server's key (<data-dir>/server/tls/service.key). The
// TokenSigner mints them and publishes the key (OIDC discovery);
// ServiceAccountAuthenticator checks them on every request.

const (
	// ServiceAccountUserPrefix and the groups are what every
	// service-account token authenticates as.
	ServiceAccountUserPrefix   = "system:serviceaccount:"
	ServiceAccountsGroup       = "system:serviceaccounts"
	serviceAccountsGroupPrefix = "system:serviceaccounts:"
	AuthenticatedGroup         = "system:authenticated"
	LegacyIssuer               = "kubernetes/serviceaccount"
	extraPodName               = "authentication.kubernetes.io/pod-name"
	extraPodUID                = "authentication.kubernetes.io/pod-uid"
	extraNodeName              = "authentication.kubernetes.io/node-name"
	extraNodeUID               = "authentication.kubernetes.io/node-uid"
	extraCredentialID          = "authentication.kubernetes.io/credential-id"
	// podDeletionGrace is how long a token bound to a pod that is being
	// deleted stays valid, as upstream: the pod's containers may still
	// need the API while they shut down.
	podDeletionGrace = 60 * time.Second
)

// ServiceAccountUser is the user name of a ServiceAccount.
func ServiceAccountUser(namespace, name string) string {
	return ServiceAccountUserPrefix + namespace + ":" + name
}

// claims are a token's JWT claims: the registered ones, the bound
// tokens' kubernetes.io claim, and the legacy tokens' flat claims.
type claims struct {
	jwt.RegisteredClaims
	Kubernetes *kubernetesClaims `json:"kubernetes.io,omitempty"`

	LegacyNamespace  string `json:"kubernetes.io/serviceaccount/namespace,omitempty"`
	LegacySecretName string `json:"kubernetes.io/serviceaccount/secret.name,omitempty"`
	LegacySAName     string `json:"kubernetes.io/serviceaccount/service-account.name,omitempty"`
	LegacySAUID      string `json:"kubernetes.io/serviceaccount/service-account.uid,omitempty"`
}

// kubernetesClaims is upstream's privateClaims["kubernetes.io"].
type kubernetesClaims struct {
	Namespace      string           `json:"namespace,omitempty"`
	ServiceAccount objectRef        `json:"serviceaccount"`
	Pod            *objectRef       `json:"pod,omitempty"`
	Secret         *objectRef       `json:"secret,omitempty"`
	Node           *objectRef       `json:"node,omitempty"`
	WarnAfter      *jwt.NumericDate `json:"warnafter,omitempty"`
}

type objectRef struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

func refOf(name string, uid types.UID) *objectRef { return &objectRef{Name: name, UID: string(uid)} }

// TokenSigner signs service-account tokens with the server's key and
// publishes the key for OIDC discovery.
type TokenSigner struct {
	// Issuer is the iss of bound tokens (k3s and kube-apiserver:
	// https://kubernetes.default.svc.<cluster domain>).
	Issuer string
	key    *rsa.PrivateKey
	keyID  string
	now    func() time.Time
}

// NewTokenSigner signs for issuer with key.
func NewTokenSigner(issuer string, key *rsa.PrivateKey) (*TokenSigner, error) {
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	// The key ID is upstream's: the unpadded base64url SHA-256 of the
	// public key's DER, so it stays the same across restarts.
	sum := sha256.Sum256(der)
	return &TokenSigner{Issuer: issuer, key: key, keyID: base64.RawURLEncoding.EncodeToString(sum[:]), now: time.Now}, nil
}

// TokenBinding is what a bound token is for: a ServiceAccount, and at
// most one of a pod, a Secret or a node (a pod's node is recorded too).
type TokenBinding struct {
	ServiceAccount *corev1.ServiceAccount
	Pod            *corev1.Pod
	Secret         *corev1.Secret
	Node           *corev1.Node
}

// BoundToken mints a bound token for audiences, valid for expiration;
// warnAfter, when not zero, is recorded as kubernetes.io.warnafter (a
// token whose lifetime the server extended). It returns the token and
// its expiry.
func (s *TokenSigner) BoundToken(b TokenBinding, audiences []string, expiration, warnAfter time.Duration) (string, time.Time, error) {
	sa := b.ServiceAccount
	now := s.now().Truncate(time.Second)
	exp := now.Add(expiration)
	kc := &kubernetesClaims{Namespace: sa.Namespace, ServiceAccount: objectRef{Name: sa.Name, UID: string(sa.UID)}}
	switch {
	case b.Pod != nil:
		kc.Pod = refOf(b.Pod.Name, b.Pod.UID)
		if b.Node != nil {
			kc.Node = refOf(b.Node.Name, b.Node.UID)
		}
	case b.Secret != nil:
		kc.Secret = refOf(b.Secret.Name, b.Secret.UID)
	case b.Node != nil:
		kc.Node = refOf(b.Node.Name, b.Node.UID)
	}
	if warnAfter > 0 {
		kc.WarnAfter = jwt.NewNumericDate(now.Add(warnAfter))
	}
	c := &claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: s.Issuer, Subject: ServiceAccountUser(sa.Namespace, sa.Name), Audience: audiences,
			ExpiresAt: jwt.NewNumericDate(exp), IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now),
			ID: string(uuid.NewUUID()),
		},
		Kubernetes: kc,
	}
	tok, err := s.sign(c)
	return tok, exp, err
}

// LegacyToken mints the never-expiring token of a
// kubernetes.io/service-account-token Secret, with upstream's legacy
// claims; it is valid while the Secret holds it and the ServiceAccount
// exists.
func (s *TokenSigner) LegacyToken(sa *corev1.ServiceAccount, secret *corev1.Secret) (string, error) {
	return s.sign(&claims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: LegacyIssuer, Subject: ServiceAccountUser(sa.Namespace, sa.Name)},
		LegacyNamespace:  sa.Namespace, LegacySecretName: secret.Name, LegacySAName: sa.Name, LegacySAUID: string(sa.UID),
	})
}

func (s *TokenSigner) sign(c *claims) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	t.Header["kid"] = s.keyID
	return t.SignedString(s.key)
}

// JWKSPath and OpenIDConfigPath are served as upstream's
// ServiceAccountIssuerDiscovery.
const (
	OpenIDConfigPath = "/.well-known/openid-configuration"
	JWKSPath         = "/openid/v1/jwks"
)

// JWKS is the key set (/openid/v1/jwks) that verifies the tokens.
func (s *TokenSigner) JWKS() []byte {
	pub := s.key.PublicKey
	out, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"use": "sig", "kty": "RSA", "kid": s.keyID, "alg": "RS256",
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}}})
	return out
}

// OpenIDConfiguration is the discovery document
// (/.well-known/openid-configuration); jwksURI is where the key set is
// (upstream: https://<advertise address>/openid/v1/jwks).
func (s *TokenSigner) OpenIDConfiguration(jwksURI string) []byte {
	out, _ := json.Marshal(map[string]any{
		"issuer": s.Issuer, "jwks_uri": jwksURI,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
	})
	return out
}

// ServiceAccountObjects is what the authenticator reads to decide whether
// a token's ServiceAccount and bound object still exist: the API server's
// watch caches, read through as admission reads them. Returned objects
// are shared and must not be changed; a missing one is a NotFound error.
type ServiceAccountObjects interface {
	ServiceAccount(namespace, name string) (*corev1.ServiceAccount, error)
	Pod(namespace, name string) (*corev1.Pod, error)
	Secret(namespace, name string) (*corev1.Secret, error)
	Node(name string) (*corev1.Node, error)
}

// ServiceAccountAuthenticator authenticates service-account tokens, as
// upstream's JWT token authenticator with its bound and legacy
// validators. A bearer token that is no JWT of this server's issuers is
// not its kind (the next authenticator may know it); one that is but
// fails a check is 401.
//
// Verified signatures are cached by token (verifiedCacheSize entries, each
// until its token expires): the RSA check is most of the cost, and the
// claims a signature covers never change. Everything else (time, the
// ServiceAccount's and the bound object's existence and UID) is checked
// on every request against the watch caches, so a deleted pod's token is
// refused at once.
type ServiceAccountAuthenticator struct {
	Signer *TokenSigner
	// Audiences are the API server's own (--api-audiences; default the
	// issuer): a bound token must carry one of them.
	Audiences []string
	Objects   ServiceAccountObjects

	mu       sync.RWMutex
	verified map[string]*verifiedToken
}

// clockLeeway is the clock skew allowed on exp and nbf: upstream validates
// with go-jose's DefaultLeeway, a minute.
const clockLeeway = time.Minute

// verifiedCacheSize bounds the cache of verified signatures; when full, it
// is emptied (tokens are re-verified once, which is cheap enough to not
// need an LRU).
const verifiedCacheSize = 8192

type verifiedToken struct {
	claims      *claims
	legacy      bool
	exp, nbf    time.Time
	credentials string
}

func (a *ServiceAccountAuthenticator) Authenticate(r *http.Request) (*User, bool, error) {
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found || token == "" {
		return nil, false, nil
	}
	return a.AuthenticateToken(token, time.Now())
}

// AuthenticateToken checks one token at time now, for the API server's
// own audiences.
func (a *ServiceAccountAuthenticator) AuthenticateToken(token string, now time.Time) (*User, bool, error) {
	u, _, ok, err := a.ReviewToken(token, nil, now)
	return u, ok, err
}

// ReviewToken checks a token for one of audiences (the API server's when
// none are given), as a TokenReview asks, and returns the audiences it
// is valid for. ok=false: not a token of this issuer. A legacy token has
// no audience of its own and is valid for the API server's.
func (a *ServiceAccountAuthenticator) ReviewToken(token string, audiences []string, now time.Time) (_ *User, matched []string, ok bool, _ error) {
	if len(audiences) == 0 {
		audiences = a.Audiences
	}
	v, ok, err := a.verify(token)
	if !ok || err != nil {
		return nil, nil, ok, err
	}
	tokenAudiences := v.claims.Audience
	if v.legacy {
		tokenAudiences = a.Audiences
	}
	for _, aud := range audiences {
		if slices.Contains(tokenAudiences, aud) {
			matched = append(matched, aud)
		}
	}
	if len(matched) == 0 {
		return nil, nil, true, ErrUnauthorized
	}
	if v.legacy {
		u, err := a.legacyUser(token, v.claims)
		return u, matched, true, err
	}
	if now.After(v.exp.Add(clockLeeway)) || now.Before(v.nbf.Add(-clockLeeway)) {
		return nil, nil, true, ErrUnauthorized
	}
	u, err := a.boundUser(v, now)
	return u, matched, true, err
}

// verify returns the token's claims once its signature is checked, from
// the cache when it was checked before. ok=false: not a token of ours.
func (a *ServiceAccountAuthenticator) verify(token string) (*verifiedToken, bool, error) {
	a.mu.RLock()
	v, hit := a.verified[token]
	a.mu.RUnlock()
	if hit {
		return v, true, nil
	}
	// Whose token is it? Only the issuer is read before the signature is
	// checked, to let other authenticators have tokens that are not ours.
	var peek jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &peek); err != nil {
		return nil, false, nil
	}
	if peek.Issuer != a.Signer.Issuer && peek.Issuer != LegacyIssuer {
		return nil, false, nil
	}
	c := &claims{}
	_, err := jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodRS256.Alg()}), jwt.WithoutClaimsValidation()).
		ParseWithClaims(token, c, func(*jwt.Token) (any, error) { return &a.Signer.key.PublicKey, nil })
	if err != nil {
		return nil, true, ErrUnauthorized
	}
	v = &verifiedToken{claims: c, legacy: c.Issuer == LegacyIssuer}
	if !v.legacy {
		if c.Kubernetes == nil || c.ExpiresAt == nil || c.Subject != ServiceAccountUser(c.Kubernetes.Namespace, c.Kubernetes.ServiceAccount.Name) {
			return nil, true, ErrUnauthorized
		}
		v.exp = c.ExpiresAt.Time
		if c.NotBefore != nil {
			v.nbf = c.NotBefore.Time
		}
		if c.ID != "" {
			v.credentials = "JTI=" + c.ID
		}
	} else if c.LegacyNamespace == "" || c.LegacySAName == "" || c.LegacySecretName == "" {
		return nil, true, ErrUnauthorized
	}
	a.mu.Lock()
	if a.verified == nil || len(a.verified) >= verifiedCacheSize {
		a.verified = map[string]*verifiedToken{}
	}
	a.verified[token] = v
	a.mu.Unlock()
	return v, true, nil
}

// serviceAccount returns the token's ServiceAccount if it still exists
// with the UID the token names.
func (a *ServiceAccountAuthenticator) serviceAccount(namespace, name, uid string) (*corev1.ServiceAccount, error) {
	sa, err := a.Objects.ServiceAccount(namespace, name)
	if err != nil {
		return nil, lookupFailed(err)
	}
	if string(sa.UID) != uid || sa.DeletionTimestamp != nil {
		return nil, ErrUnauthorized
	}
	return sa, nil
}

// lookupFailed: a missing object invalidates the token (401); any other
// failure is the server's (500), so a client retries rather than drop a
// good token.
func lookupFailed(err error) error {
	if apierrors.IsNotFound(err) {
		return ErrUnauthorized
	}
	return apierrors.NewInternalError(err)
}

func (a *ServiceAccountAuthenticator) boundUser(v *verifiedToken, now time.Time) (*User, error) {
	kc := v.claims.Kubernetes
	sa, err := a.serviceAccount(kc.Namespace, kc.ServiceAccount.Name, kc.ServiceAccount.UID)
	if err != nil {
		return nil, err
	}
	u := serviceAccountUser(sa)
	if v.credentials != "" {
		u.Extra = map[string][]string{extraCredentialID: {v.credentials}}
	}
	extra := func(k, val string) {
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[k] = []string{val}
	}
	switch {
	case kc.Pod != nil:
		pod, err := a.Objects.Pod(kc.Namespace, kc.Pod.Name)
		if err != nil {
			return nil, lookupFailed(err)
		}
		if string(pod.UID) != kc.Pod.UID || (pod.DeletionTimestamp != nil && now.After(pod.DeletionTimestamp.Add(podDeletionGrace))) {
			return nil, ErrUnauthorized
		}
		extra(extraPodName, pod.Name)
		extra(extraPodUID, string(pod.UID))
	case kc.Secret != nil:
		s, err := a.Objects.Secret(kc.Namespace, kc.Secret.Name)
		if err != nil {
			return nil, lookupFailed(err)
		}
		if string(s.UID) != kc.Secret.UID || s.DeletionTimestamp != nil {
			return nil, ErrUnauthorized
		}
	}
	// A pod-bound token names its pod's node too; that node is not
	// checked (upstream neither: the pod's existence is the binding).
	if kc.Node != nil {
		if kc.Pod == nil {
			n, err := a.Objects.Node(kc.Node.Name)
			if err != nil {
				return nil, lookupFailed(err)
			}
			if string(n.UID) != kc.Node.UID || n.DeletionTimestamp != nil {
				return nil, ErrUnauthorized
			}
		}
		extra(extraNodeName, kc.Node.Name)
		extra(extraNodeUID, kc.Node.UID)
	}
	return u, nil
}

// legacyUser checks a Secret's token: the Secret must still hold exactly
// this token, and its ServiceAccount must exist with the UID it names.
func (a *ServiceAccountAuthenticator) legacyUser(token string, c *claims) (*User, error) {
	s, err := a.Objects.Secret(c.LegacyNamespace, c.LegacySecretName)
	if err != nil {
		return nil, lookupFailed(err)
	}
	if s.DeletionTimestamp != nil || string(s.Data[corev1.ServiceAccountTokenKey]) != token {
		return nil, ErrUnauthorized
	}
	sa, err := a.serviceAccount(c.LegacyNamespace, c.LegacySAName, c.LegacySAUID)
	if err != nil {
		return nil, err
	}
	return serviceAccountUser(sa), nil
}

func serviceAccountUser(sa *corev1.ServiceAccount) *User {
	return &User{Name: ServiceAccountUser(sa.Namespace, sa.Name), UID: string(sa.UID),
		Groups: []string{ServiceAccountsGroup, serviceAccountsGroupPrefix + sa.Namespace, AuthenticatedGroup}}
}
