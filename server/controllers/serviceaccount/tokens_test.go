package serviceaccount

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// fakeSigner mints "token-for-<sa uid>-<secret>".
type fakeSigner struct{}

func (fakeSigner) LegacyToken(sa *corev1.ServiceAccount, s *corev1.Secret) (string, error) {
	return "token-for-" + string(sa.UID) + "-" + s.Name, nil
}

func tokenSecret(name, sa, uid string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("s-" + name),
		Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}}, Type: corev1.SecretTypeServiceAccountToken}
	if uid != "" {
		s.Annotations[corev1.ServiceAccountUIDKey] = uid
	}
	return s
}

func TestTokensController(t *testing.T) {
	app := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: "app-uid"}}
	cs := fake.NewClientset(app,
		tokenSecret("app-token", "app", ""),
		tokenSecret("stale-token", "app", "old-uid"),
		tokenSecret("orphan-token", "ghost", ""),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "opaque", Annotations: map[string]string{corev1.ServiceAccountNameKey: "app"}}},
	)
	f := informers.NewSharedInformerFactory(cs, 0)
	startAll(t, f, NewTokensController(cs, f, fakeSigner{}, []byte(testCA)))
	secrets := cs.CoreV1().Secrets("ns")

	poll(t, "app-token filled in", func(ctx context.Context) (bool, error) {
		s, err := secrets.Get(ctx, "app-token", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return string(s.Data["token"]) == "token-for-app-uid-app-token" && string(s.Data["ca.crt"]) == testCA &&
			string(s.Data["namespace"]) == "ns" && s.Annotations[corev1.ServiceAccountUIDKey] == "app-uid", nil
	})
	// Made for an earlier account of that name, or for none: deleted.
	for _, name := range []string{"stale-token", "orphan-token"} {
		poll(t, name+" deleted", func(ctx context.Context) (bool, error) {
			_, err := secrets.Get(ctx, name, metav1.GetOptions{})
			ok, err := exists(err)
			return !ok, err
		})
	}
	// Other Secrets are left alone.
	if s, err := secrets.Get(context.Background(), "opaque", metav1.GetOptions{}); err != nil || len(s.Data) != 0 {
		t.Errorf("opaque Secret touched: %+v %v", s, err)
	}
	// A token someone removed is minted again; deleting the account takes
	// its Secrets with it.
	s, _ := secrets.Get(context.Background(), "app-token", metav1.GetOptions{})
	s.Data = nil
	if _, err := secrets.Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "app-token refilled", func(ctx context.Context) (bool, error) {
		s, err := secrets.Get(ctx, "app-token", metav1.GetOptions{})
		return err == nil && len(s.Data["token"]) > 0, err
	})
	if err := cs.CoreV1().ServiceAccounts("ns").Delete(context.Background(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "app-token deleted with its account", func(ctx context.Context) (bool, error) {
		_, err := secrets.Get(ctx, "app-token", metav1.GetOptions{})
		ok, err := exists(err)
		return !ok, err
	})
}
