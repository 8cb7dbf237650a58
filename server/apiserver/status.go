package apiserver

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// toStatus turns any error into the Status a client sees. Errors that are
// not already API errors are internal errors (500).
func toStatus(err error) *metav1.Status {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		st := se.Status()
		if st.Code == 0 {
			st.Code = http.StatusInternalServerError
		}
		st.Kind, st.APIVersion = "Status", "v1"
		st.Status = metav1.StatusFailure
		return &st
	}
	st := apierrors.NewInternalError(err).Status()
	st.Kind, st.APIVersion = "Status", "v1"
	return &st
}

// writeError writes err as a Status in the negotiated encoding.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	st := toStatus(err)
	s.writeObject(w, r, int(st.Code), st)
}

func statusFailure(code int32, reason metav1.StatusReason, msg string) metav1.Status {
	return metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}
}

func notAcceptable() error {
	return &apierrors.StatusError{ErrStatus: statusFailure(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
		"only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf")}
}
