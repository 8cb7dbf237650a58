package manifests

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func TestRecordName(t *testing.T) {
	if got := recordName("local-storage.yaml"); got != "kelp-manifest-local-storage.yaml" {
		t.Errorf("a plain name: %q", got)
	}
	seen := map[string]string{}
	for _, file := range []string{"local-storage.yaml", "My_App.yaml", "my-app.yaml", "my_app.yaml", "a..b.json", "-x-.yml",
		"日本.yaml", "___.yaml", strings.Repeat("long", 100) + ".yaml", strings.Repeat("long", 100) + "2.yaml"} {
		name := recordName(file)
		if len(name) > 253 || !dnsSubdomain.MatchString(name) {
			t.Errorf("%q: %q is no ConfigMap name", file, name)
		}
		if prev, ok := seen[name]; ok {
			t.Errorf("%q and %q share the record %q", prev, file, name)
		}
		seen[name] = file
	}
}

func TestRecordRoundTrip(t *testing.T) {
	rec := &record{File: "a.yaml", SHA256: "abc", Error: "x", Objects: []ref{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "a", Created: true},
		{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass", Name: "b"},
	}}
	data, err := rec.data()
	if err != nil {
		t.Fatal(err)
	}
	got, err := recordFrom(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: recordName("a.yaml")}, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rec) {
		t.Errorf("round trip\n got %+v\nwant %+v", got, rec)
	}
	if _, err := recordFrom(&corev1.ConfigMap{Data: map[string]string{keyFile: "a.yaml", keyObjects: "{"}}); err == nil {
		t.Error("a record with broken objects read without error")
	}
	if _, err := recordFrom(&corev1.ConfigMap{Data: map[string]string{keyObjects: "[]"}}); err == nil {
		t.Error("a record without its file read without error")
	}
}

func TestToPrune(t *testing.T) {
	cm := func(name string, created bool) ref {
		return ref{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: name, Created: created}
	}
	ns := ref{APIVersion: "v1", Kind: "Namespace", Name: "app", Created: true}
	// The same Deployment at another version is the same object.
	deployBeta := ref{APIVersion: "apps/v1beta1", Kind: "Deployment", Namespace: "default", Name: "web", Created: true}
	deployV1 := ref{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web"}
	old := []ref{ns, cm("kept", true), cm("dropped", true), cm("adopted", false), cm("shared", true), deployBeta}
	keep := map[string]bool{cm("kept", true).key(): true, deployV1.key(): true}
	others := map[string]bool{cm("shared", true).key(): true}
	prune, leave := toPrune(old, keep, others)
	if want := []ref{cm("dropped", true), ns}; !reflect.DeepEqual(prune, want) {
		t.Errorf("prune %v, want %v (namespaced objects first)", prune, want)
	}
	if want := []ref{cm("adopted", false), cm("shared", true)}; !reflect.DeepEqual(leave, want) {
		t.Errorf("leave %v, want %v", leave, want)
	}
	// A removed file keeps nothing.
	if prune, _ := toPrune(old, nil, nil); len(prune) != 5 {
		t.Errorf("a removed file prunes %v, want the five objects it created", prune)
	}
}
