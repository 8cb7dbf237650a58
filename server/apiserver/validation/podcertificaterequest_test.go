package validation

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/server/pki/pkitest"
)

func pcrKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func stubCSR(t *testing.T, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// issuedChain is a certificate for pub from notBefore, valid
// for lifetime, as PEM.
func issuedChain(t *testing.T, pub crypto.PublicKey, notBefore time.Time, lifetime time.Duration) string {
	t.Helper()
	return pkitest.IssuedPEM(t, "leaf", pub, notBefore, lifetime)
}

func seedPCR(t *testing.T, key crypto.Signer) *certificatesv1.PodCertificateRequest {
	return &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "req", Namespace: "ns"},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: "example.com/signer", PodName: "pod", PodUID: "pod-uid",
			ServiceAccountName: "default", ServiceAccountUID: "sa-uid", NodeName: "node", NodeUID: "node-uid",
			MaxExpirationSeconds: ptr.To[int32](86400), StubPKCS10Request: stubCSR(t, key),
		},
	}
}

// Each spec rule of upstream's create validation, at its field path.
func TestPodCertificateRequest(t *testing.T) {
	key := pcrKey(t)
	expectErrors(t, PodCertificateRequest(seedPCR(t, key)), nil)

	// A stub request whose signature was altered fails the proof of
	// possession (the last byte of the DER is the signature's).
	forged := stubCSR(t, key)
	forged[len(forged)-1] ^= 0x01

	for _, tc := range []struct {
		what   string
		mutate func(*certificatesv1.PodCertificateRequestSpec)
		want   want
	}{
		{"bad signer", func(s *certificatesv1.PodCertificateRequestSpec) { s.SignerName = "nodomain" }, want{field.ErrorTypeInvalid, "spec.signerName", "fully qualified domain"}},
		{"bad pod name", func(s *certificatesv1.PodCertificateRequestSpec) { s.PodName = "Pod" }, want{field.ErrorTypeInvalid, "spec.podName", ""}},
		{"no pod uid", func(s *certificatesv1.PodCertificateRequestSpec) { s.PodUID = "" }, want{field.ErrorTypeInvalid, "spec.podUID", "must not be empty"}},
		{"long sa uid", func(s *certificatesv1.PodCertificateRequestSpec) { s.ServiceAccountUID = types129() }, want{field.ErrorTypeTooLong, "spec.serviceAccountUID", ""}},
		{"bad sa name", func(s *certificatesv1.PodCertificateRequestSpec) { s.ServiceAccountName = "" }, want{field.ErrorTypeInvalid, "spec.serviceAccountName", ""}},
		{"bad node name", func(s *certificatesv1.PodCertificateRequestSpec) { s.NodeName = "a_b" }, want{field.ErrorTypeInvalid, "spec.nodeName", ""}},
		{"no node uid", func(s *certificatesv1.PodCertificateRequestSpec) { s.NodeUID = "" }, want{field.ErrorTypeInvalid, "spec.nodeUID", "must not be empty"}},
		{"no max expiration", func(s *certificatesv1.PodCertificateRequestSpec) { s.MaxExpirationSeconds = nil }, want{field.ErrorTypeRequired, "spec.maxExpirationSeconds", "must be set"}},
		{"short expiration", func(s *certificatesv1.PodCertificateRequestSpec) { s.MaxExpirationSeconds = ptr.To[int32](3599) }, want{field.ErrorTypeInvalid, "spec.maxExpirationSeconds", "[3600, 7862400]"}},
		{"kubernetes signer over a day", func(s *certificatesv1.PodCertificateRequestSpec) {
			s.SignerName = "kubernetes.io/x"
			s.MaxExpirationSeconds = ptr.To[int32](86401)
		}, want{field.ErrorTypeInvalid, "spec.maxExpirationSeconds", "[3600, 86400]"}},
		{"no stub", func(s *certificatesv1.PodCertificateRequestSpec) { s.StubPKCS10Request = nil }, want{field.ErrorTypeInvalid, "spec", "exactly one of (stubPKCS10Request)"}},
		{"garbage stub", func(s *certificatesv1.PodCertificateRequestSpec) { s.StubPKCS10Request = []byte("x") }, want{field.ErrorTypeInvalid, "spec.stubPKCS10Request", "must be a valid PKCS#10 CSR"}},
		{"forged stub", func(s *certificatesv1.PodCertificateRequestSpec) { s.StubPKCS10Request = forged }, want{field.ErrorTypeInvalid, "spec.stubPKCS10Request", "invalid signature"}},
		{"P-224 key", func(s *certificatesv1.PodCertificateRequestSpec) {
			k, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
			s.StubPKCS10Request = stubCSR(t, k)
		}, want{field.ErrorTypeInvalid, "spec.stubPKCS10Request", "P256, P384, or P521"}},
		{"bad user annotation", func(s *certificatesv1.PodCertificateRequestSpec) {
			s.UnverifiedUserAnnotations = map[string]string{"nodomain": "x"}
		}, want{field.ErrorTypeInvalid, "spec.unverifiedUserAnnotations", "prefix"}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			r := seedPCR(t, key)
			tc.mutate(&r.Spec)
			expectErrors(t, PodCertificateRequest(r), []want{tc.want})
		})
	}
}

func types129() types.UID { return types.UID(strings.Repeat("a", 129)) }

// The spec never changes through the main endpoint; labels may.
func TestPodCertificateRequestUpdate(t *testing.T) {
	key := pcrKey(t)
	old := seedPCR(t, key)
	old.ResourceVersion = "1"
	r := old.DeepCopy()
	r.Labels = map[string]string{"a": "b"}
	expectErrors(t, PodCertificateRequestUpdate(r, old), nil)
	r.Spec.PodName = "other"
	expectErrors(t, PodCertificateRequestUpdate(r, old), []want{{field.ErrorTypeInvalid, "spec", "field is immutable"}})
}

// Status: one terminal condition, an issued chain consistent with the
// request, and nothing moves once terminal.
func TestPodCertificateRequestStatusUpdate(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	pcrClock = func() time.Time { return now }
	defer func() { pcrClock = time.Now }()
	key := pcrKey(t)
	old := seedPCR(t, key)
	old.ResourceVersion = "1"
	cond := func(typ string, st metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: "R", Message: "m", LastTransitionTime: metav1.NewTime(now)}
	}
	issue := func(chain string, nb, na, refresh time.Time) *certificatesv1.PodCertificateRequest {
		r := old.DeepCopy()
		r.Status = certificatesv1.PodCertificateRequestStatus{
			Conditions:       []metav1.Condition{cond(certificatesv1.PodCertificateRequestConditionTypeIssued, metav1.ConditionTrue)},
			CertificateChain: chain, NotBefore: ptr.To(metav1.NewTime(nb)), NotAfter: ptr.To(metav1.NewTime(na)),
			BeginRefreshAt: ptr.To(metav1.NewTime(refresh)),
		}
		return r
	}
	good := issuedChain(t, &key.PublicKey, now, 2*time.Hour)
	ok := issue(good, now, now.Add(2*time.Hour), now.Add(time.Hour))
	expectErrors(t, PodCertificateRequestStatusUpdate(ok, old), nil)

	for _, tc := range []struct {
		what string
		r    *certificatesv1.PodCertificateRequest
		want want
	}{
		{"other key", issue(issuedChain(t, &pcrKey(t).PublicKey, now, 2*time.Hour), now, now.Add(2*time.Hour), now.Add(time.Hour)),
			want{field.ErrorTypeInvalid, "status.certificateChain", "not issued to the requested public key"}},
		{"no chain", issue("", now, now.Add(2*time.Hour), now.Add(time.Hour)), want{field.ErrorTypeInvalid, "status.certificateChain", "at least one certificate"}},
		{"notBefore differs", issue(good, now.Add(time.Second), now.Add(2*time.Hour), now.Add(time.Hour)), want{field.ErrorTypeInvalid, "status.notBefore", "NotBefore time encoded"}},
		{"notBefore far", issue(issuedChain(t, &key.PublicKey, now.Add(-time.Hour), 2*time.Hour), now.Add(-time.Hour), now.Add(time.Hour), now), want{field.ErrorTypeInvalid, "status.notBefore", "within 5 minutes"}},
		{"too short", issue(issuedChain(t, &key.PublicKey, now, 59*time.Minute), now, now.Add(59*time.Minute), now.Add(20*time.Minute)), want{field.ErrorTypeInvalid, "status.certificateChain", ">= 1 hour"}},
		{"too long", issue(issuedChain(t, &key.PublicKey, now, 25*time.Hour), now, now.Add(25*time.Hour), now.Add(time.Hour)), want{field.ErrorTypeInvalid, "status.certificateChain", "<= spec.maxExpirationSeconds"}},
		{"refresh too early", issue(good, now, now.Add(2*time.Hour), now.Add(time.Minute)), want{field.ErrorTypeInvalid, "status.beginRefreshAt", "10 minutes after"}},
		{"refresh too late", issue(good, now, now.Add(2*time.Hour), now.Add(115*time.Minute)), want{field.ErrorTypeInvalid, "status.beginRefreshAt", "10 minutes before"}},
		{"two terminal", func() *certificatesv1.PodCertificateRequest {
			r := old.DeepCopy()
			r.Status.Conditions = []metav1.Condition{cond("Denied", metav1.ConditionTrue), cond("Failed", metav1.ConditionTrue)}
			return r
		}(), want{field.ErrorTypeInvalid, "status.conditions[1].type", "at most one"}},
		{"false terminal", func() *certificatesv1.PodCertificateRequest {
			r := old.DeepCopy()
			r.Status.Conditions = []metav1.Condition{cond("Denied", metav1.ConditionFalse)}
			return r
		}(), want{field.ErrorTypeNotSupported, "status.conditions[0].status", ""}},
		{"unknown type", func() *certificatesv1.PodCertificateRequest {
			r := old.DeepCopy()
			r.Status.Conditions = []metav1.Condition{cond("Ready", metav1.ConditionTrue)}
			return r
		}(), want{field.ErrorTypeNotSupported, "status.conditions[0].type", ""}},
		{"denied with chain", func() *certificatesv1.PodCertificateRequest {
			r := old.DeepCopy()
			r.Status.Conditions = []metav1.Condition{cond("Denied", metav1.ConditionTrue)}
			r.Status.CertificateChain = good
			return r
		}(), want{field.ErrorTypeInvalid, "status", "must be empty when denying"}},
		{"pending change", func() *certificatesv1.PodCertificateRequest {
			r := old.DeepCopy()
			r.Status.CertificateChain = good
			return r
		}(), want{field.ErrorTypeInvalid, "status", "status is immutable unless"}},
	} {
		t.Run(tc.what, func(t *testing.T) { expectErrors(t, PodCertificateRequestStatusUpdate(tc.r, old), []want{tc.want}) })
	}

	// Once issued, the same status again passes (a re-applied patch);
	// any change does not.
	issued := ok.DeepCopy()
	expectErrors(t, PodCertificateRequestStatusUpdate(ok.DeepCopy(), issued), nil)
	denied := issued.DeepCopy()
	denied.Status = certificatesv1.PodCertificateRequestStatus{Conditions: []metav1.Condition{cond("Denied", metav1.ConditionTrue)}}
	expectErrors(t, PodCertificateRequestStatusUpdate(denied, issued), []want{{field.ErrorTypeInvalid, "status", "immutable after PodCertificateRequest is issued"}})
}

// The projected podCertificate source: upstream's rules and messages.
func TestPodCertificateProjection(t *testing.T) {
	p := field.NewPath("spec", "volumes").Index(0).Child("projected")
	src := func(f func(*corev1.PodCertificateProjection)) *corev1.ProjectedVolumeSource {
		c := corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ECDSAP256", CredentialBundlePath: "creds.pem"}
		f(&c)
		return &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{PodCertificate: &c}}}
	}
	cp := "spec.volumes[0].projected.sources[0].podCertificate"
	expectErrors(t, validateProjected(src(func(*corev1.PodCertificateProjection) {}), p), nil)
	expectErrors(t, validateProjected(src(func(c *corev1.PodCertificateProjection) {
		c.CredentialBundlePath, c.KeyPath, c.CertificateChainPath = "", "key.pem", "chain.pem"
		c.MaxExpirationSeconds = ptr.To[int32](MaxMaxExpirationSeconds)
	}), p), nil)
	for _, tc := range []struct {
		what string
		f    func(*corev1.PodCertificateProjection)
		want want
	}{
		{"over 91 days", func(c *corev1.PodCertificateProjection) {
			c.MaxExpirationSeconds = ptr.To[int32](MaxMaxExpirationSeconds + 1)
		},
			want{field.ErrorTypeInvalid, cp + ".maxExpirationSeconds", "if provided, maxExpirationSeconds must be <= 7862400"}},
		{"under an hour", func(c *corev1.PodCertificateProjection) { c.MaxExpirationSeconds = ptr.To[int32](3599) },
			want{field.ErrorTypeInvalid, cp + ".maxExpirationSeconds", "if provided, maxExpirationSeconds must be >= 3600"}},
		{"kubernetes signer over a day", func(c *corev1.PodCertificateProjection) {
			c.SignerName, c.MaxExpirationSeconds = "kubernetes.io/x", ptr.To[int32](86401)
		}, want{field.ErrorTypeInvalid, cp + ".maxExpirationSeconds", "<= 86400"}},
		{"key type", func(c *corev1.PodCertificateProjection) { c.KeyType = "DSA" }, want{field.ErrorTypeNotSupported, cp + ".keyType", ""}},
		{"signer", func(c *corev1.PodCertificateProjection) { c.SignerName = "" }, want{field.ErrorTypeRequired, cp + ".signerName", ""}},
		{"no path", func(c *corev1.PodCertificateProjection) { c.CredentialBundlePath = "" }, want{field.ErrorTypeRequired, cp, "specify at least one of"}},
		{"escaping path", func(c *corev1.PodCertificateProjection) { c.KeyPath = "../k" }, want{field.ErrorTypeInvalid, cp + ".keyPath", "'..'"}},
		{"same path twice", func(c *corev1.PodCertificateProjection) { c.KeyPath = "creds.pem" }, want{field.ErrorTypeInvalid, cp + ".keyPath", "conflicting duplicate paths"}},
		{"user annotations", func(c *corev1.PodCertificateProjection) { c.UserAnnotations = map[string]string{"x": "y"} }, want{field.ErrorTypeInvalid, cp + ".userAnnotations", ""}},
		{"user", func(c *corev1.PodCertificateProjection) { c.User = ptr.To[int64](-1) }, want{field.ErrorTypeInvalid, cp + ".user", ""}},
	} {
		t.Run(tc.what, func(t *testing.T) { expectErrors(t, validateProjected(src(tc.f), p), []want{tc.want}) })
	}
}
