package controllers

import (
	"context"
	"errors"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func TestPodClaim(t *testing.T) {
	kind := apps.SchemeGroupVersion.WithKind("ReplicaSet")
	owner := &apps.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs", UID: "owner"}}
	yes := true
	pod := func(name string, match bool, ctrl types.UID) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
		if match {
			p.Labels = map[string]string{"app": "a"}
		}
		if ctrl != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", UID: ctrl, Controller: &yes}}
		}
		return p
	}
	now := metav1.Now()
	deletingOrphan := pod("deleting", true, "")
	deletingOrphan.DeletionTimestamp = &now
	pods := []*v1.Pod{
		pod("owned", true, "owner"),
		pod("stray", false, "owner"),
		pod("orphan", true, ""),
		pod("other", true, "other"),
		pod("nomatch", false, ""),
		deletingOrphan,
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "a"})
	newClient := func() *fake.Clientset {
		c := fake.NewSimpleClientset()
		for _, p := range pods {
			_, _ = c.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{})
		}
		return c
	}
	ctrlOf := func(c *fake.Clientset, name string) types.UID {
		p, err := c.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ref := metav1.GetControllerOf(p); ref != nil {
			return ref.UID
		}
		return ""
	}
	names := func(ps []*v1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}

	c := newClient()
	claim := &PodClaim{Client: c, Owner: owner, Kind: kind, Selector: sel, CanAdopt: func() error { return nil }}
	got, err := claim.Claim(context.Background(), pods)
	if err != nil {
		t.Fatal(err)
	}
	if n := names(got); len(n) != 2 || n[0] != "owned" || n[1] != "orphan" {
		t.Fatalf("claimed %v, want [owned orphan]", n)
	}
	if ctrlOf(c, "orphan") != "owner" || ctrlOf(c, "stray") != "" || ctrlOf(c, "other") != "other" || ctrlOf(c, "deleting") != "" {
		t.Fatalf("wrong owners after claim")
	}

	// Adoption refused: an error, the orphan left alone.
	c = newClient()
	claim = &PodClaim{Client: c, Owner: owner, Kind: kind, Selector: sel, CanAdopt: func() error { return errors.New("gone") }}
	got, err = claim.Claim(context.Background(), pods)
	if err == nil || len(got) != 1 || ctrlOf(c, "orphan") != "" {
		t.Fatalf("refused adoption: claimed %v, err %v", names(got), err)
	}

	// Owner being deleted: nothing adopted; released only if asked.
	dying := owner.DeepCopy()
	dying.DeletionTimestamp = &now
	for _, release := range []bool{false, true} {
		c = newClient()
		claim = &PodClaim{Client: c, Owner: dying, Kind: kind, Selector: sel, ReleaseWhileDeleting: release,
			CanAdopt: func() error { t.Fatal("CanAdopt called for a dying owner"); return nil }}
		got, err = claim.Claim(context.Background(), pods)
		if err != nil || len(got) != 1 || ctrlOf(c, "orphan") != "" {
			t.Fatalf("dying owner: claimed %v, err %v", names(got), err)
		}
		if released := ctrlOf(c, "stray") == ""; released != release {
			t.Fatalf("ReleaseWhileDeleting=%v: released %v", release, released)
		}
	}
}
