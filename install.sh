#!/bin/sh
# kelp installer, in the spirit of k3s's:
#
#   curl -sfL https://<your mirror>/install.sh | sh -                        # a server
#   curl -sfL https://<your mirror>/install.sh | KELP_URL=https://<server>:6443 \
#       KELP_TOKEN=<token> sh -                                              # an agent joining it
#
# Environment (the names are k3s's, with KELP for K3S):
#   KELP_URL                 the server to join; with it the service runs `kelp agent`
#   KELP_TOKEN, KELP_TOKEN_FILE  the join token (or a file holding it); one is required with KELP_URL
#   KELP_*                   every other KELP_ variable (KELP_NODE_NAME, KELP_DATA_DIR, ...) is
#                            written to the service's environment file, where kelp's flags read it
#   INSTALL_KELP_RELEASE_URL where a release is (what scripts/release.sh writes to dist/):
#                            a URL or a directory holding kelp-amd64, kelp-arm64, kelp-arm
#                            and sha256sum.txt; the binary for this machine (uname -m) is
#                            fetched and checked against sha256sum.txt before anything is
#                            installed, and a mismatch installs nothing
#   INSTALL_KELP_URL         URL of one kelp binary (instead of a release), checked against
#                            the sha256sum.txt beside it, under its file name
#   INSTALL_KELP_SHA256_URL  where the checksums are instead (URL or file)
#   KELP_BINARY              path of a kelp binary to install as it is, unchecked
#                            (air-gapped installs, tests); it wins over the two above
#   INSTALL_KELP_SKIP_DOWNLOAD "true" to use the kelp already in INSTALL_KELP_BIN_DIR
#   INSTALL_KELP_EXEC        the command and flags of the service: "server", "agent", or flags
#                            only (then the command is agent when KELP_URL is set, else server);
#                            arguments after `sh -s -` are appended
#   INSTALL_KELP_BIN_DIR     where to install (default /usr/local/bin)
#   INSTALL_KELP_SYSTEMD_DIR where systemd units go (default /etc/systemd/system)
#   INSTALL_KELP_OPENRC_DIR  where openrc services go (default /etc/init.d)
#   INSTALL_KELP_SKIP_ENABLE "true" not to enable the service (nor start it)
#   INSTALL_KELP_SKIP_START  "true" to write (and enable) the service without starting it
#   INSTALL_KELP_SKIP_DEPS   "true" not to install containerd and runc
#   INSTALL_KELP_ROOT        for tests: a directory under which every path this script
#                            reads or writes lives (including the /run/systemd/system it
#                            looks for); the files written name the prefixed paths, so the
#                            generated uninstall script removes only that tree
#
# It installs containerd and runc from the OS packages when missing (the
# node agent drives them), kelp, a kubectl symlink, kelp-killall.sh, an
# uninstall script (kelp-uninstall.sh, or kelp-agent-uninstall.sh for an
# agent) and a service: a systemd unit when systemd is the init
# (/run/systemd/system exists), an openrc service when rc-service exists,
# as k3s detects them. With neither (a container, or a machine like the
# ones kelp is built on, where PID 1 is not systemd) the systemd unit is
# written but not enabled, and the script prints how to start kelp by hand.
set -eu

ROOT="${INSTALL_KELP_ROOT:-}"
BIN_DIR="${INSTALL_KELP_BIN_DIR:-$ROOT/usr/local/bin}"
SYSTEMD_DIR="${INSTALL_KELP_SYSTEMD_DIR:-$ROOT/etc/systemd/system}"
OPENRC_DIR="${INSTALL_KELP_OPENRC_DIR:-$ROOT/etc/init.d}"
# The state the uninstall script removes: kelp's defaults, or what the
# KELP_* variables given here (and written to the service's environment)
# make it use.
ETC_DIR="$ROOT/etc/kelp"
DATA_DIR="${KELP_DATA_DIR:-$ROOT/var/lib/kelp}"
RUN_DIR="${KELP_RUN_DIR:-$ROOT/run/kelp}"
LOG_DIR="$ROOT/var/log"

info() { echo "[INFO]  $*"; }
warn() { echo "[WARN]  $*" >&2; }
fatal() { echo "[ERROR] $*" >&2; exit 1; }

# --- what to run: server or agent (k3s's setup_env) ---

# shellcheck disable=SC2086 # INSTALL_KELP_EXEC is a word list by design
set -- ${INSTALL_KELP_EXEC:-} "$@"
case "${1:-}" in
	-* | "")
		if [ -n "${KELP_URL:-}" ]; then
			[ -n "${KELP_TOKEN:-}" ] || [ -n "${KELP_TOKEN_FILE:-}" ] ||
				fatal "KELP_URL is set (so kelp would run as an agent), but neither KELP_TOKEN nor KELP_TOKEN_FILE is"
			CMD=agent
		else
			CMD=server
		fi
		;;
	*)
		CMD="$1"
		shift
		;;
esac
case "$CMD" in
	server | agent) ;;
	*) fatal "unknown kelp command '$CMD' in INSTALL_KELP_EXEC (server or agent)" ;;
esac
if [ -n "${KELP_URL:-}" ]; then
	case "$KELP_URL" in https://*) ;; *) fatal "KELP_URL=$KELP_URL: must be https://<server>:6443" ;; esac
fi
if [ -n "${KELP_TOKEN_FILE:-}" ] && [ ! -r "$KELP_TOKEN_FILE" ]; then
	fatal "KELP_TOKEN_FILE=$KELP_TOKEN_FILE is not a readable file"
fi
# Flags go into ExecStart and openrc's command_args unquoted, so a value
# either parser would split or expand is refused: such values belong in
# the environment file (KELP_<FLAG>=...), which needs no quoting.
ARGS="$CMD"
for a in "$@"; do
	case "$a" in
		*[[:space:]\'\"\\\$\`%]*) fatal "argument '$a' needs quoting: set it through its KELP_ environment variable instead" ;;
	esac
	ARGS="$ARGS $a"
done

# The server is "kelp" (kubectl and the uninstall script keep their names
# from before agents existed); an agent is "kelp-agent", so both may be
# installed on one machine, as with k3s.
if [ "$CMD" = server ]; then NAME=kelp; else NAME=kelp-agent; fi
UNINSTALL="$BIN_DIR/$NAME-uninstall.sh"
KILLALL="$BIN_DIR/kelp-killall.sh"

if [ -d "$ROOT/run/systemd/system" ]; then
	INIT=systemd
elif command -v rc-service >/dev/null 2>&1; then
	INIT=openrc
else
	INIT=none # write the systemd unit for later, enable nothing
fi
if [ "$INIT" = openrc ]; then
	SERVICE_FILE="$OPENRC_DIR/$NAME"
	ENV_FILE="$ETC_DIR/$NAME.env"
else
	SERVICE_FILE="$SYSTEMD_DIR/$NAME.service"
	ENV_FILE="$SYSTEMD_DIR/$NAME.service.env"
fi

[ "$(id -u)" -eq 0 ] || [ -n "${INSTALL_KELP_BIN_DIR:-}$ROOT" ] || fatal "run as root (or set INSTALL_KELP_BIN_DIR)"

# --- the architecture: which of the release's binaries runs here ---

# The release (scripts/release.sh) has static binaries for amd64, arm64 and
# arm (GOARM=7). A 32-bit userland on a 64-bit kernel (Raspberry Pi OS on a
# Pi 4) says aarch64 and takes arm64: the binaries need no libc.
MACHINE="$(uname -m)"
case "$MACHINE" in
	x86_64 | amd64) ARCH=amd64 ;;
	aarch64 | arm64) ARCH=arm64 ;;
	armv7* | armv8l) ARCH=arm ;;
	armv5* | armv6*) fatal "unsupported architecture $MACHINE: kelp's 32-bit arm build needs ARMv7 (a Raspberry Pi 2 or newer; not a Pi 1 or Pi Zero)" ;;
	*) fatal "unsupported architecture $MACHINE: kelp is built for x86_64 (amd64), aarch64 (arm64) and armv7l (arm)" ;;
esac

# --- the binary: fetched and verified before anything is installed ---

# fetch SOURCE DEST: a URL (curl, or wget), or a path on this machine.
fetch() {
	case "$1" in
		*://*)
			if command -v curl >/dev/null 2>&1; then
				curl -sfL -o "$2" "$1" || fatal "download of $1 failed: nothing was installed"
			elif command -v wget >/dev/null 2>&1; then
				wget -qO "$2" "$1" || fatal "download of $1 failed: nothing was installed"
			else
				fatal "neither curl nor wget is installed"
			fi
			;;
		*)
			[ -f "$1" ] || fatal "$1 does not exist"
			cp "$1" "$2"
			;;
	esac
}

# verify FILE NAME SUMS SUMS_SOURCE: FILE's sha256 is the one SUMS (a
# sha256sum.txt, as scripts/release.sh writes) lists for NAME.
verify() {
	if command -v sha256sum >/dev/null 2>&1; then
		got="$(sha256sum "$1" | cut -d' ' -f1)"
	elif command -v shasum >/dev/null 2>&1; then
		got="$(shasum -a 256 "$1" | cut -d' ' -f1)"
	else
		fatal "neither sha256sum nor shasum is installed: the download cannot be verified"
	fi
	want="$(awk -v n="$2" '$2 == n || $2 == "*" n { print tolower($1); exit }' "$3")"
	[ -n "$want" ] || fatal "$4 has no checksum for $2: nothing was installed"
	[ "$got" = "$want" ] || fatal "checksum mismatch for $2: its sha256 is $got, but $4 says $want; the download is corrupt or was tampered with: nothing was installed"
	info "verified $2 (sha256 $got)"
}

# The directory the fetched files wait in, removed on exit; the binary
# leaves it for $BIN_DIR only once verified, after the dependencies.
FETCHED=
tmp=
cleanup() {
	[ -z "$FETCHED" ] || rm -rf "$FETCHED"
	[ -z "$tmp" ] || rm -f "$tmp"
}
trap cleanup EXIT
if [ "${INSTALL_KELP_SKIP_DOWNLOAD:-false}" = true ]; then
	[ -x "$BIN_DIR/kelp" ] || fatal "INSTALL_KELP_SKIP_DOWNLOAD=true, but there is no $BIN_DIR/kelp"
elif [ -n "${KELP_BINARY:-}" ]; then
	# A binary of your own: installed as it is.
	[ -f "$KELP_BINARY" ] || fatal "KELP_BINARY=$KELP_BINARY does not exist"
	src="$KELP_BINARY"
else
	if [ -n "${INSTALL_KELP_RELEASE_URL:-}" ]; then
		# A release: this machine's binary and the checksums beside it.
		base="${INSTALL_KELP_RELEASE_URL%/}"
		name="kelp-$ARCH"
		bin_src="$base/$name"
		sums_src="${INSTALL_KELP_SHA256_URL:-$base/sha256sum.txt}"
	elif [ -n "${INSTALL_KELP_URL:-}" ]; then
		# One binary (no choice of architecture): its checksum is the one
		# sha256sum.txt beside it lists under its file name.
		bin_src="$INSTALL_KELP_URL"
		name="${INSTALL_KELP_URL%%[?#]*}"
		name="${name##*/}"
		sums_src="${INSTALL_KELP_SHA256_URL:-${INSTALL_KELP_URL%/*}/sha256sum.txt}"
	else
		fatal "set INSTALL_KELP_RELEASE_URL (a release: URL or directory), INSTALL_KELP_URL (one binary's URL) or KELP_BINARY (a local kelp binary)"
	fi
	FETCHED="$(mktemp -d "${TMPDIR:-/tmp}/kelp-install.XXXXXX")"
	info "downloading $bin_src ($MACHINE: $ARCH)"
	fetch "$bin_src" "$FETCHED/kelp"
	fetch "$sums_src" "$FETCHED/sha256sum.txt"
	verify "$FETCHED/kelp" "$name" "$FETCHED/sha256sum.txt" "$sums_src"
	src="$FETCHED/kelp"
fi

# --- dependencies ---

if [ "${INSTALL_KELP_SKIP_DEPS:-false}" != true ] && ! { command -v containerd >/dev/null 2>&1 && command -v runc >/dev/null 2>&1; }; then
	if command -v apt-get >/dev/null 2>&1; then
		info "installing containerd and runc"
		if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containerd runc nftables iproute2 conntrack; }; then
			fatal "could not install containerd and runc"
		fi
	else
		info "containerd and runc are not installed: install them with your package manager (or start kelp with --disable-agent)"
	fi
fi

# --- the binary ---

mkdir -p "$BIN_DIR"
if [ "${INSTALL_KELP_SKIP_DOWNLOAD:-false}" = true ]; then
	info "using the installed $BIN_DIR/kelp"
else
	# Written beside the target and renamed over it, so a running kelp keeps
	# its (now unlinked) binary and a failed install leaves the old one.
	tmp="$(mktemp "$BIN_DIR/.kelp.XXXXXX")"
	cp "$src" "$tmp"
	chmod 0755 "$tmp"
	"$tmp" --version >/dev/null 2>&1 || fatal "$src is not a working kelp binary for $MACHINE"
	mv -f "$tmp" "$BIN_DIR/kelp"
	tmp=
	info "installed $BIN_DIR/kelp"
fi

if [ ! -e "$BIN_DIR/kubectl" ] || [ -L "$BIN_DIR/kubectl" ]; then
	ln -sf kelp "$BIN_DIR/kubectl"
	info "linked $BIN_DIR/kubectl -> kelp"
else
	info "$BIN_DIR/kubectl exists and is not ours; use 'kelp kubectl'"
fi

# --- kelp-killall.sh: one for every kelp service on this machine ---

cat >"$KILLALL" <<KILLALL
#!/bin/sh
# Stops every kelp service, every other kelp server or agent run from
# $BIN_DIR/kelp, then what they leave running on purpose: the containers,
# containerd and the pod network (as k3s-killall.sh does).
set -u
if [ -d "$ROOT/run/systemd/system" ]; then
	for unit in "$SYSTEMD_DIR"/kelp*.service; do
		[ -f "\$unit" ] && systemctl stop "\$(basename "\$unit")"
	done
elif command -v rc-service >/dev/null 2>&1; then
	for svc in "$OPENRC_DIR"/kelp*; do
		[ -f "\$svc" ] && rc-service "\$(basename "\$svc")" stop
	done
fi
# A kelp started by hand: only processes of this binary running a server
# or an agent, found through /proc (a pkill by name would also hit other
# kelp installs, and the log writers the shims run, which stop with their
# containers below).
pids=
for p in /proc/[0-9]*; do
	exe="\$(readlink "\$p/exe" 2>/dev/null)" || continue
	[ "\$exe" = "$BIN_DIR/kelp" ] || [ "\$exe" = "$BIN_DIR/kelp (deleted)" ] || continue
	# Its command: the first argument that is not a flag (kelp --debug server).
	case "\$(tr '\0' '\n' <"\$p/cmdline" 2>/dev/null | sed 1d | grep -v -m1 '^-')" in
		server | agent) pids="\$pids \${p#/proc/}" ;;
	esac
done
if [ -n "\$pids" ]; then
	# shellcheck disable=SC2086
	kill -TERM \$pids 2>/dev/null
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		# shellcheck disable=SC2086
		kill -0 \$pids 2>/dev/null || break
		sleep 1
	done
fi
# kelp killall reads the same KELP_* variables the services ran with, so
# it finds their data and run directories.
for env in "$SYSTEMD_DIR"/kelp*.service.env "$ETC_DIR"/kelp*.env; do
	[ -f "\$env" ] || continue
	# shellcheck disable=SC1090
	(set -a; . "\$env"; set +a; "$BIN_DIR/kelp" killall)
	ran=1
done
[ -n "\${ran:-}" ] || "$BIN_DIR/kelp" killall
KILLALL
chmod 0755 "$KILLALL"
info "installed $KILLALL"

# --- the uninstall script, one per service ---

cat >"$UNINSTALL" <<UNINSTALL
#!/bin/sh
# Stops and removes the $NAME service; when no other kelp service is left,
# stops the data plane (kelp-killall.sh) and removes kelp and its state.
set -u
if [ -d "$ROOT/run/systemd/system" ]; then
	systemctl disable --now $NAME
elif command -v rc-service >/dev/null 2>&1; then
	rc-service $NAME stop
	rc-update delete $NAME default
fi
last=1
for f in "$SYSTEMD_DIR"/kelp*.service "$OPENRC_DIR"/kelp*; do
	[ -f "\$f" ] || continue
	case "\$(basename "\$f")" in $NAME | $NAME.service) ;; *) last= ;; esac
done
# Before the environment file goes: kelp-killall.sh reads it to find the
# data and run directories the service used.
[ -z "\$last" ] || "$KILLALL"
rm -f "$SYSTEMD_DIR/$NAME.service" "$SYSTEMD_DIR/$NAME.service.env" "$OPENRC_DIR/$NAME" "$ETC_DIR/$NAME.env" "$LOG_DIR/$NAME.log"
if [ -d "$ROOT/run/systemd/system" ]; then
	systemctl daemon-reload
	systemctl reset-failed $NAME 2>/dev/null
fi
rm -f "$UNINSTALL"
if [ -z "\$last" ]; then
	echo "$NAME uninstalled; other kelp services remain, so kelp and its state stay"
	exit 0
fi
[ -L "$BIN_DIR/kubectl" ] && [ "\$(readlink "$BIN_DIR/kubectl")" = kelp ] && rm -f "$BIN_DIR/kubectl"
rm -rf "$ETC_DIR" "$DATA_DIR" "$RUN_DIR"
rm -f "$BIN_DIR/kelp" "$KILLALL"
echo "kelp uninstalled"
UNINSTALL
chmod 0755 "$UNINSTALL"
info "installed $UNINSTALL"

# --- the service's environment ---

# Every KELP_ variable but the installer's own goes to the service, as k3s
# writes K3S_*: kelp's flags read them (KELP_URL, KELP_TOKEN, KELP_NODE_NAME,
# ...). Values are single-quoted, which both systemd's EnvironmentFile and
# sh (openrc sources the file) read literally. The file holds the token:
# 0600 from its creation.
mkdir -p "$(dirname "$ENV_FILE")"
(umask 077 && : >"$ENV_FILE")
chmod 0600 "$ENV_FILE"
for var in $(env | sed -n 's/^\(KELP_[A-Za-z0-9_]*\)=.*/\1/p' | sort -u); do
	[ "$var" = KELP_BINARY ] && continue
	eval "[ -n \"\${$var+set}\" ]" || continue # $var is a checked identifier; unset: a line of a multi-line value
	val=
	eval "val=\${$var}"
	# An empty value is left out: kelp would parse it (a number flag fails on "").
	[ -n "$val" ] || continue
	case "$val" in
		*\'* | *"
"*) fatal "$var contains a quote or a newline; the environment file cannot hold it" ;;
	esac
	printf "%s='%s'\n" "$var" "$val" >>"$ENV_FILE"
done
info "wrote $ENV_FILE"

# --- the service ---

mkdir -p "$(dirname "$SERVICE_FILE")"
if [ "$INIT" = openrc ]; then
	cat >"$SERVICE_FILE" <<OPENRC
#!/sbin/openrc-run
# kelp $CMD under openrc, supervised as k3s's service is.
description="kelp: Kubernetes in one binary ($CMD)"

depend() {
	after network-online
	want cgroups
}

supervisor=supervise-daemon
name=$NAME
command="$BIN_DIR/kelp"
command_args="$ARGS"
output_log="$LOG_DIR/$NAME.log"
error_log="$LOG_DIR/$NAME.log"
pidfile="$ROOT/var/run/$NAME.pid"
respawn_delay=5
respawn_max=0

set -o allexport
if [ -f /etc/environment ]; then . /etc/environment; fi
if [ -f "$ENV_FILE" ]; then . "$ENV_FILE"; fi
set +o allexport
OPENRC
	chmod 0755 "$SERVICE_FILE"
else
	cat >"$SERVICE_FILE" <<UNIT
[Unit]
Description=kelp: Kubernetes in one binary ($CMD)
Documentation=https://github.com/kelp-project/kelp
Wants=network-online.target
After=network-online.target

[Install]
WantedBy=multi-user.target

[Service]
# kelp does not call sd_notify, so not Type=notify: exec counts it started
# once the binary runs, and fails the start if it cannot be executed.
Type=exec
EnvironmentFile=-/etc/default/%N
EnvironmentFile=-$ENV_FILE
# Only kelp is stopped on stop and restart: containerd, the shims and the
# pods stay (the data plane outlives kelp); kelp-killall.sh stops them.
KillMode=process
# kelp creates the pods' cgroups itself.
Delegate=yes
LimitNOFILE=1048576
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
TimeoutStartSec=0
Restart=always
RestartSec=5s
# Built into some kernels, modules in others; kelp needs both loaded.
ExecStartPre=-/sbin/modprobe br_netfilter
ExecStartPre=-/sbin/modprobe overlay
ExecStart=$BIN_DIR/kelp $ARGS
UNIT
fi
info "wrote $SERVICE_FILE"

# --- enable and start ---

if [ "${INSTALL_KELP_SKIP_ENABLE:-false}" = true ]; then
	info "not enabling $NAME (INSTALL_KELP_SKIP_ENABLE=true)"
	exit 0
fi
case "$INIT" in
	systemd)
		systemctl daemon-reload
		systemctl enable "$NAME"
		;;
	openrc) rc-update add "$NAME" default ;;
esac
if [ "${INSTALL_KELP_SKIP_START:-false}" = true ]; then
	info "not starting $NAME (INSTALL_KELP_SKIP_START=true)"
	exit 0
fi
# restart, not start: a reinstall replaces the binary under a running kelp.
case "$INIT" in
	systemd) systemctl restart "$NAME" ;;
	openrc) rc-service "$NAME" restart ;;
	none)
		info "no systemd or openrc here: start kelp with: (set -a; . $ENV_FILE; nohup $BIN_DIR/kelp $ARGS >$LOG_DIR/$NAME.log 2>&1 &)"
		exit 0
		;;
esac
if [ "$CMD" = server ]; then
	info "$NAME started; kubeconfig: ${KELP_WRITE_KUBECONFIG:-/etc/kelp/kelp.yaml}, join token: $DATA_DIR/server/node-token"
else
	info "$NAME started, joining $KELP_URL"
fi
