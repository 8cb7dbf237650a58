#!/usr/bin/env bash
# Checks the release in dist/ (scripts/release.sh) on this amd64 machine,
# the arm binaries under qemu-user (Debian's qemu-user-static, called
# directly), amd64 natively as the baseline. For each binary:
#   1. `kelp --version` (answered by the launcher) prints the version;
#   2. `kelp kubectl version --client` runs the core: the launcher
#      extracts it (into a directory of this check's own) and execs it;
#      it prints the Kubernetes version stamped in;
#   3. the extracted core's own `--version` prints the version;
#   4. `kelp server --disable-agent`, with a data dir of its own and a free
#      port (--https-listen-port 0: the port is read from the kubeconfig it
#      writes), reaches /readyz, polled with the admin kubeconfig's client
#      certificate. The server is then stopped (SIGTERM, by its pid).
# It prints how long each took. The version expected is $KELP_VERSION, or
# git describe, as release.sh stamps it.
#
#   bash scripts/release-check.sh              # amd64, arm64, arm
#   bash scripts/release-check.sh arm64
#
# The core an arm launcher execs is an arm binary: the kernel runs it only
# through a binfmt_misc handler (what systemd-binfmt registers at boot,
# which machines without systemd do not run). When this machine has none
# for qemu-aarch64 or qemu-arm, the check registers Debian's own
# (/usr/lib/binfmt.d/qemu-<arch>.conf), mounting binfmt_misc if needed, and
# removes what it registered when it ends. Root is needed for that and for
# apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

die() { echo "release-check.sh: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (apt-get install qemu-user-static; binfmt_misc)"

version="${KELP_VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
kube_version="${KUBE_VERSION:-v1.37.2}"
timeout="${READYZ_TIMEOUT:-900}"
arches=("$@")
[ ${#arches[@]} -gt 0 ] || arches=(amd64 arm64 arm)
for arch in "${arches[@]}"; do
	case "$arch" in amd64 | arm64 | arm) ;; *) die "unknown architecture $arch (amd64, arm64 or arm)" ;; esac
	[ -s "dist/kelp-$arch" ] || die "no dist/kelp-$arch: run scripts/release.sh first"
done
[ "$(uname -m)" = x86_64 ] || die "runs on an x86_64 machine (the arm binaries under qemu)"
ensure_pkgs qemu-user-static curl

work="$(mktemp -d)"
registered=()
mounted=
server_pid=
cleanup() {
	if [ -n "$server_pid" ]; then stop_server; fi
	for name in "${registered[@]}"; do echo -1 >"/proc/sys/fs/binfmt_misc/$name" || true; done
	if [ -n "$mounted" ]; then umount /proc/sys/fs/binfmt_misc || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# ensure_binfmt NAME: the kernel has a handler NAME (qemu-aarch64,
# qemu-arm) that runs such binaries under qemu.
ensure_binfmt() {
	local name="$1" conf="/usr/lib/binfmt.d/$1.conf"
	if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
		mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || die "cannot mount binfmt_misc"
		mounted=1
	fi
	if [ -e "/proc/sys/fs/binfmt_misc/$name" ]; then
		grep -qx enabled "/proc/sys/fs/binfmt_misc/$name" || die "binfmt handler $name is registered but disabled"
		return
	fi
	[ -f "$conf" ] || die "no $conf (qemu-user-static installs it)"
	grep -v '^#' "$conf" >/proc/sys/fs/binfmt_misc/register || die "cannot register $conf"
	registered+=("$name")
	echo "(registered the binfmt handler $name for this check; removed at the end)"
}

# expect WHAT WANT OUTPUT: OUTPUT has WANT.
expect() {
	grep -qF -- "$2" <<<"$3" || die "$1 printed
$3
want \"$2\""
}

stop_server() {
	kill -TERM "$server_pid" 2>/dev/null || true
	for _ in $(seq 60); do
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.5
	done
	kill -KILL "$server_pid" 2>/dev/null || true
	wait "$server_pid" 2>/dev/null || true
	server_pid=
}

# kubeconfig_field FILE KEY: a base64 field of the admin kubeconfig, decoded.
kubeconfig_field() { sed -n "s/^ *$2: *//p" "$1" | head -1 | base64 -d; }

declare -A t_version t_core t_ready
for arch in "${arches[@]}"; do
	bin="dist/kelp-$arch"
	case "$arch" in
		amd64) run=() ;;
		arm64) run=(qemu-aarch64-static) && ensure_binfmt qemu-aarch64 ;;
		arm) run=(qemu-arm-static) && ensure_binfmt qemu-arm ;;
	esac
	dir="$work/$arch"
	mkdir -p "$dir"
	export KELP_EXTRACT_DIR="$dir/extract"
	echo "== $bin${run[*]:+ under ${run[*]}}"

	start=$(now)
	out="$("${run[@]}" "$bin" --version 2>&1)" || die "$bin --version failed: $out"
	t_version[$arch]=$(since "$start")
	expect "$bin --version" "kelp version $version" "$out"
	echo "$out (${t_version[$arch]}s)"

	start=$(now)
	out="$("${run[@]}" "$bin" kubectl version --client 2>&1)" || die "$bin kubectl version --client failed: $out"
	t_core[$arch]=$(since "$start")
	expect "$bin kubectl version --client" "Client Version: $kube_version" "$out"
	echo "core extracted and run: $(head -1 <<<"$out") (${t_core[$arch]}s)"

	core="$(find "$KELP_EXTRACT_DIR" -type f -name kelp)"
	[ -n "$core" ] || die "the launcher extracted no core into $KELP_EXTRACT_DIR"
	out="$("${run[@]}" "$core" --version 2>&1)" || die "$core --version failed: $out"
	expect "the core's --version" "kelp version $version" "$out"
	echo "core: $out"

	kubeconfig="$dir/kubeconfig"
	start=$(now)
	"${run[@]}" "$bin" server --disable-agent --data-dir "$dir/data" --https-listen-port 0 \
		--bind-address 127.0.0.1 --write-kubeconfig "$kubeconfig" >"$dir/server.log" 2>&1 &
	server_pid=$!
	ready=
	port=
	while [ "$(since "$start" | cut -d. -f1)" -lt "$timeout" ]; do
		kill -0 "$server_pid" 2>/dev/null || die "kelp server ($arch) exited:
$(tail -30 "$dir/server.log")"
		if [ -z "$port" ] && [ -s "$kubeconfig" ] && grep -q 'client-key-data' "$kubeconfig"; then
			port="$(sed -n 's#^ *server: https://[^/]*:\([0-9]*\)/*$#\1#p' "$kubeconfig")"
			[ -n "$port" ] || die "no server URL with a port in $kubeconfig"
			kubeconfig_field "$kubeconfig" certificate-authority-data >"$dir/ca.crt"
			kubeconfig_field "$kubeconfig" client-certificate-data >"$dir/admin.crt"
			kubeconfig_field "$kubeconfig" client-key-data >"$dir/admin.key"
		fi
		if [ -n "$port" ] && [ "$(curl -sf --max-time 10 --cacert "$dir/ca.crt" --cert "$dir/admin.crt" --key "$dir/admin.key" \
			"https://127.0.0.1:$port/readyz" 2>/dev/null)" = ok ]; then
			ready=1
			break
		fi
		sleep 0.5
	done
	t_ready[$arch]=$(since "$start")
	[ -n "$ready" ] || die "kelp server ($arch) not ready in ${timeout}s:
$(tail -30 "$dir/server.log")"
	# What answered is the extracted core, exec'd by the launcher: under
	# qemu (through binfmt_misc) for arm, the process's exe is qemu's.
	exe="$(readlink "/proc/$server_pid/exe")"
	cmd="$(tr '\0' ' ' <"/proc/$server_pid/cmdline")"
	case "$arch" in
		amd64) [ "$exe" = "$core" ] || die "the server runs $exe, not the extracted core $core" ;;
		*) if [ "$exe" != "$(command -v "${run[0]}")" ] || [[ "$cmd" != *" $core "*" server --disable-agent "* ]]; then
			die "the server is not the core under ${run[0]}: exe $exe, command line $cmd"
		fi ;;
	esac
	echo "the server process: $exe $cmd"
	echo "kelp server --disable-agent: /readyz ok on port $port after ${t_ready[$arch]}s"
	stop_server
	unset KELP_EXTRACT_DIR
done

echo
echo "release $version checked on $(nproc) cores ($(qemu-aarch64-static --version | head -1)):"
printf '  %-6s %-22s %12s %22s %18s\n' arch run "--version" "first core run*" "start to /readyz"
for arch in "${arches[@]}"; do
	case "$arch" in amd64) how=native ;; arm64) how=qemu-aarch64-static ;; arm) how=qemu-arm-static ;; esac
	printf '  %-6s %-22s %11ss %21ss %17ss\n' "$arch" "$how" "${t_version[$arch]}" "${t_core[$arch]}" "${t_ready[$arch]}"
done
echo "  * kubectl version --client, including the extraction of the core"
