package kubelet

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
)

// Upstream's kubelet timings of pod certificates
// (pkg/kubelet/podcertificate).
const (
	// podCertificateAbandonAfter: a request the informer has not shown
	// this long after its creation is taken as deleted, and made again.
	podCertificateAbandonAfter = 10 * time.Minute
	// podCertificateRefreshOverdue: this long past beginRefreshAt
	// without a new certificate, the pod gets a CertificateOverdueForRefresh
	// event.
	podCertificateRefreshOverdue = 10 * time.Minute
	// podCertificateJitter bounds the random delay added to each
	// beginRefreshAt and abandonment, so the node's projections do not
	// all ask at once.
	podCertificateJitter = 5 * time.Minute
)

// errNotIssuedYet is upstream's word for a projection still waiting for
// its first certificate: the volume fails, so the pod does not start and
// its FailedMount event says why.
var errNotIssuedYet = errors.New("credential bundle is not issued yet")

// podCertificates answers the podCertificate projections of the node's
// pods, as upstream's kubelet IssuingManager. For each projection (pod,
// volume, source index) it generates a private key of the source's
// keyType, creates a PodCertificateRequest (the stub PKCS#10 request
// signed by that key is the proof of possession; owned by the pod, so
// the garbage collector removes it with the pod), and waits for the
// signer: the requests of this node are followed by one informer
// (spec.nodeName=<node>, what the Node authorizer allows), started by
// the first pod that projects one, whose changes wake the owning pod's
// worker. Issued, the key and chain are the projection's files; at
// beginRefreshAt (plus jitter) a new key is requested while the old
// credentials stay in place, and swapped in once issued. Denied or
// Failed is an event on the pod and final for that projection, as
// upstream: the pod keeps waiting (or, once running, keeps its last
// files) until it is recreated.
type podCertificates struct {
	k *Kubelet

	informer *lazyInformer[certlisters.PodCertificateRequestLister]

	mu      sync.Mutex
	records map[projectionKey]*podCredential
	// now is the clock; tests move it.
	now func() time.Time
}

// projectionKey names one podCertificate source of one pod.
type projectionKey struct {
	pod    types.UID
	volume string
	source int
}

// podCredential is one projection's state.
type podCredential struct {
	// key and chain are the issued credentials (PEM), nil until the first
	// certificate; beginRefreshAt and notAfter are that certificate's.
	key, chain               []byte
	beginRefreshAt, notAfter time.Time
	// pending is the request awaiting its signer ("" for none), with the
	// private key it is for and when it is taken as deleted.
	pending    string
	pendingKey []byte
	abandonAt  time.Time
	// refused is the final Denied or Failed answer.
	refused error
	// The warnings already given for this certificate.
	overdueSaid, expiredSaid, userSaid bool
}

func newPodCertificates(k *Kubelet) *podCertificates {
	c := &podCertificates{k: k, records: map[projectionKey]*podCredential{}, now: time.Now}
	c.informer = newLazyInformer("PodCertificateRequest", func(ctx context.Context) (cache.SharedIndexInformer, certlisters.PodCertificateRequestLister) {
		node := c.k.cfg.NodeName
		factory := informers.NewSharedInformerFactoryWithOptions(c.k.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
		}))
		inf := factory.Certificates().V1().PodCertificateRequests()
		wake := func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if r, ok := obj.(*certificatesv1.PodCertificateRequest); ok {
				c.k.kickPod(r.Spec.PodUID)
			}
		}
		_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: wake, DeleteFunc: wake, UpdateFunc: func(_, obj any) { wake(obj) },
		})
		factory.Start(ctx.Done())
		return inf.Informer(), inf.Lister()
	})
	return c
}

// credentials returns the projection's private key and certificate chain
// (PEM), moving its state along: creating the first request, taking an
// answer, asking for a refresh when due.
func (c *podCertificates) credentials(ctx context.Context, pod *corev1.Pod, volume string, index int, src *corev1.PodCertificateProjection) ([]byte, []byte, error) {
	lister, err := c.informer.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	key := projectionKey{pod.UID, volume, index}
	live := c.k.livePods()
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.records[key]
	if rec == nil {
		// Forget the projections of pods whose workers have ended.
		for k := range c.records {
			if !live[k.pod] {
				delete(c.records, k)
			}
		}
		rec = &podCredential{}
		c.records[key] = rec
	}
	if src.User != nil && !rec.userSaid {
		rec.userSaid = true
		c.k.event(pod, corev1.EventTypeWarning, "PodCertificateUserIgnored",
			"kelp does not set the owner of podCertificate files (user %d): they are the volume's, mode 0600", *src.User)
	}
	now := c.now()
	if rec.refused != nil {
		return nil, nil, rec.refused
	}
	if rec.pending != "" {
		if err := c.answer(pod, lister, rec, now); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case rec.chain == nil && rec.pending == "":
		if err := c.request(ctx, pod, src, rec, now); err != nil {
			return nil, nil, fmt.Errorf("while creating initial PodCertificateRequest: %w", err)
		}
		return nil, nil, errNotIssuedYet
	case rec.chain == nil:
		return nil, nil, errNotIssuedYet
	case !now.Before(rec.beginRefreshAt):
		if now.After(rec.beginRefreshAt.Add(podCertificateRefreshOverdue)) && !rec.overdueSaid {
			rec.overdueSaid = true
			c.k.event(pod, corev1.EventTypeWarning, "CertificateOverdueForRefresh", "PodCertificate refresh overdue")
		}
		if now.After(rec.notAfter) && !rec.expiredSaid {
			rec.expiredSaid = true
			c.k.event(pod, corev1.EventTypeWarning, "CertificateExpired", "PodCertificate expired")
		}
		if rec.pending == "" {
			// The current credentials serve until the new ones come.
			if err := c.request(ctx, pod, src, rec, now); err != nil {
				logrus.WithError(err).WithField("pod", pod.Namespace+"/"+pod.Name).Warn("while creating refresh PodCertificateRequest")
			}
		}
	}
	return rec.key, rec.chain, nil
}

// answer looks at the pending request: issued, its certificate becomes
// the projection's; denied or failed, the projection stops with an event;
// gone for longer than the informer could lag, it is asked for again.
func (c *podCertificates) answer(pod *corev1.Pod, lister certlisters.PodCertificateRequestLister, rec *podCredential, now time.Time) error {
	r, err := lister.PodCertificateRequests(pod.Namespace).Get(rec.pending)
	if apierrors.IsNotFound(err) {
		if now.After(rec.abandonAt) {
			rec.pending, rec.pendingKey = "", nil
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("while getting PodCertificateRequest %q: %w", pod.Namespace+"/"+rec.pending, err)
	}
	for _, cond := range r.Status.Conditions {
		if cond.Status != metav1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			verb := "was denied"
			final := "was permanently denied"
			if cond.Type == certificatesv1.PodCertificateRequestConditionTypeFailed {
				verb, final = "failed", "was permanently failed"
			}
			c.k.event(pod, corev1.EventTypeWarning, cond.Type, "PodCertificateRequest %s %s, reason=%q, message=%q",
				r.Namespace+"/"+r.Name, verb, cond.Reason, cond.Message)
			rec.refused = fmt.Errorf("PodCertificateRequest %s: reason=%q message=%q", final, cond.Reason, cond.Message)
			rec.pending, rec.pendingKey = "", nil
			return rec.refused
		case certificatesv1.PodCertificateRequestConditionTypeIssued:
			if r.Status.BeginRefreshAt == nil || r.Status.NotAfter == nil {
				continue
			}
			rec.key, rec.chain = rec.pendingKey, cleanCertificateChain([]byte(r.Status.CertificateChain))
			rec.beginRefreshAt = r.Status.BeginRefreshAt.Add(jitter())
			rec.notAfter = r.Status.NotAfter.Time
			rec.pending, rec.pendingKey = "", nil
			rec.overdueSaid, rec.expiredSaid = false, false
			return nil
		}
	}
	return nil
}

// request creates a PodCertificateRequest for a new key of the source's
// type, naming the pod, its service account and this node by name and
// UID (what NodeRestriction checks).
func (c *podCertificates) request(ctx context.Context, pod *corev1.Pod, src *corev1.PodCertificateProjection, rec *podCredential, now time.Time) error {
	sa, err := c.k.client.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, pod.Spec.ServiceAccountName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("while fetching service account: %w", err)
	}
	nodeUID, err := c.k.nodeUID(ctx)
	if err != nil {
		return err
	}
	priv, stub, err := newPodCertificateKey(src.KeyType)
	if err != nil {
		return fmt.Errorf("while generating keypair: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("while marshaling key to PKCS#8: %w", err)
	}
	r := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: "req-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: src.SignerName, PodName: pod.Name, PodUID: pod.UID,
			ServiceAccountName: pod.Spec.ServiceAccountName, ServiceAccountUID: sa.UID,
			NodeName: types.NodeName(c.k.cfg.NodeName), NodeUID: nodeUID,
			MaxExpirationSeconds: src.MaxExpirationSeconds, StubPKCS10Request: stub,
			UnverifiedUserAnnotations: src.UserAnnotations,
		},
	}
	r, err = c.k.client.CertificatesV1().PodCertificateRequests(pod.Namespace).Create(ctx, r, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("while creating on API: %w", err)
	}
	rec.pending = r.Name
	rec.pendingKey = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	rec.abandonAt = now.Add(podCertificateAbandonAfter + jitter())
	return nil
}

// newPodCertificateKey generates a private key of keyType (the names pod
// validation admits) and the stub PKCS#10 request it signs: empty, as
// upstream's kubelet sends it; the signature is the proof of possession.
func newPodCertificateKey(keyType string) (crypto.Signer, []byte, error) {
	var priv crypto.Signer
	var err error
	switch keyType {
	case "RSA3072":
		priv, err = rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		priv, err = rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		priv, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		priv, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, nil, fmt.Errorf("unknown key type %q", keyType)
	}
	if err != nil {
		return nil, nil, err
	}
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, priv)
	if err != nil {
		return nil, nil, fmt.Errorf("while generating stub PKCS#10 request: %w", err)
	}
	return priv, stub, nil
}

// cleanCertificateChain keeps only the chain's PEM blocks, header-less,
// as upstream: no text between or around them reaches the pod.
func cleanCertificateChain(in []byte) []byte {
	var out bytes.Buffer
	for rest := in; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out.Bytes()
		}
		out.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes}))
	}
}

func jitter() time.Duration {
	return time.Duration(mathrand.Int64N(int64(podCertificateJitter)))
}

// podCertificateFiles is a podCertificate projection's files: the
// credential bundle (the private key, then the chain), and/or the key and
// the chain apart, each 0600 when the source names a user or the pod has
// an fsGroup (which then makes them group-readable), else the volume's
// default mode, as upstream's projection.
func (k *Kubelet) podCertificateFiles(ctx context.Context, pod *corev1.Pod, volume string, index int, src *corev1.PodCertificateProjection, def *int32) (map[string]volumeFile, error) {
	key, chain, err := k.podCertificates.credentials(ctx, pod, volume, index, src)
	if err != nil {
		return nil, err
	}
	mode := fileMode(nil, def)
	if _, ok := fsGroupOf(pod); ok || src.User != nil {
		mode = os.FileMode(0o600)
	}
	files := map[string]volumeFile{}
	if src.CredentialBundlePath != "" {
		files[src.CredentialBundlePath] = volumeFile{append(append([]byte{}, key...), chain...), mode}
	}
	if src.KeyPath != "" {
		files[src.KeyPath] = volumeFile{key, mode}
	}
	if src.CertificateChainPath != "" {
		files[src.CertificateChainPath] = volumeFile{chain, mode}
	}
	return files, nil
}

// kickPod wakes the worker of the pod with uid, if it runs here.
func (k *Kubelet) kickPod(uid types.UID) {
	k.mu.Lock()
	w := k.workers[uid]
	k.mu.Unlock()
	if w != nil {
		w.kick()
	}
}

// livePods is the set of pods with a worker.
func (k *Kubelet) livePods() map[types.UID]bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	live := make(map[types.UID]bool, len(k.workers))
	for uid := range k.workers {
		live[uid] = true
	}
	return live
}

// nodeUID is this node's UID, from the status reporter's copy once it
// has one, else read.
func (k *Kubelet) nodeUID(ctx context.Context) (types.UID, error) {
	if k.node != nil {
		if n := k.node(); n != nil && n.UID != "" {
			return n.UID, nil
		}
	}
	n, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("while getting node object: %w", err)
	}
	return n.UID, nil
}
