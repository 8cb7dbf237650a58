package storage

import (
	"errors"
	"net/http"
	"testing"

	rpctypes "go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// etcd's NOSPACE, in each shape the client may give it, is the guard's 507.
func TestNoSpaceIsInsufficientStorage(t *testing.T) {
	for _, in := range []error{rpctypes.ErrNoSpace, rpctypes.ErrGRPCNoSpace, errors.New("open wal: no space left on device")} {
		var se *apierrors.StatusError
		if err := etcdErr(in); !errors.As(err, &se) || se.ErrStatus.Code != http.StatusInsufficientStorage || se.ErrStatus.Reason != StatusReasonInsufficientStorage {
			t.Errorf("etcdErr(%v) = %v, want 507 InsufficientStorage", in, err)
		}
	}
	if err := etcdErr(errors.New("etcdserver: leader changed")); apierrors.IsInternalError(err) == false {
		t.Errorf("other errors stay 500: %v", err)
	}
}
