#!/usr/bin/env bash
# Builds the test images as OCI archives (busybox.tar, demo-v1.tar,
# demo-v2.tar) into bin/images/ or the directory given as $1, and prints
# their paths. No registry is needed: to get the images into a node, copy
# bin/images/*.tar into <data-dir>/agent/images/ before the agent starts.
# Needs Debian's static busybox: apt-get install busybox-static
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
# $1 is taken relative to the caller's directory; the default to the repo.
dir="${1:-$repo/bin/images}"
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac
cd "$repo"
source scripts/env.sh
ensure_go >/dev/null
go run ./test/images/cmd/build-images "$dir"
