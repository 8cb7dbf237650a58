package storage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	rpctypes "go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Errors leave storage already shaped as the Kubernetes Status the client
// will see, so no layer above has to guess at the mapping.

func conflictErr(gr schema.GroupResource, name string) error {
	return apierrors.NewConflict(gr, name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

func tooOldErr(rv, oldest int64) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, oldest))
}

// ParseRV reads a resourceVersion given by a client. Anything but a
// non-negative integer is a 400, as upstream answers.
func ParseRV(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	// Unsigned decimal only, as upstream: no sign, no overflow past int64.
	v, err := strconv.ParseUint(s, 10, 63)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", s))
	}
	return int64(v), nil
}

func formatRV(v int64) string { return strconv.FormatInt(v, 10) }

func etcdErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return apierrors.NewTimeoutError("request did not complete within the allowed duration", 0)
	}
	if errors.Is(err, rpctypes.ErrCompacted) {
		return apierrors.NewResourceExpired("The resourceVersion for the provided list is too old.")
	}
	if IsNoSpace(err) {
		return InsufficientStorage(fmt.Sprintf("etcd refused the write: %v; free disk space or delete objects (etcd's NOSPACE alarm is disarmed once there is room again)", err))
	}
	return apierrors.NewInternalError(fmt.Errorf("etcd: %w", err))
}

// IsNoSpace is etcd's answer once its NOSPACE alarm is raised (the backend
// quota is exceeded: every write fails until the alarm is disarmed) or its
// disk is full. The in-process client may hand either the client's error
// or the gRPC status, and a disk error only as text.
func IsNoSpace(err error) bool {
	if errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, rpctypes.ErrNoSpace.Error()) || strings.Contains(msg, syscall.ENOSPC.Error())
}

// StatusReasonInsufficientStorage is the reason of a 507: apimachinery has
// none, and upstream's apiserver answers a full etcd with a 500.
const StatusReasonInsufficientStorage metav1.StatusReason = "InsufficientStorage"

// InsufficientStorage is a 507 Status: the write was refused because the
// storage has no room for it, and may succeed once space is freed.
func InsufficientStorage(msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: http.StatusInsufficientStorage,
		Reason: StatusReasonInsufficientStorage, Message: msg,
	}}
}

// tooLargeRV is upstream's answer to a read at a revision that does not
// exist yet: 504 Timeout with a ResourceVersionTooLarge cause, which
// client-go's reflector recognises and retries.
func tooLargeRV(rv, current int64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}
