package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"

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
	return apierrors.NewInternalError(fmt.Errorf("etcd: %w", err))
}

// tooLargeRV is upstream's answer to a read at a revision that does not
// exist yet: 504 Timeout with a ResourceVersionTooLarge cause, which
// client-go's reflector recognises and retries.
func tooLargeRV(rv, current int64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}
