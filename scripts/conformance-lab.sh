#!/usr/bin/env bash
# The upstream conformance suite against the lab: N kelp nodes on this
# machine (scripts/lab.sh; node-1 runs the server, the others join it).
# ../shared/conformance/run.sh runs the same suite against one node; this
# runs its binaries (build.sh) and images (images.sh) the same way, with the
# same ginkgo passes and flags, against the lab's API server.
#
#   bash scripts/conformance-lab.sh            (from the project root, as root)
#
# Knobs (environment): NODES (3), PROCS (24), FOCUS ('\[Conformance\]'),
# PAR_TIMEOUT (60m), SERIAL_TIMEOUT (30m), SERIAL/PARALLEL (1; 0 skips the
# pass), CONF (/tmp/conformance: bin/ and images/ as the harness left them),
# HARNESS (../shared/conformance), RUN ($CONF/lab-<time>).
# Writes $RUN/summary.txt with the harness's summarize.py; the nodes' logs
# are kept in $RUN (the lab's own directory goes with `lab.sh down`).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
HARNESS="${HARNESS:-$repo/../shared/conformance}"
CONF="${CONF:-/tmp/conformance}"
BIN="$CONF/bin" IMAGES="$CONF/images"
RUN="${RUN:-$CONF/lab-$(date +%Y%m%d-%H%M%S)}"
NODES="${NODES:-3}" PROCS="${PROCS:-24}"
FOCUS="${FOCUS:-\[Conformance\]}"
PAR_TIMEOUT="${PAR_TIMEOUT:-60m}" SERIAL_TIMEOUT="${SERIAL_TIMEOUT:-30m}"
SERIAL="${SERIAL:-1}" PARALLEL="${PARALLEL:-1}"
LOCK=/tmp/kelp-node.lock
export PATH="/usr/local/go/bin:$PATH"

log() { echo "[$(date +%H:%M:%S)] $*"; }
die() { log "conformance-lab: $*" >&2; exit 1; }

if [[ "${1:-}" != __locked ]]; then
	[[ $(id -u) == 0 ]] || die "needs root (the lab's nodes run containers)"
	[[ -x "$BIN/e2e.test" && -x "$BIN/ginkgo" ]] || die "no e2e.test or ginkgo in $BIN: run bash $HARNESS/build.sh first"
	[[ $(ls "$IMAGES"/*.tar 2>/dev/null | wc -l) -ge 9 ]] || die "no image archives in $IMAGES: run bash $HARNESS/images.sh first"
	mkdir -p "$RUN/bin"
	log "run dir $RUN"
	# kelp with the version the e2e framework reads, as the harness builds it.
	ver=$(git -C "$repo" describe --tags --always --dirty 2>/dev/null || echo dev)
	(cd "$repo" && GOFLAGS=-buildvcs=false go build -ldflags "-X main.kelpVersion=$ver \
		-X k8s.io/component-base/version.gitVersion=v1.37.2 \
		-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" -o "$RUN/kelp" .)
	printf '#!/bin/sh\nexec %q kubectl "$@"\n' "$RUN/kelp" >"$RUN/bin/kubectl"
	chmod 755 "$RUN/bin/kubectl"
	log "waiting for $LOCK"
	set +e
	flock -o "$LOCK" env RUN="$RUN" bash "$0" __locked
	rc=$?
	set -e
	reports=""
	for p in parallel serial; do
		if grep -q "<testcase" "$RUN/$p/junit.xml" 2>/dev/null; then reports+=" $RUN/$p/junit.xml"
		elif [[ -f "$RUN/$p/ginkgo.log" ]]; then reports+=" $RUN/$p/ginkgo.log"; fi
	done
	[[ -n "$reports" ]] || { log "no reports in $RUN"; exit 1; }
	# shellcheck disable=SC2086
	python3 "$HARNESS/summarize.py" "$RUN/summary.txt" $reports
	log "summary: $RUN/summary.txt"
	exit $rc
fi

# ---- holding the lock -------------------------------------------------------
export KELP_BIN="$RUN/kelp" KELP_LAB_IMAGES="$IMAGES" KELP_LAB_DIR="$RUN/lab" KELP_LAB_OWNER=$$
lab() { bash "$repo/scripts/lab.sh" "$@"; }
cleanup() {
	log "the lab's logs into $RUN, then down"
	cp "$KELP_LAB_DIR"/node-*.log "$RUN/" 2>/dev/null || true
	lab down >"$RUN/down.log" 2>&1 || log "lab down failed: $(tail -3 "$RUN/down.log")"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log "lab up $NODES (logs $KELP_LAB_DIR/node-*.log)"
KELP_LAB_TIMEOUT=300 lab up "$NODES" >"$RUN/up.log" 2>&1 || die "lab up failed: $(tail -20 "$RUN/up.log")"
KUBECONFIG="$KELP_LAB_DIR/kubeconfig"

# Every node imports every archive before the suite starts: a spec's pod
# must not wait on an import.
ntars=$(ls "$IMAGES"/*.tar | wc -l)
for i in $(seq "$NODES"); do
	for _ in $(seq 600); do
		[[ $(grep -cE 'images: (imported .* from|.*import )' "$KELP_LAB_DIR/node-$i.log") -ge $ntars ]] && break
		sleep 1
	done
	[[ $(grep -cE 'images: (imported .* from|.*import )' "$KELP_LAB_DIR/node-$i.log") -ge $ntars ]] || die "node-$i did not import its $ntars archives"
done
log "$NODES nodes Ready, $ntars archives imported on each"
"$RUN/bin/kubectl" --kubeconfig "$KUBECONFIG" get nodes -o wide | sed 's/^/    /'

e2eargs=(--kubeconfig="$KUBECONFIG" --provider=skeleton --kubectl-path="$RUN/bin/kubectl"
	--e2e-output-dir="$RUN/e2e-output" --disable-log-dump --non-blocking-taints=node-role.kubernetes.io/control-plane)
mkdir -p "$RUN/e2e-output"
gk() { # pass, procs, timeout, ginkgo flags...
	local pass=$1 procs=$2 to=$3 t=$SECONDS
	shift 3
	mkdir -p "$RUN/$pass"
	log "pass $pass: procs=$procs timeout=$to $* (log $RUN/$pass/ginkgo.log)"
	"$BIN/ginkgo" --procs="$procs" --timeout="$to" --no-color --output-dir="$RUN/$pass" \
		--junit-report=junit.xml --json-report=report.json --poll-progress-after=10m \
		--silence-skips "$@" "$BIN/e2e.test" -- "${e2eargs[@]}" >"$RUN/$pass/ginkgo.log" 2>&1
	local rc=$?
	log "pass $pass: rc=$rc in $((SECONDS - t))s; $(grep -E '^Ran [0-9]+ of' "$RUN/$pass/ginkgo.log" | tail -1)"
}
set +e
[[ "$PARALLEL" == 1 ]] && gk parallel "$PROCS" "$PAR_TIMEOUT" --focus="$FOCUS" --skip='\[Serial\]|\[Disruptive\]'
[[ "$SERIAL" == 1 ]] && gk serial 1 "$SERIAL_TIMEOUT" --focus="$FOCUS" --skip='\[Disruptive\]' --label-filter='Serial'
exit 0
