package controllers

import (
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// NamespaceTerminating is the create error that means "nothing to do":
// the namespace is going away (NamespaceLifecycle refused the create) and
// takes the owner of what was to be created with it.
func NamespaceTerminating(err error) bool {
	return apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
