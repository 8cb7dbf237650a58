package auth

import (
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func (f fakeObjects) PodCertificateRequest(namespace, name string) (*certificatesv1.PodCertificateRequest, error) {
	for _, r := range f.pcrs {
		if r.Namespace == namespace && r.Name == name {
			return r, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "certificates.k8s.io", Resource: "podcertificaterequests"}, name)
}

// A node creates PodCertificateRequests (admission judges them), reads its
// own, lists and watches only by spec.nodeName=<itself>, and never writes
// their status or deletes them.
func TestNodeAuthorizerPodCertificateRequests(t *testing.T) {
	objs := fakeObjects{pcrs: []*certificatesv1.PodCertificateRequest{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "mine"}, Spec: certificatesv1.PodCertificateRequestSpec{NodeName: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "theirs"}, Spec: certificatesv1.PodCertificateRequestSpec{NodeName: "n2"}},
	}}
	az := NodeAuthorizer{Objects: objs}
	n1 := &User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}
	const g, r = "certificates.k8s.io", "podcertificaterequests"
	for _, tc := range []struct {
		name   string
		attrs  Attributes
		want   Decision
		reason string
	}{
		{"create", res("create", g, "default", r, "", ""), DecisionAllow, ""},
		{"get own", res("get", g, "default", r, "mine", ""), DecisionAllow, ""},
		{"get other node's", res("get", g, "default", r, "theirs", ""), DecisionNoOpinion, "no relationship found between node 'n1' and this object"},
		{"get missing", res("get", g, "default", r, "gone", ""), DecisionNoOpinion, "no relationship found between node 'n1' and this object"},
		{"watch own", withSelector(res("watch", g, "", r, "", ""), "spec.nodeName=n1"), DecisionAllow, ""},
		{"list all", res("list", g, "", r, "", ""), DecisionNoOpinion, "can only list/watch podcertificaterequests with nodeName field selector"},
		{"list other node's", withSelector(res("list", g, "", r, "", ""), "spec.nodeName=n2"), DecisionNoOpinion, "can only list/watch podcertificaterequests with nodeName field selector"},
		{"update status", res("update", g, "default", r, "mine", "status"), DecisionNoOpinion, "nodes may not access the status subresource of PodCertificateRequests"},
		{"delete", res("delete", g, "default", r, "mine", ""), DecisionNoOpinion, "nodes may not delete podcertificaterequests"},
	} {
		got, reason := az.Authorize(n1, tc.attrs)
		if got != tc.want || reason != tc.reason {
			t.Errorf("%s: %v %q, want %v %q", tc.name, got, reason, tc.want, tc.reason)
		}
	}
}
