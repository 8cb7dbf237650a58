#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian/Ubuntu machine (as root),
# then runs the whole suite: formatting, vet, unit, integration tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

need_pkgs=()
for p in ca-certificates git gcc; do
	dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "test.sh: missing packages ${need_pkgs[*]} and not root to install them" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}"
fi
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
echo "== build"
bash scripts/build.sh
echo "== go test"
KELP_BIN="$PWD/bin/kelp" go test -count=1 -timeout 20m ./... 2>&1 | tee /tmp/kelp-test.log
