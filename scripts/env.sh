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
