package join

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BootstrapToken is a bootstrap token's Secret, read back.
type BootstrapToken struct {
	ID, Secret  string
	Description string
	Expires     *time.Time // nil: never
	Groups      []string
}

// Expired reports whether the token's expiration has passed at now.
func (b BootstrapToken) Expired(now time.Time) bool {
	return b.Expires != nil && !now.Before(*b.Expires)
}

// NewBootstrapSecret is the Secret for a new bootstrap token with upstream's
// data keys; a ttl of 0 never expires, as kubeadm's.
func NewBootstrapSecret(id, secret, description string, ttl time.Duration, now time.Time) *corev1.Secret {
	data := map[string][]byte{
		BootstrapTokenIDKey:          []byte(id),
		BootstrapTokenSecretKey:      []byte(secret),
		BootstrapTokenUsageAuthKey:   []byte("true"),
		BootstrapTokenExtraGroupsKey: []byte(BootstrapTokenGroup),
	}
	if description != "" {
		data[BootstrapTokenDescriptionKey] = []byte(description)
	}
	if ttl > 0 {
		data[BootstrapTokenExpirationKey] = []byte(now.Add(ttl).UTC().Format(time.RFC3339))
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: BootstrapTokenSecretPrefix + id, Namespace: metav1.NamespaceSystem},
		Type:       BootstrapTokenSecretType,
		Data:       data,
	}
}

// ParseBootstrapSecret reads a bootstrap token's Secret as upstream's
// bootstrap authenticator does: right type and name, the id matching the
// name, a secret, and usage-bootstrap-authentication "true".
func ParseBootstrapSecret(s *corev1.Secret) (BootstrapToken, error) {
	if s.Type != BootstrapTokenSecretType {
		return BootstrapToken{}, fmt.Errorf("secret %s is of type %q, not %s", s.Name, s.Type, BootstrapTokenSecretType)
	}
	b := BootstrapToken{
		ID:          string(s.Data[BootstrapTokenIDKey]),
		Secret:      string(s.Data[BootstrapTokenSecretKey]),
		Description: string(s.Data[BootstrapTokenDescriptionKey]),
	}
	if s.Name != BootstrapTokenSecretPrefix+b.ID {
		return BootstrapToken{}, fmt.Errorf("secret %s holds token id %q", s.Name, b.ID)
	}
	if _, _, ok := SplitBootstrapToken(b.ID + "." + b.Secret); !ok {
		return BootstrapToken{}, fmt.Errorf("secret %s does not hold a well-formed token", s.Name)
	}
	if string(s.Data[BootstrapTokenUsageAuthKey]) != "true" {
		return BootstrapToken{}, fmt.Errorf("bootstrap token %s is not for authentication", b.ID)
	}
	if exp := string(s.Data[BootstrapTokenExpirationKey]); exp != "" {
		t, err := time.Parse(time.RFC3339, exp)
		if err != nil {
			return BootstrapToken{}, fmt.Errorf("bootstrap token %s: expiration %q: %w", b.ID, exp, err)
		}
		b.Expires = &t
	}
	if g := string(s.Data[BootstrapTokenExtraGroupsKey]); g != "" {
		b.Groups = strings.Split(g, ",")
	}
	return b, nil
}
