package kubelet

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// maxTokenAge is how long the kubelet uses one token at most, whatever its
// lifetime: upstream's token manager refreshes after 24 hours.
const maxTokenAge = 24 * time.Hour

// tokenManager holds the service-account tokens of the node's pods'
// serviceAccountToken projections, as upstream's kubelet token manager:
// each is requested through TokenRequest, bound to its pod (the node's own
// identity may ask only for pods bound to it: the Node authorizer and
// NodeRestriction), and requested again once 80% of its lifetime has
// passed or it is 24 hours old, whichever comes first. Volumes are
// rewritten on every sync (at least every syncFrequency), so a refreshed
// token reaches the pod's file within a minute.
type tokenManager struct {
	request func(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	now     func() time.Time

	mu     sync.Mutex
	tokens map[string]*authenticationv1.TokenRequest // tokenKey
}

func newTokenManager(c kubernetes.Interface) *tokenManager {
	return &tokenManager{
		request: func(ctx context.Context, ns, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			return c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, tr, metav1.CreateOptions{})
		},
		now:    time.Now,
		tokens: map[string]*authenticationv1.TokenRequest{},
	}
}

// token returns the token of one projection of pod.
func (m *tokenManager) token(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, error) {
	secs := int64(3600)
	if src.ExpirationSeconds != nil {
		secs = *src.ExpirationSeconds
	}
	var auds []string
	if src.Audience != "" {
		auds = []string{src.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	key := strings.Join([]string{pod.Namespace, sa, string(pod.UID), src.Audience, fmt.Sprint(secs)}, "/")
	now := m.now()
	m.mu.Lock()
	cur, ok := m.tokens[key]
	m.mu.Unlock()
	if ok && !needsRefresh(cur, now) {
		return cur.Status.Token, nil
	}
	tr, err := m.request(ctx, pod.Namespace, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: auds, ExpirationSeconds: &secs,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}})
	if err == nil && (tr.Status.Token == "" || tr.Spec.ExpirationSeconds == nil) {
		err = fmt.Errorf("token request for %s/%s returned no token", pod.Namespace, sa)
	}
	if err != nil {
		// A token that has not expired yet keeps serving while the API
		// server is away; the next sync tries again.
		if ok && now.Before(cur.Status.ExpirationTimestamp.Time) {
			return cur.Status.Token, nil
		}
		return "", fmt.Errorf("failed to fetch token: %w", err)
	}
	m.mu.Lock()
	m.tokens[key] = tr
	m.mu.Unlock()
	return tr.Status.Token, nil
}

// needsRefresh is upstream's requiresRefresh: past 80% of the lifetime the
// token was asked for, or older than maxTokenAge. The lifetime is the
// request's (for a kube-api-access token the server extends the real
// expiry, but reports the requested one).
func needsRefresh(tr *authenticationv1.TokenRequest, now time.Time) bool {
	exp := tr.Status.ExpirationTimestamp.Time
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	issued := exp.Add(-ttl)
	return now.After(exp.Add(-ttl/5)) || now.After(issued.Add(maxTokenAge))
}

// forget drops the tokens of a pod that is gone.
func (m *tokenManager) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key := range m.tokens {
		if strings.Split(key, "/")[2] == string(uid) {
			delete(m.tokens, key)
		}
	}
}
