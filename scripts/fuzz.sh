#!/usr/bin/env bash
# Runs every native Go fuzz target for a while, one at a time (go test
# -fuzz takes a single target per invocation).
#
#   scripts/fuzz.sh                  # every target, 30s each
#   FUZZTIME=5m scripts/fuzz.sh      # longer (any -fuzztime value: 90s, 10000x)
#   scripts/fuzz.sh FuzzDecode       # only the named targets
#
# FUZZPARALLEL sets -parallel (default: the number of CPUs).
# A crasher fails the target at once; its reproducer lands in testdata/fuzz.
#
# New crashers are written to <package>/testdata/fuzz/<Target>/ and from
# then on replay in every plain `go test` run. The script exits non-zero if
# any target failed.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ensure_go >/dev/null

FUZZTIME="${FUZZTIME:-30s}"
FUZZPARALLEL="${FUZZPARALLEL:-$(nproc 2>/dev/null || echo 2)}"

targets=(
	./server/apiserver/:FuzzDecode
	./server/apiserver/:FuzzPatchJSON
	./server/apiserver/:FuzzPatchMerge
	./server/apiserver/:FuzzPatchStrategic
	./server/apiserver/:FuzzParseRequest
	./server/apiserver/:FuzzListOptions
	./server/apiserver/:FuzzDeleteOptions
	./server/apiserver/storage/:FuzzParseRV
	./server/apiserver/storage/:FuzzListEtcd
	./server/secretsencrypt/:FuzzDecodeConfig
)

want=("$@")
failed=()
for t in "${targets[@]}"; do
	pkg="${t%%:*}" name="${t##*:}"
	if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " =~ " ${name} " ]]; then
		continue
	fi
	echo "== ${name} (${pkg}, ${FUZZTIME})"
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "${FUZZTIME}" -parallel "${FUZZPARALLEL}" "${pkg}"; then
		failed+=("${name}")
	fi
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: failed: ${failed[*]} (crashers are under testdata/fuzz/)" >&2
	exit 1
fi
echo "fuzz: all targets passed"
