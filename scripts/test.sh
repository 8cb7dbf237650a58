#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian/Ubuntu machine (as root),
# then runs the whole suite: formatting, vet, unit, integration and
# end-to-end tests (real containers under containerd: root required).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

# systemd: systemd-analyze verify checks the units install.sh writes
# (test/install); it needs no running systemd. curl: install.sh downloads
# a release with it (test/install serves one over local HTTP).
ensure_pkgs ca-certificates git gcc systemd curl $NODE_PKGS
ensure_go

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:" >&2
	echo "$unformatted" >&2
	exit 1
fi
echo "== go vet"
go vet ./...
# test/ecosystem is a module of its own (controller-runtime and Helm stay
# out of kelp's go.mod): ./... above does not reach it.
(cd test/ecosystem && go vet ./...)
echo "== build"
bash scripts/build.sh
echo "== go test"
# The e2e package takes some 16 minutes alone; it waits for the node lock
# (test/nodelock) while a benchmark or the conformance harness holds it,
# so its timeout leaves room for that.
root="$PWD"
KELP_BIN="$PWD/bin/kelp" go test -count=1 -timeout 30m ./... 2>&1 | tee /tmp/kelp-test.log
echo "== go test (test/ecosystem: controller-runtime, Helm)"
(cd test/ecosystem && KELP_BIN="$root/bin/kelp" go test -count=1 -timeout 10m ./...) 2>&1 | tee -a /tmp/kelp-test.log
