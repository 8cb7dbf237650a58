#!/usr/bin/env bash
# Builds kelp and runs the performance benchmarks in test/bench against a
# real `kelp server` process, then prints the results. `make bench` calls it.
#
# Each benchmark does a fixed workload once per iteration, hence
# -benchtime=1x. Extra arguments go to `go test`, e.g.
#   scripts/bench.sh -bench 'ConfigMaps|Watch'
# The full output is also saved to $BENCH_OUT (default /tmp/kelp-bench.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ensure_go
# time: GNU time measures a child's peak RSS from a fork of itself (a Go
# parent's vfork would count the parent's pages too).
ensure_pkgs time

out="${BENCH_OUT:-/tmp/kelp-bench.txt}"

echo "== build"
bash scripts/build.sh

echo "== benchmarks ($(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'))"
KELP_BIN="$PWD/bin/kelp" go test -count=1 -timeout 30m -run '^$' -bench . -benchtime=1x \
	./test/bench/ "$@" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
# The data plane's own benchmarks: nftables syncs, DNS queries, overlay convergence.
echo "== data plane benchmarks"
go test -count=1 -timeout 20m -run '^$' -bench . ./netplane/proxy/ ./netplane/dns/ ./netplane/overlay/ 2>&1 | tee -a "$out"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# The API server's own: the in-flight filter, Secrets through storage
# plain and encrypted.
echo "== API server benchmarks"
go test -count=1 -timeout 10m -run '^$' -bench . ./server/apiserver/ ./server/secretsencrypt/ 2>&1 | tee -a "$out"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo
echo "== summary (full output in $out)"
# The benchmarks' own log lines, without the file:line prefix.
sed -n -e 's/^ *[a-z_]*_test\.go:[0-9]*: //p' -e '/^--- FAIL/p' -e '/^FAIL/p' "$out"
exit "$status"
