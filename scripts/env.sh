# Sourced by the scripts: puts a Go toolchain on PATH, installing one from
# the distribution when none is there. GOTOOLCHAIN=auto then fetches the
# version go.mod names through the module proxy if the packaged Go is older.
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
ensure_go() {
	if ! command -v go >/dev/null 2>&1; then
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go
	fi
	go version
}

# The OS packages kelp's node agent runs on (containerd and runc drive the
# containers, nftables the rules, busybox-static goes into the test images).
NODE_PKGS="containerd runc nftables iproute2 conntrack busybox-static"

# ensure_pkgs installs the named Debian/Ubuntu packages that are missing.
ensure_pkgs() {
	local need=()
	for p in "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
	done
	[ ${#need[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing packages ${need[*]}, and not root to install them" >&2
		return 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
}
