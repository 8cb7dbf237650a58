package registry

import (
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kelp-project/kelp/server/apiserver/auth"
	"github.com/kelp-project/kelp/server/apiserver/defaults"
	"github.com/kelp-project/kelp/server/apiserver/validation"
)

// certificateSigningRequests: a request for a certificate from a signer,
// as upstream's certificates strategy. The requester is recorded from the
// request's user; the main endpoint changes metadata only, /approval the
// conditions (approving or denying), /status the certificate and the
// other conditions. The CertificateApproval and CertificateSigning
// admission checks ask the authorizer for approve or sign on the signer.
// No signer of kelp's issues certificates for these requests: a request
// for one of the kubernetes.io signers stays approved and unissued (the
// node join path issues kelp's node certificates itself).
func certificateSigningRequests() *Resource {
	approval := Subresource{Name: "approval", Verbs: []string{"get", "patch", "update"}, GVK: gvk("CertificateSigningRequest"),
		Kind: StatusLikeSubresource, Prepare: csrApprovalPrepare,
		ValidateUpdate: updateValidator(validation.CertificateSigningRequestApprovalUpdate)}
	return &Resource{
		GVR: gvr("certificates.k8s.io", "v1", "certificatesigningrequests"), Kind: "CertificateSigningRequest",
		Singular: "certificatesigningrequest", ShortNames: []string{"csr"},
		New:     func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
		NewList: func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
		Status:  true, Subresources: []Subresource{approval},
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"spec.signerName": o.(*certificatesv1.CertificateSigningRequest).Spec.SignerName}
		},
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.CertificateSigningRequest),
			ValidateUpdate:       updateValidator(validation.CertificateSigningRequestUpdate),
			ValidateStatusUpdate: updateValidator(validation.CertificateSigningRequestStatusUpdate),
			PrepareForCreate: func(obj runtime.Object) {
				// Nobody creates a request already approved.
				csr := obj.(*certificatesv1.CertificateSigningRequest)
				csr.Status = certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{}}
			},
			CreatedBy: func(obj runtime.Object, u *auth.User) {
				spec := &obj.(*certificatesv1.CertificateSigningRequest).Spec
				spec.Username, spec.UID, spec.Groups, spec.Extra = "", "", nil, nil
				if u == nil {
					return
				}
				spec.Username, spec.UID, spec.Groups = u.Name, u.UID, append([]string(nil), u.Groups...)
				if len(u.Extra) > 0 {
					spec.Extra = map[string]certificatesv1.ExtraValue{}
					for k, v := range u.Extra {
						spec.Extra[k] = append(certificatesv1.ExtraValue(nil), v...)
					}
				}
			},
			PrepareForUpdate: func(obj, old runtime.Object) {
				csr, was := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
				csr.Spec, csr.Status = was.Spec, was.Status
			},
			PrepareForStatusUpdate: func(obj, old runtime.Object) {
				csr, was := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
				// /status keeps Approved and Denied as they were.
				for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
					keepConditions(csr, was, t)
				}
				stampConditions(csr, was, time.Now())
			},
		},
	}
}

// csrApprovalPrepare: /approval changes the conditions and nothing else
// of the spec and status.
func csrApprovalPrepare(obj, old runtime.Object) {
	csr, was := obj.(*certificatesv1.CertificateSigningRequest), old.(*certificatesv1.CertificateSigningRequest)
	stampConditions(csr, was, time.Now())
	conditions := csr.Status.Conditions
	csr.Status = *was.Status.DeepCopy()
	csr.Status.Conditions = conditions
}

// keepConditions puts old's conditions of type t back in place of csr's
// when there are as many of them, as upstream's
// preserveConditionInstances; when some were added or removed,
// validation refuses the change.
func keepConditions(csr, old *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) {
	var was, is []int
	for i, c := range old.Status.Conditions {
		if c.Type == t {
			was = append(was, i)
		}
	}
	for i, c := range csr.Status.Conditions {
		if c.Type == t {
			is = append(is, i)
		}
	}
	if len(was) != len(is) {
		return
	}
	for k, i := range was {
		csr.Status.Conditions[is[k]] = old.Status.Conditions[i]
	}
}

// stampConditions sets a condition's lastUpdateTime to now when unset,
// and its lastTransitionTime to old's of the same type and status, else
// now, as upstream's populateConditionTimestamps.
func stampConditions(csr, old *certificatesv1.CertificateSigningRequest, now time.Time) {
	at := metav1.NewTime(now)
	for i := range csr.Status.Conditions {
		c := &csr.Status.Conditions[i]
		if c.LastUpdateTime.IsZero() {
			c.LastUpdateTime = at
		}
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = at
			for _, o := range old.Status.Conditions {
				if o.Type == c.Type && o.Status == c.Status && !o.LastTransitionTime.IsZero() {
					c.LastTransitionTime = o.LastTransitionTime
					break
				}
			}
		}
	}
}

// clusterTrustBundles: X.509 trust anchors published for the cluster, as
// upstream's clustertrustbundle strategy (served as certificates.k8s.io/v1,
// GA in 1.37 and the only version kube-apiserver serves by default). A
// bundle may be linked to a signer (spec.signerName, immutable, with the
// name prefix validation requires); writing a linked bundle takes the
// attest verb on that signer (the ClusterTrustBundleAttest admission
// check). The kubelet projects bundles into pods' volumes
// (projected.sources[].clusterTrustBundle); no controller of kelp
// publishes any.
func clusterTrustBundles() *Resource {
	return &Resource{
		GVR: gvr("certificates.k8s.io", "v1", "clustertrustbundles"), Kind: "ClusterTrustBundle",
		Singular: "clustertrustbundle",
		New:      func() runtime.Object { return &certificatesv1.ClusterTrustBundle{} },
		NewList:  func() runtime.Object { return &certificatesv1.ClusterTrustBundleList{} },
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"spec.signerName": o.(*certificatesv1.ClusterTrustBundle).Spec.SignerName}
		},
		Strategy: Strategy{
			Default:              NoDefaults,
			Validate:             validator(validation.ClusterTrustBundle),
			ValidateUpdate:       updateValidator(validation.ClusterTrustBundleUpdate),
			ValidateStatusUpdate: metaUpdate,
		},
	}
}

// podCertificateRequests: a pod's request, made by its node's kubelet, for
// a certificate from a signer (certificates.k8s.io/v1, GA in 1.37), as
// upstream's podcertificaterequest strategy: the spec is fixed at
// creation (the stub PKCS#10 request proves the kubelet holds the key),
// the status is written through /status by the signer once (Issued,
// Denied or Failed), which takes the verb sign on the signer (the
// PodCertificateRequestSigning admission check). The NodeRestriction
// admission plugin and the Node authorizer keep a node to requests for
// its own pods. The kubelet projects issued credentials into pods'
// volumes (projected.sources[].podCertificate); no signer of kelp's
// issues any: a request for a signer nobody runs stays Pending.
func podCertificateRequests() *Resource {
	return &Resource{
		GVR: gvr("certificates.k8s.io", "v1", "podcertificaterequests"), Kind: "PodCertificateRequest",
		Singular: "podcertificaterequest", Namespaced: true,
		New:     func() runtime.Object { return &certificatesv1.PodCertificateRequest{} },
		NewList: func() runtime.Object { return &certificatesv1.PodCertificateRequestList{} },
		Status:  true,
		Fields: func(o runtime.Object) fields.Set {
			r := o.(*certificatesv1.PodCertificateRequest)
			return fields.Set{"spec.signerName": r.Spec.SignerName, "spec.podName": r.Spec.PodName, "spec.nodeName": string(r.Spec.NodeName)}
		},
		Strategy: Strategy{
			Default:              defaulter(defaults.PodCertificateRequest),
			Validate:             validator(validation.PodCertificateRequest),
			ValidateUpdate:       updateValidator(validation.PodCertificateRequestUpdate),
			ValidateStatusUpdate: updateValidator(validation.PodCertificateRequestStatusUpdate),
			PrepareForCreate: func(obj runtime.Object) {
				// A request starts Pending, whatever the creator sent.
				obj.(*certificatesv1.PodCertificateRequest).Status = certificatesv1.PodCertificateRequestStatus{}
			},
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*certificatesv1.PodCertificateRequest).Status = old.(*certificatesv1.PodCertificateRequest).Status
			},
		},
	}
}
