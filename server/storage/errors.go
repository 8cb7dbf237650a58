package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	rpctypes "go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", s))
	}
	return v, nil
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
