#!/usr/bin/env bash
# Builds bin/kelp. The one place for the build flags: dev builds, tests, CI
# and benchmarks all come through here, so they share the Go build cache.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ensure_go >/dev/null

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
KELP_VERSION="${KELP_VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
ldflags="-X main.kelpVersion=${KELP_VERSION}
	-X k8s.io/component-base/version.gitVersion=${KUBE_VERSION}
	-X k8s.io/component-base/version.gitMajor=1
	-X k8s.io/component-base/version.gitMinor=37"
go build -ldflags "$(echo $ldflags)" -o bin/kelp .
echo "built bin/kelp ($KELP_VERSION, Kubernetes $KUBE_VERSION)"
