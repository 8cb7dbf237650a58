#!/usr/bin/env bash
# Reproduces each fault of issue 12 (a box nobody watches), as root: each
# is a test that builds the faulty situation against a real kelp and checks
# the outcome. With no arguments every fault runs; name some to run those:
#   bash scripts/faults.sh dns disk
#
#   dns       a query from outside the cluster to a node's DNS (and the
#             node's own query), on a 3-node lab
#   flood     20,000 idle TLS connections, then the server's RSS and fds
#   inflight  1,000 concurrent slow LISTs against a watch
#   disk      a 300 MiB data dir filled by a ballast and ConfigMaps; a
#             64 MiB one at start
#   shim      kelp killed with SIGKILL mid-rollout at several delays, and a
#             shim that never got its task
#   secrets   Secrets in etcd's files with and without --secrets-encryption,
#             key rotation, secret volumes on tmpfs
#   killall   kelp killall with another cluster's data dir
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ensure_go
bash scripts/build.sh >/dev/null
export KELP_BIN="$PWD/bin/kelp"

declare -A pkg run
pkg[dns]=./test/e2e/ run[dns]='TestMultiNode$/cluster_DNS_only_for_the_cluster'
pkg[flood]=./test/integration/ run[flood]='TestIdleConnectionFloodIsClosedAndForgotten$'
pkg[inflight]=./test/integration/ run[inflight]='TestSlowListStormGetsTooManyRequestsButWatchesGoOn$'
pkg[disk]=./test/integration/ run[disk]='TestFullDiskRefusesWritesAndRecovers$|TestTinyDiskIsOneLineError$'
pkg[shim]=./test/e2e/ run[shim]='TestNoOrphanShimsAfterKillMidRollout$'
pkg[secrets]='./test/integration/ ./test/e2e/' run[secrets]='TestSecretsEncryption|TestDeletionInitAndVolumes$'
pkg[killall]=./test/e2e/ run[killall]='TestKillAllLeavesAnotherClusterAlone$'
order=(dns flood inflight disk shim secrets killall)

faults=("$@")
[ ${#faults[@]} -gt 0 ] || faults=("${order[@]}")
failed=()
for f in "${faults[@]}"; do
	[ -n "${run[$f]:-}" ] || { echo "unknown fault $f (one of: ${order[*]})" >&2; exit 2; }
	echo "== $f"
	log="$(mktemp)"
	rc=0
	# shellcheck disable=SC2086
	go test -count=1 -timeout 20m -run "${run[$f]}" -v ${pkg[$f]} >"$log" 2>&1 || rc=$?
	grep -E '^(=== RUN|\s*--- |\s+\S+_test\.go:|ok|FAIL)' "$log" || true
	[ "$rc" -eq 0 ] || { failed+=("$f"); echo "(full output: $log)"; }
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "faults not handled: ${failed[*]}" >&2
	exit 1
fi
echo "every fault handled: ${faults[*]}"
