package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kelp-project/kelp/server/pki/pkitest"
)

// A pod projecting a podCertificate waits (FailedMount: not issued yet)
// until a signer issues the kubelet's request; then its container reads
// the credential bundle (the key, then the chain) and the key and chain
// files, and the key is the certificate's. The signer is this test: it
// issues a day-long certificate (the default maxExpirationSeconds) from
// a CA of its own.
func TestPodCertificateVolume(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: certified}
spec:
  containers:
  - name: app
    image: busybox:1.35
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    volumeMounts: [{name: creds, mountPath: /run/creds}]
  volumes:
  - name: creds
    projected:
      sources:
      - podCertificate:
          signerName: e2e.example.com/test
          keyType: ECDSAP256
          credentialBundlePath: bundle.pem
          keyPath: key.pem
          certificateChainPath: chain.pem
`)
	reqs := c.cs.CertificatesV1().PodCertificateRequests("default")
	var req certificatesv1.PodCertificateRequest
	c.waitFor(60*time.Second, "the kubelet's PodCertificateRequest", func() bool {
		l, err := reqs.List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) == 0 {
			return false
		}
		req = l.Items[0]
		return true
	})
	if s := req.Spec; s.PodName != "certified" || string(s.NodeName) != c.node().Name || s.ServiceAccountName != "default" || *s.MaxExpirationSeconds != 86400 {
		t.Errorf("request spec %+v", s)
	}
	c.waitFor(60*time.Second, "the FailedMount event saying why the pod waits", func() bool {
		out, _ := c.kubectl("get", "events", "--field-selector", "involvedObject.name=certified,reason=FailedMount", "-o", "jsonpath={.items[*].message}")
		return strings.Contains(out, "credential bundle is not issued yet")
	})
	if p := c.pod("certified"); p.Status.Phase != corev1.PodPending {
		t.Errorf("phase %s before issuance, want Pending", p.Status.Phase)
	}

	stub, err := x509.ParseCertificateRequest(req.Spec.StubPKCS10Request)
	if err != nil || stub.CheckSignature() != nil {
		t.Fatalf("stub request: %v", err)
	}
	notBefore := time.Now().Truncate(time.Second)
	lifetime := time.Duration(*req.Spec.MaxExpirationSeconds) * time.Second
	chain := pkitest.IssuedPEM(t, "certified", stub.PublicKey, notBefore, lifetime)
	req.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions:       []metav1.Condition{{Type: "Issued", Status: metav1.ConditionTrue, Reason: "E2E", Message: "issued", LastTransitionTime: metav1.NewTime(notBefore)}},
		CertificateChain: chain, NotBefore: ptr.To(metav1.NewTime(notBefore)), NotAfter: ptr.To(metav1.NewTime(notBefore.Add(lifetime))),
		BeginRefreshAt: ptr.To(metav1.NewTime(notBefore.Add(lifetime / 2))),
	}
	if _, err := reqs.UpdateStatus(ctx, &req, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	read := func(name string) string {
		out, err := c.kubectl("exec", "certified", "--", "cat", "/run/creds/"+name)
		if err != nil {
			return ""
		}
		return out
	}
	c.waitFor(90*time.Second, "the credential files in the container", func() bool { return read("chain.pem") != "" })
	key, gotChain, bundle := read("key.pem"), read("chain.pem"), read("bundle.pem")
	if gotChain != chain {
		t.Errorf("chain.pem %q, want the issued certificate", gotChain)
	}
	if bundle != key+chain {
		t.Errorf("bundle.pem is not the key then the chain:\n%s", bundle)
	}
	block, _ := pem.Decode([]byte(key))
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("key.pem %q", key)
	}
	priv, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !priv.(crypto.Signer).Public().(*ecdsa.PublicKey).Equal(stub.PublicKey) {
		t.Error("key.pem is not the key the certificate was issued to")
	}
}
