package serviceaccount

import (
	"bytes"
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kelp-project/kelp/server/controllers"
)

// Signer mints the token of a legacy kubernetes.io/service-account-token
// Secret. The controller signs in-process, as upstream's token controller
// does inside kube-controller-manager with the service-account private
// key: a legacy token never expires and is bound to its Secret, so no API
// (TokenRequest mints expiring tokens, and only for existing objects)
// could produce it. The server passes its auth.TokenSigner.
type Signer interface {
	LegacyToken(sa *corev1.ServiceAccount, secret *corev1.Secret) (string, error)
}

// TokensController is upstream's tokens controller for legacy
// service-account token Secrets: a Secret of type
// kubernetes.io/service-account-token annotated with its ServiceAccount's
// name gets the keys token, ca.crt and namespace, and the account's UID
// annotation. A Secret whose ServiceAccount is gone, or has another UID
// than the Secret's annotation, is deleted, as upstream does: its token
// would not authenticate anyway.
type TokensController struct {
	loop     controllers.Loop
	client   kubernetes.Interface
	signer   Signer
	caPEM    []byte
	secrets  corelisters.SecretLister
	accounts corelisters.ServiceAccountLister
}

// NewTokensController returns the token controller. The factory must be
// started by the caller.
func NewTokensController(client kubernetes.Interface, factory informers.SharedInformerFactory, signer Signer, caPEM []byte) *TokensController {
	secInf := factory.Core().V1().Secrets()
	saInf := factory.Core().V1().ServiceAccounts()
	c := &TokensController{client: client, signer: signer, caPEM: caPEM, secrets: secInf.Lister(), accounts: saInf.Lister()}
	c.loop = controllers.Loop{Name: "serviceaccount-token", Queue: controllers.NewQueue("serviceaccount-token"),
		Synced: []cache.InformerSynced{secInf.Informer().HasSynced, saInf.Informer().HasSynced}, Sync: c.sync}
	_, _ = secInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueSecret,
		UpdateFunc: func(_, o interface{}) { c.enqueueSecret(o) },
	})
	// An account's arrival or departure concerns the Secrets naming it.
	accountChanged := func(o interface{}) {
		if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = t.Obj
		}
		if sa, ok := o.(*corev1.ServiceAccount); ok {
			c.enqueueAccountSecrets(sa.Namespace, sa.Name)
		}
	}
	_, _ = saInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: accountChanged, DeleteFunc: accountChanged})
	return c
}

// Run runs workers until ctx is done.
func (c *TokensController) Run(ctx context.Context, workers int) { c.loop.Run(ctx, workers) }

func (c *TokensController) enqueueSecret(o interface{}) {
	if s, ok := o.(*corev1.Secret); ok && s.Type == corev1.SecretTypeServiceAccountToken {
		if key, err := cache.MetaNamespaceKeyFunc(s); err == nil {
			c.loop.Queue.Add(key)
		}
	}
}

func (c *TokensController) enqueueAccountSecrets(namespace, name string) {
	list, _ := c.secrets.Secrets(namespace).List(labels.Everything())
	for _, s := range list {
		if s.Type == corev1.SecretTypeServiceAccountToken && s.Annotations[corev1.ServiceAccountNameKey] == name {
			c.enqueueSecret(s)
		}
	}
}

func (c *TokensController) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	secret, err := c.secrets.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	saName := secret.Annotations[corev1.ServiceAccountNameKey]
	if secret.Type != corev1.SecretTypeServiceAccountToken || saName == "" || secret.DeletionTimestamp != nil {
		return nil
	}
	sa, err := c.account(ctx, ns, saName)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	// The account is gone, or this Secret was made for an earlier one of
	// the same name.
	if uid := secret.Annotations[corev1.ServiceAccountUIDKey]; sa == nil || (uid != "" && uid != string(sa.UID)) {
		err := c.client.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &secret.UID}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if secret.Annotations[corev1.ServiceAccountUIDKey] == string(sa.UID) && len(secret.Data[corev1.ServiceAccountTokenKey]) > 0 &&
		bytes.Equal(secret.Data[corev1.ServiceAccountRootCAKey], c.caPEM) && string(secret.Data[corev1.ServiceAccountNamespaceKey]) == ns {
		return nil
	}
	secret = secret.DeepCopy()
	if len(secret.Data[corev1.ServiceAccountTokenKey]) == 0 {
		token, err := c.signer.LegacyToken(sa, secret)
		if err != nil {
			return err
		}
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[corev1.ServiceAccountTokenKey] = []byte(token)
	}
	secret.Data[corev1.ServiceAccountRootCAKey] = c.caPEM
	secret.Data[corev1.ServiceAccountNamespaceKey] = []byte(ns)
	secret.Annotations[corev1.ServiceAccountUIDKey] = string(sa.UID)
	// A conflict means the lister is stale; the update event requeues us.
	_, err = c.client.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// account reads the ServiceAccount from the cache, and from the API when
// the cache lacks it (an account created a moment before its Secret may
// not have reached the informer; deleting the Secret for that would be
// wrong).
func (c *TokensController) account(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	sa, err := c.accounts.ServiceAccounts(ns).Get(name)
	if apierrors.IsNotFound(err) {
		sa, err = c.client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	return sa, nil
}
