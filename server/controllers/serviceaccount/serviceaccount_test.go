package serviceaccount

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

const testCA = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"

func namespace(name string, phase corev1.NamespacePhase) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: phase}}
	if phase == corev1.NamespaceTerminating {
		now := metav1.Now()
		ns.DeletionTimestamp = &now
	}
	return ns
}

type runner interface{ Run(context.Context, int) }

// startAll starts the factory and the controllers; everything is stopped
// and joined at test cleanup.
func startAll(t *testing.T, f informers.SharedInformerFactory, rs ...runner) {
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	done := make(chan struct{}, len(rs))
	for _, r := range rs {
		go func() { r.Run(ctx, 2); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		cancel()
		for range rs {
			<-done
		}
		f.Shutdown()
	})
}

func poll(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func exists(err error) (bool, error) {
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func TestDefaultServiceAccount(t *testing.T) {
	cs := fake.NewSimpleClientset(
		namespace("existing", corev1.NamespaceActive),
		namespace("dying", corev1.NamespaceTerminating),
	)
	f := informers.NewSharedInformerFactory(cs, 0)
	startAll(t, f, New(cs, f))
	ctx := context.Background()

	poll(t, "default SA in existing namespace", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts("existing").Get(ctx, "default", metav1.GetOptions{})
		return exists(err)
	})

	if _, err := cs.CoreV1().Namespaces().Create(ctx, namespace("fresh", corev1.NamespaceActive), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "default SA in new namespace", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts("fresh").Get(ctx, "default", metav1.GetOptions{})
		return exists(err)
	})

	// Deleted: recreated by a second create.
	if err := cs.CoreV1().ServiceAccounts("fresh").Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "default SA recreated", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts("fresh").Get(ctx, "default", metav1.GetOptions{})
		return exists(err)
	})
	creates := 0
	for _, a := range cs.Actions() {
		if a.Matches("create", "serviceaccounts") && a.GetNamespace() == "fresh" {
			creates++
		}
	}
	if creates < 2 {
		t.Errorf("default SA creates in fresh = %d, want >= 2 (initial + after delete)", creates)
	}

	// Other service accounts are not managed: deleting one is not undone.
	if _, err := cs.CoreV1().ServiceAccounts("fresh").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: "fresh"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ServiceAccounts("fresh").Delete(ctx, "builder", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := cs.CoreV1().ServiceAccounts("fresh").Get(ctx, "builder", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("non-default SA was recreated: %v", err)
	}

	// Terminating namespaces get nothing.
	if _, err := cs.CoreV1().ServiceAccounts("dying").Get(ctx, "default", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("default SA created in terminating namespace: %v", err)
	}
}

func TestRootCAPublisher(t *testing.T) {
	cs := fake.NewSimpleClientset(
		namespace("existing", corev1.NamespaceActive),
		namespace("dying", corev1.NamespaceTerminating),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "existing"}, Data: map[string]string{"k": "v"}},
	)
	f := informers.NewSharedInformerFactory(cs, 0)
	startAll(t, f, NewRootCAPublisher(cs, f, []byte(testCA)))
	ctx := context.Background()

	correct := func(ns string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, RootCAConfigMapName, metav1.GetOptions{})
			if ok, err := exists(err); !ok {
				return false, err
			}
			return len(cm.Data) == 1 && cm.Data[RootCAKey] == testCA && len(cm.BinaryData) == 0 &&
				cm.Annotations[DescriptionAnnotation] != "", nil
		}
	}
	poll(t, "kube-root-ca.crt in existing namespace", correct("existing"))

	if _, err := cs.CoreV1().Namespaces().Create(ctx, namespace("fresh", corev1.NamespaceActive), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "kube-root-ca.crt in new namespace", correct("fresh"))

	// Edited: data restored, extra keys dropped, user labels kept.
	cm, err := cs.CoreV1().ConfigMaps("fresh").Get(ctx, RootCAConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{RootCAKey: "tampered", "extra": "x"}
	cm.Labels = map[string]string{"team": "a"}
	if _, err := cs.CoreV1().ConfigMaps("fresh").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "kube-root-ca.crt repaired", correct("fresh"))
	cm, err = cs.CoreV1().ConfigMaps("fresh").Get(ctx, RootCAConfigMapName, metav1.GetOptions{})
	if err != nil || cm.Labels["team"] != "a" {
		t.Errorf("repair dropped labels: %v %+v", err, cm)
	}

	// Deleted: recreated.
	if err := cs.CoreV1().ConfigMaps("fresh").Delete(ctx, RootCAConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "kube-root-ca.crt recreated", correct("fresh"))

	// Unrelated config maps are untouched; terminating namespaces get none.
	other, err := cs.CoreV1().ConfigMaps("existing").Get(ctx, "other", metav1.GetOptions{})
	if err != nil || other.Data["k"] != "v" || len(other.Data) != 1 {
		t.Errorf("unrelated configmap changed: %v %+v", err, other)
	}
	if _, err := cs.CoreV1().ConfigMaps("dying").Get(ctx, RootCAConfigMapName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("kube-root-ca.crt created in terminating namespace: %v", err)
	}
}
