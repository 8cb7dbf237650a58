// Package join is the server side of adding a node: the tokens that admit
// one (k3s's shape, plus upstream's bootstrap tokens), the node password
// that ties a node name to one machine, and the endpoints on the API port
// (/cacerts and /v1-kelp/...) that hand a node its certificates and the
// cluster's settings. The wire types are exported for agent/join, the
// client side.
package join

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
)

// Token is a join token in k3s's shape, K10<ca-hash>::<user>:<secret>, or
// with a bootstrap token as the credential, K10<ca-hash>::<id>.<secret>.
// A bare secret (or a bare <id>.<secret>) has no CAHash: whoever holds it
// trusts the server's CA on first use.
type Token struct {
	CAHash string // sha256 hex of the CA bundle PEM as /cacerts serves it; "" for a bare secret
	User   string // "server" or "node"; "" for a bootstrap token or a bare secret
	Secret string // the password, or a bootstrap token's <id>.<secret>
}

const tokenPrefix = "K10"

// The users of the token files, as k3s names them: the server token's
// secret joins anything, the node token's only agents.
const (
	ServerUser = "server"
	NodeUser   = "node"
)

// ParseToken reads a token as written in the token files, given to
// --token, or printed by `kelp token create`.
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Token{}, errors.New("empty token")
	}
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return Token{Secret: s}, nil
	}
	hash, cred, ok := strings.Cut(rest, "::")
	if !ok {
		// Not k3s's shape after all: a secret that happens to start
		// with K10.
		return Token{Secret: s}, nil
	}
	if len(hash) != sha256.Size*2 {
		return Token{}, fmt.Errorf("token's CA hash %q is not a sha256 hex digest", hash)
	}
	if _, err := hex.DecodeString(hash); err != nil {
		return Token{}, fmt.Errorf("token's CA hash %q is not a sha256 hex digest", hash)
	}
	t := Token{CAHash: strings.ToLower(hash)}
	if _, _, isBootstrap := SplitBootstrapToken(cred); isBootstrap {
		t.Secret = cred
	} else if user, secret, ok := strings.Cut(cred, ":"); ok {
		t.User, t.Secret = user, secret
	} else {
		t.Secret = cred
	}
	if t.Secret == "" {
		return Token{}, errors.New("token has no secret after its CA hash")
	}
	return t, nil
}

// String is the token in k3s's shape, or the bare secret without a CA hash.
func (t Token) String() string {
	if t.CAHash == "" {
		return t.Secret
	}
	cred := t.Secret
	if t.User != "" {
		cred = t.User + ":" + t.Secret
	}
	return tokenPrefix + t.CAHash + "::" + cred
}

// CAHash is the hash a full token carries: sha256 of the CA bundle exactly
// as /cacerts serves it, so an agent can check what it downloaded before
// trusting it.
func CAHash(caPEM []byte) string {
	sum := sha256.Sum256(caPEM)
	return hex.EncodeToString(sum[:])
}

// NewSecret is a random secret for a token file: 128 bits, hex.
func NewSecret() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// Bootstrap tokens, as upstream defines them (k8s.io/cluster-bootstrap,
// which kelp does not vendor): a Secret of type bootstrap.kubernetes.io/token
// named bootstrap-token-<id> in kube-system, token <id>.<secret>.
const (
	BootstrapTokenSecretType     = "bootstrap.kubernetes.io/token"
	BootstrapTokenSecretPrefix   = "bootstrap-token-"
	BootstrapTokenIDKey          = "token-id"
	BootstrapTokenSecretKey      = "token-secret"
	BootstrapTokenExpirationKey  = "expiration"
	BootstrapTokenUsageAuthKey   = "usage-bootstrap-authentication"
	BootstrapTokenDescriptionKey = "description"
	BootstrapTokenExtraGroupsKey = "auth-extra-groups"
	// BootstrapTokenGroup is the extra group kelp's tokens carry, after
	// k3s's system:bootstrappers:k3s:default-node-token.
	BootstrapTokenGroup = "system:bootstrappers:kelp:default-node-token"
)

// bootstrapTokenRE is upstream's BootstrapTokenPattern.
var bootstrapTokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)

// SplitBootstrapToken splits <id>.<secret>; ok is false for anything else.
func SplitBootstrapToken(s string) (id, secret string, ok bool) {
	m := bootstrapTokenRE.FindStringSubmatch(s)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// NewBootstrapToken is a random <id>.<secret> from upstream's alphabet.
func NewBootstrapToken() (id, secret string, err error) {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 22)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", "", err
		}
		b[i] = alphabet[n.Int64()]
	}
	return string(b[:6]), string(b[6:]), nil
}
