package history

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
)

func set(image string) *apps.StatefulSet {
	return &apps.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: apps.StatefulSetSpec{Template: v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}}}}}
}

// TestTemplatePatch: the patch replaces the whole template (a container
// the old template lacked goes away), as kubectl's rollout undo applies it.
func TestTemplatePatch(t *testing.T) {
	patch, err := TemplatePatch(set("nginx:1"))
	if err != nil {
		t.Fatal(err)
	}
	var shape map[string]map[string]map[string]interface{}
	if err := json.Unmarshal(patch, &shape); err != nil || shape["spec"]["template"]["$patch"] != "replace" || len(shape["spec"]) != 1 {
		t.Fatalf("patch %s (%v)", patch, err)
	}
	cur := set("nginx:2")
	cur.Spec.Template.Spec.Containers = append(cur.Spec.Template.Spec.Containers, v1.Container{Name: "extra", Image: "x"})
	orig, _ := json.Marshal(cur)
	out, err := strategicpatch.StrategicMergePatch(orig, patch, &apps.StatefulSet{})
	if err != nil {
		t.Fatal(err)
	}
	var undone apps.StatefulSet
	if err := json.Unmarshal(out, &undone); err != nil {
		t.Fatal(err)
	}
	if c := undone.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != "nginx:1" {
		t.Errorf("undone containers %+v", c)
	}
	again, _ := TemplatePatch(set("nginx:1"))
	if string(again) != string(patch) {
		t.Errorf("equal templates, different patches")
	}
}

// TestCreateCollision: a name held by other data moves the collision
// count on; the same data is found, not duplicated.
func TestCreateCollision(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	s := Store{Client: client}
	data := []byte(`{"spec":{"template":{"$patch":"replace"}}}`)
	hash := func(n *int32) string { return HashData(data, n) }
	taken := &apps.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: Name("web", hash(nil)), Namespace: "default"},
		Data: runtime.RawExtension{Raw: []byte(`{"other":true}`)}}
	if _, err := client.AppsV1().ControllerRevisions("default").Create(ctx, taken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rev := &apps.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "default"}, Data: runtime.RawExtension{Raw: data}, Revision: 1}
	got, n, err := s.Create(ctx, "web", rev, hash, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n == nil || *n != 1 || got.Name != Name("web", HashData(data, n)) || got.Labels[HashLabel] != HashData(data, n) {
		t.Fatalf("created %s labels %v with collision count %v", got.Name, got.Labels, n)
	}
	again, n2, err := s.Create(ctx, "web", rev, hash, n)
	if err != nil || again.Name != got.Name || *n2 != 1 {
		t.Fatalf("second create: %v %v %v", again, n2, err)
	}
	if HashData(data, nil) == HashData(data, n) || HashData(data, nil) != HashData(append([]byte(nil), data...), nil) {
		t.Error("the hash must be stable and depend on the collision count")
	}
}

// TestPrune: the oldest non-live revisions go, up to the excess.
func TestPrune(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	var revs []*apps.ControllerRevision
	for i := int64(4); i >= 1; i-- {
		r := &apps.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r%d", i), Namespace: "default"}, Revision: i}
		if _, err := client.AppsV1().ControllerRevisions("default").Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		revs = append(revs, r)
	}
	s := Store{Client: client}
	if err := s.Prune(ctx, revs, 2, func(r *apps.ControllerRevision) bool { return r.Name == "r1" }); err != nil {
		t.Fatal(err)
	}
	l, _ := client.AppsV1().ControllerRevisions("default").List(ctx, metav1.ListOptions{})
	var names []string
	for _, r := range l.Items {
		names = append(names, r.Name)
	}
	if fmt.Sprint(names) != "[r1 r4]" {
		t.Errorf("kept %v, want r1 (live) and r4", names)
	}
}
