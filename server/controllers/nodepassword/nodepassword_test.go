package nodepassword

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kelp-project/kelp/server/join"
)

func secret(node string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: join.PasswordSecretName(node), Namespace: metav1.NamespaceSystem}}
}

// Deleting a Node deletes its password Secret; a password whose Node was
// never seen deleted (an agent between its join and its registration)
// and the passwords of other nodes stay.
func TestDeletedNodeForgetsItsPassword(t *testing.T) {
	cs := fake.NewSimpleClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
		secret("a"), secret("b"), secret("joining"))
	// The fake clientset drops events between an informer's list and its
	// watch: the delete waits until the Node watch has begun.
	watching := make(chan struct{})
	var once sync.Once
	cs.PrependWatchReactor("nodes", func(clienttesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(watching) })
		return false, nil, nil
	})
	f := informers.NewSharedInformerFactory(cs, 0)
	c := New(cs, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	go c.Run(ctx, 1)
	f.WaitForCacheSync(ctx.Done())
	<-watching
	time.Sleep(100 * time.Millisecond) // the tracker registers the watch just after the reactor
	if err := cs.CoreV1().Nodes().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, join.PasswordSecretName("a"), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("a's password outlived its Node: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	for _, n := range []string{"b", "joining"} {
		if _, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, join.PasswordSecretName(n), metav1.GetOptions{}); err != nil {
			t.Errorf("%s's password: %v", n, err)
		}
	}
}

// A Node deleted and registered again before the sync keeps its password.
func TestReregisteredNodeKeepsItsPassword(t *testing.T) {
	cs := fake.NewSimpleClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, secret("a"))
	f := informers.NewSharedInformerFactory(cs, 0)
	c := New(cs, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	if err := c.sync(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, join.PasswordSecretName("a"), metav1.GetOptions{}); err != nil {
		t.Errorf("the password of a live node was deleted: %v", err)
	}
}
