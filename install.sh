#!/bin/sh
# kelp installer, in the spirit of k3s's:
#
#   curl -sfL https://<your mirror>/install.sh | sh -
#
# Environment:
#   KELP_BINARY              path of a kelp binary to install (air-gapped installs)
#   INSTALL_KELP_URL         URL to download the binary from when KELP_BINARY is unset
#   INSTALL_KELP_BIN_DIR     where to install (default /usr/local/bin)
#   INSTALL_KELP_SYSTEMD_DIR where unit files go (default /etc/systemd/system)
#   INSTALL_KELP_EXEC        arguments for the service (default "server")
#   INSTALL_KELP_SKIP_START  "true" to write the service without starting it
#   INSTALL_KELP_SKIP_DEPS   "true" not to install containerd and runc
#
# It installs containerd and runc from the OS packages when missing (the
# node agent drives them), kelp, a kubectl symlink, kelp-killall.sh,
# kelp-uninstall.sh, and a service unit. On machines without systemd as PID 1 the unit is written but not
# enabled, and the script prints how to start kelp by hand.
set -eu

BIN_DIR="${INSTALL_KELP_BIN_DIR:-/usr/local/bin}"
SYSTEMD_DIR="${INSTALL_KELP_SYSTEMD_DIR:-/etc/systemd/system}"
EXEC="${INSTALL_KELP_EXEC:-server}"

info() { echo "[INFO]  $*"; }
fatal() { echo "[ERROR] $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || [ -n "${INSTALL_KELP_BIN_DIR:-}" ] || fatal "run as root (or set INSTALL_KELP_BIN_DIR)"
case "$(uname -m)" in
	x86_64|amd64|aarch64|arm64) ;;
	*) fatal "unsupported architecture $(uname -m)" ;;
esac

if [ "${INSTALL_KELP_SKIP_DEPS:-false}" != true ] && ! { command -v containerd >/dev/null 2>&1 && command -v runc >/dev/null 2>&1; }; then
	if command -v apt-get >/dev/null 2>&1; then
		info "installing containerd and runc"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq containerd runc nftables iproute2 conntrack \
			|| fatal "could not install containerd and runc"
	else
		info "containerd and runc are not installed: install them with your package manager (or start kelp with --disable-agent)"
	fi
fi

mkdir -p "$BIN_DIR"
tmp="$(mktemp "$BIN_DIR/.kelp.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
if [ -n "${KELP_BINARY:-}" ]; then
	[ -f "$KELP_BINARY" ] || fatal "KELP_BINARY=$KELP_BINARY does not exist"
	cp "$KELP_BINARY" "$tmp"
elif [ -n "${INSTALL_KELP_URL:-}" ]; then
	if command -v curl >/dev/null 2>&1; then
		curl -sfL -o "$tmp" "$INSTALL_KELP_URL" || fatal "download of $INSTALL_KELP_URL failed"
	elif command -v wget >/dev/null 2>&1; then
		wget -qO "$tmp" "$INSTALL_KELP_URL" || fatal "download of $INSTALL_KELP_URL failed"
	else
		fatal "neither curl nor wget is installed"
	fi
else
	fatal "set KELP_BINARY (a local kelp binary) or INSTALL_KELP_URL"
fi
chmod 0755 "$tmp"
"$tmp" --version >/dev/null 2>&1 || fatal "the downloaded file is not a working kelp binary"
mv -f "$tmp" "$BIN_DIR/kelp"
trap - EXIT
info "installed $BIN_DIR/kelp"

if [ ! -e "$BIN_DIR/kubectl" ] || [ -L "$BIN_DIR/kubectl" ]; then
	ln -sf kelp "$BIN_DIR/kubectl"
	info "linked $BIN_DIR/kubectl -> kelp"
else
	info "$BIN_DIR/kubectl exists and is not ours; use 'kelp kubectl'"
fi

cat > "$BIN_DIR/kelp-killall.sh" <<KILLALL
#!/bin/sh
# Stops kelp, then what it leaves running on purpose: the containers,
# containerd and the pod network (as k3s-killall.sh does).
set -u
[ -d /run/systemd/system ] && systemctl stop kelp 2>/dev/null
pkill -TERM -x kelp 2>/dev/null
sleep 2
"$BIN_DIR/kelp" killall
KILLALL
chmod 0755 "$BIN_DIR/kelp-killall.sh"
info "installed $BIN_DIR/kelp-killall.sh"

cat > "$BIN_DIR/kelp-uninstall.sh" <<UNINSTALL
#!/bin/sh
# Stops kelp and removes what install.sh installed, and kelp's state.
set -u
[ -d /run/systemd/system ] && systemctl disable --now kelp 2>/dev/null
"$BIN_DIR/kelp-killall.sh"
rm -f "$SYSTEMD_DIR/kelp.service"
[ -L "$BIN_DIR/kubectl" ] && [ "\$(readlink "$BIN_DIR/kubectl")" = kelp ] && rm -f "$BIN_DIR/kubectl"
rm -rf /etc/kelp /var/lib/kelp /run/kelp
rm -f "$BIN_DIR/kelp" "$BIN_DIR/kelp-uninstall.sh" "$BIN_DIR/kelp-killall.sh"
echo "kelp uninstalled"
UNINSTALL
chmod 0755 "$BIN_DIR/kelp-uninstall.sh"
info "installed $BIN_DIR/kelp-uninstall.sh"

mkdir -p "$SYSTEMD_DIR"
cat > "$SYSTEMD_DIR/kelp.service" <<UNIT
[Unit]
Description=kelp: Kubernetes in one binary
Documentation=https://github.com/kelp-project/kelp
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
ExecStart=$BIN_DIR/kelp $EXEC
KillMode=process
Delegate=yes
LimitNOFILE=1048576
Restart=always
RestartSec=5s

[Install]
WantedBy=multi-user.target
UNIT
info "wrote $SYSTEMD_DIR/kelp.service"

if [ "${INSTALL_KELP_SKIP_START:-false}" = true ]; then
	info "not starting kelp (INSTALL_KELP_SKIP_START=true)"
elif [ -d /run/systemd/system ]; then
	systemctl daemon-reload
	systemctl enable --now kelp
	info "kelp started; kubeconfig: /etc/kelp/kelp.yaml"
else
	info "no systemd here: start kelp with: nohup $BIN_DIR/kelp $EXEC >/var/log/kelp.log 2>&1 &"
fi
