#!/usr/bin/env bash
# Builds kelp. The one place for the build flags: dev builds, tests, CI,
# benchmarks and releases all come through here.
#
# Two stages (see launcher/main.go): the full kelp ("core", package main at
# the root) is built, zstd-compressed and embedded into the small launcher,
# which is the kelp that ships.
#
#   OUT            the shipped binary (default bin/kelp)
#   GOOS GOARCH GOARM
#                  cross-build: static (CGO_ENABLED=0) and -trimpath
#   RELEASE=1      the same static, -trimpath build for this machine
#   KELP_VERSION   default: git describe
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ensure_go >/dev/null

OUT="${OUT:-bin/kelp}"
KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
KELP_VERSION="${KELP_VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
ldflags="-s -w -X main.kelpVersion=${KELP_VERSION}
	-X k8s.io/component-base/version.gitVersion=${KUBE_VERSION}
	-X k8s.io/component-base/version.gitMajor=1
	-X k8s.io/component-base/version.gitMinor=37"

# Dev builds keep the toolchain's defaults (cgo as `go test` has it, no
# -trimpath), so the core shares the build cache with the tests; what is
# shipped is static and path-free.
trim=()
if [ -n "${GOOS:-}${GOARCH:-}" ] || [ "${RELEASE:-}" = 1 ]; then
	export CGO_ENABLED=0
	trim=(-trimpath)
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
go build "${trim[@]}" -ldflags "$(echo $ldflags)" -o "$work/kelp-core" .
# pack runs here, whatever the target.
GOOS= GOARCH= GOARM= CGO_ENABLED=0 go run ./launcher/pack "$work/kelp-core" "$work"
src="$(pwd)/launcher"
printf '{"Replace":{"%s/kelp-core.zst":"%s/kelp-core.zst","%s/kelp-core.sum":"%s/kelp-core.sum"}}\n' \
	"$src" "$work" "$src" "$work" >"$work/overlay.json"
mkdir -p "$(dirname "$OUT")"
CGO_ENABLED=0 go build "${trim[@]}" -tags kelp_payload -overlay "$work/overlay.json" \
	-ldflags "-s -w -X main.kelpVersion=${KELP_VERSION}" -o "$OUT" ./launcher
echo "built $OUT ($KELP_VERSION, Kubernetes $KUBE_VERSION; $(stat -c %s "$OUT") bytes, core $(stat -c %s "$work/kelp-core") bytes)"
