package kubelet

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A pod name longer than a DNS label (the conformance suite makes them)
// must still give runc a host name it accepts: 63 characters at most,
// not ending in '-' or '.'.
func TestPodHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b-c"
	cases := []struct {
		name string
		pod  corev1.Pod
		want string
	}{
		{"pod name", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}}, "web-0"},
		{"spec.hostname wins", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}, Spec: corev1.PodSpec{Hostname: "db"}}, "db"},
		{"cut to 63, trailing dash trimmed", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: long}}, strings.Repeat("a", 62)},
		{"exactly 63 kept", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("x", 63)}}, strings.Repeat("x", 63)},
	}
	for _, c := range cases {
		if got := podHostname(&c.pod); got != c.want {
			t.Errorf("%s: podHostname = %q, want %q", c.name, got, c.want)
		}
	}
	k := &Kubelet{}
	k.cfg.ClusterDomain = "cluster.local"
	fqdn := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns"},
		Spec: corev1.PodSpec{Subdomain: "web", SetHostnameAsFQDN: ptr.To(true)}}
	if got, want := k.utsHostname(&fqdn), "web-0.web.ns.svc.cluster.local"; got != want {
		t.Errorf("setHostnameAsFQDN: %q, want %q", got, want)
	}
	fqdn.Spec.Subdomain = ""
	if got := k.utsHostname(&fqdn); got != "web-0" {
		t.Errorf("setHostnameAsFQDN without a subdomain: %q, want the short name", got)
	}
}
