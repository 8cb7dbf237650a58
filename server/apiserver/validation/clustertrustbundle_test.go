package validation

import (
	"encoding/pem"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/server/pki/pkitest"
)

func wantErr(t *testing.T, what string, errs field.ErrorList, want string) {
	t.Helper()
	got := errs.ToAggregate()
	if (want == "") != (got == nil) || (got != nil && !strings.Contains(got.Error(), want)) {
		t.Errorf("%s: %v, want %q", what, got, want)
	}
}

// The bundle is one or more distinct header-less CA certificates; names
// follow the signer: `<signer with / as :>:<name>`, none with ":" without.
func TestClusterTrustBundle(t *testing.T) {
	ca, ca2, leaf := pkitest.SelfSignedPEM(t, "x", true), pkitest.SelfSignedPEM(t, "x", true), pkitest.SelfSignedPEM(t, "x", false)
	withHeaders := strings.Replace(ca, "-----BEGIN CERTIFICATE-----\n", "-----BEGIN CERTIFICATE-----\nFoo: bar\n\n", 1)
	b := func(name, signer, bundle string) *certificatesv1.ClusterTrustBundle {
		return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: bundle}}
	}
	for _, tc := range []struct {
		what string
		b    *certificatesv1.ClusterTrustBundle
		want string
	}{
		{"no signer", b("anchors", "", ca+ca2), ""},
		{"signer-linked", b("example.com:signer:anchors", "example.com/signer", ca), ""},
		{"colon without signer", b("example.com:anchors", "", ca), `ClusterTrustBundle without signer name must not have ":" in its name`},
		{"wrong prefix", b("anchors", "example.com/signer", ca), "ClusterTrustBundle for signerName example.com/signer must be named with prefix example.com:signer:"},
		{"bad suffix", b("example.com:signer:UPPER", "example.com/signer", ca), "metadata.name"},
		{"bad signer", b("foo:anchors", "foo/anchors", ca), "should be a domain with at least two segments"},
		{"empty", b("anchors", "", ""), "at least one trust anchor must be provided"},
		{"not PEM", b("anchors", "", "hello"), "at least one trust anchor must be provided"},
		{"leaf", b("anchors", "", leaf), "entry 0 does not have the CA bit set"},
		{"headers", b("anchors", "", ca2+withHeaders), "entry 1 has PEM block headers"},
		{"key block", b("anchors", "", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}))), "entry 0 has bad block type: PRIVATE KEY"},
		{"garbage", b("anchors", "", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2}}))), "entry 0 does not parse as X.509"},
		{"duplicate", b("anchors", "", ca+ca2+ca), "duplicate trust anchor (indices [0 2])"},
		{"too big", b("anchors", "", strings.Repeat("x", maxTrustBundleSize+1)), "Too long"},
	} {
		errs := ClusterTrustBundle(tc.b)
		wantErr(t, tc.what, errs, tc.want)
		for _, e := range errs {
			if e.Field == "spec.trustBundle" && strings.Contains(e.Error(), "BEGIN") {
				t.Errorf("%s: the error echoes the bundle: %v", tc.what, e)
			}
		}
	}
}

// The signer is immutable; an unchanged bundle is not parsed again.
func TestClusterTrustBundleUpdate(t *testing.T) {
	ca := pkitest.SelfSignedPEM(t, "x", true)
	old := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "example.com:signer:a", ResourceVersion: "1"},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/signer", TrustBundle: ca}}
	moved := old.DeepCopy()
	moved.Spec.SignerName = "example.com/other"
	wantErr(t, "signer change", ClusterTrustBundleUpdate(moved, old), "spec.signerName: Invalid value: \"example.com/other\": field is immutable")

	// Stored before a rule tightened: an update leaving the bundle alone
	// passes, one changing it is checked.
	leaf := pkitest.SelfSignedPEM(t, "x", false)
	stale := old.DeepCopy()
	stale.Spec.TrustBundle = leaf
	relabeled := stale.DeepCopy()
	relabeled.Labels = map[string]string{"a": "b"}
	wantErr(t, "labels on an old bundle", ClusterTrustBundleUpdate(relabeled, stale), "")
	wantErr(t, "new bad bundle", ClusterTrustBundleUpdate(stale, old), "does not have the CA bit set")
}

// A projected clusterTrustBundle names one bundle (by a valid bundle
// name, without a selector) or a signer's bundles (with a valid selector),
// at a path inside the volume.
func TestClusterTrustBundleProjection(t *testing.T) {
	p := field.NewPath("spec", "volumes").Index(0).Child("projected")
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	for _, tc := range []struct {
		what string
		src  corev1.ClusterTrustBundleProjection
		want string
	}{
		{"by name", corev1.ClusterTrustBundleProjection{Name: ptr.To("anchors"), Path: "ca.pem"}, ""},
		{"by signer-linked name", corev1.ClusterTrustBundleProjection{Name: ptr.To("example.com:s:anchors"), Path: "ca.pem"}, ""},
		{"by signer", corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/s"), LabelSelector: sel, Path: "ca.pem"}, ""},
		{"by signer, nil selector", corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/s"), Path: "ca.pem"}, ""},
		{"both", corev1.ClusterTrustBundleProjection{Name: ptr.To("a"), SignerName: ptr.To("example.com/s"), Path: "ca.pem"}, "only one of name and signerName may be used"},
		{"neither", corev1.ClusterTrustBundleProjection{Path: "ca.pem"}, "either name or signerName must be specified"},
		{"empty name", corev1.ClusterTrustBundleProjection{Name: ptr.To(""), Path: "ca.pem"}, "must be a valid object name"},
		{"bad name", corev1.ClusterTrustBundleProjection{Name: ptr.To("Anchors"), Path: "ca.pem"}, "not a valid clustertrustbundlename"},
		{"name with selector", corev1.ClusterTrustBundleProjection{Name: ptr.To("a"), LabelSelector: sel, Path: "ca.pem"}, "labelSelector must be unset if name is specified"},
		{"bad signer", corev1.ClusterTrustBundleProjection{SignerName: ptr.To("nodomain"), Path: "ca.pem"}, "must be a fully qualified domain and path"},
		{"bad selector", corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/s"), LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b c"}}, Path: "ca.pem"}, "labelSelector.matchLabels"},
		{"no path", corev1.ClusterTrustBundleProjection{Name: ptr.To("a")}, "path: Required value"},
		{"escaping path", corev1.ClusterTrustBundleProjection{Name: ptr.To("a"), Path: "../ca.pem"}, "must not contain '..'"},
	} {
		src := tc.src
		errs := validateProjected(&corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &src}}}, p)
		wantErr(t, tc.what, errs, tc.want)
	}
	two := &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To("a"), Path: "ca.pem"}},
		{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To("b"), Path: "ca.pem"}}}}
	wantErr(t, "two sources at one path", validateProjected(two, p), "conflicting duplicate paths")
}
