package kubelet

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A pod whose RuntimeClass names a handler other than runc gets no
// sandbox and no containers, and an event that says why; one whose class
// names runc runs.
func TestRuntimeHandler(t *testing.T) {
	for _, tc := range []struct {
		name, class, handler string
		runs                 bool
		event                string
	}{
		{name: "no class", runs: true},
		{name: "runc", class: "plain", handler: "runc", runs: true},
		{name: "another handler", class: "sandboxed", handler: "kata", event: `RuntimeHandler "kata" of RuntimeClass "sandboxed" not supported`},
		{name: "missing class", class: "gone", event: `RuntimeClass "gone" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("web", "app")
			if tc.class != "" {
				pod.Spec.RuntimeClassName = ptr.To(tc.class)
			}
			tk := newTestKubelet(t, pod)
			if tc.handler != "" {
				rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: tc.class}, Handler: tc.handler}
				if _, err := tk.client.NodeV1().RuntimeClasses().Create(t.Context(), rc, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			w := tk.worker(t, pod)
			tk.sync(t, w, pod)
			list, _ := tk.rt.ListContainers(t.Context(), nil)
			if started := len(tk.net.Setups()) > 0 || len(list) > 0; started != tc.runs {
				t.Fatalf("sandboxes %v, containers %d; want started=%v", tk.net.Setups(), len(list), tc.runs)
			}
			if tc.event == "" {
				return
			}
			got := eventsWith(tk, "FailedCreatePodSandBox")
			if len(got) != 1 || !strings.Contains(got[0], tc.event) {
				t.Errorf("events %q, want one FailedCreatePodSandBox saying %q", got, tc.event)
			}
			if st := tk.apiPod(t, pod).Status; st.Phase == corev1.PodFailed {
				t.Errorf("the pod failed; upstream leaves it Pending and retries")
			}
		})
	}
}
