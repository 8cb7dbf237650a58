// Package ecosystem runs software from the Kubernetes ecosystem, unmodified,
// against a real `kelp server` (issue 15): an operator built with
// sigs.k8s.io/controller-runtime and the Helm v3 client library.
//
// It is a Go module of its own so that controller-runtime's and Helm's
// dependencies never enter kelp's go.mod: Helm v3 is built against the
// k8s.io modules at v0.36, and both bring modules (prometheus, zap,
// oras, docker's registry client, ...) that the kelp binary must not link.
// This module pins the k8s.io modules at kelp's versions, so the clients
// here speak the same API as the server. It starts the binary named by
// KELP_BIN (scripts/test.sh passes bin/kelp) and imports nothing of kelp.
package ecosystem
