#!/usr/bin/env bash
# Builds a release into dist/: kelp for linux on amd64, arm64 and arm
# (ARMv7, GOARM=7: a Raspberry Pi 2 or newer on a 32-bit OS), as
# dist/kelp-<arch>, and dist/sha256sum.txt over them (sha256sum's format).
# That is the layout install.sh installs from (INSTALL_KELP_RELEASE_URL=
# the URL, or the directory, the files are served from).
#
#   bash scripts/release.sh                  # all three
#   bash scripts/release.sh arm64 arm        # some (sha256sum.txt lists those)
#   KELP_VERSION=v0.4.0 bash scripts/release.sh
#
# Each binary is built by scripts/build.sh, the one place for the build
# flags (static: CGO_ENABLED=0, -trimpath, -s -w), with OUT, GOOS, GOARCH,
# GOARM and KELP_VERSION; one version (default: git describe) is stamped
# into all of them. Each build's wall time is printed. The builds run one
# after the other: a cold one takes minutes on a small machine, and they
# share the Go build cache. scripts/release-check.sh then runs the arm
# binaries under qemu.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ensure_go >/dev/null

die() { echo "release.sh: $*" >&2; exit 1; }

export KELP_VERSION="${KELP_VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
dist=dist
arches=("$@")
[ ${#arches[@]} -gt 0 ] || arches=(amd64 arm64 arm)
for arch in "${arches[@]}"; do
	case "$arch" in amd64 | arm64 | arm) ;; *) die "unknown architecture $arch (amd64, arm64 or arm)" ;; esac
done
case "$KELP_VERSION" in *-dirty) echo "release.sh: warning: the tree has uncommitted changes ($KELP_VERSION)" >&2 ;; esac

# One release in dist/ at a time: sha256sum.txt lists exactly the binaries
# beside it, so those of an earlier release go first.
mkdir -p "$dist"
rm -f "$dist"/kelp-* "$dist/sha256sum.txt"

# check ARCH FILE: FILE is a static linux/ARCH Go binary, built as asked
# (the build settings Go records in every binary).
check() {
	local arch="$1" file="$2" info want
	[ -s "$file" ] || die "scripts/build.sh wrote no $file (does it honour OUT?)"
	info="$(go version -m "$file")" || die "$file is not a Go binary"
	want=("GOOS=linux" "GOARCH=$arch" "CGO_ENABLED=0" "-trimpath=true")
	[ "$arch" = arm ] && want+=("GOARM=7")
	for w in "${want[@]}"; do
		grep -qE "^[[:space:]]+build[[:space:]]+$w\$" <<<"$info" || die "$file was not built with $w:
$info"
	done
}

declare -A secs
for arch in "${arches[@]}"; do
	out="$dist/kelp-$arch"
	goarm=()
	[ "$arch" = arm ] && goarm=(GOARM=7)
	echo "== linux/$arch${goarm[*]:+ (${goarm[*]})} -> $out"
	start=$EPOCHREALTIME
	env -u GOARM GOOS=linux GOARCH="$arch" "${goarm[@]}" OUT="$out" bash scripts/build.sh
	secs[$arch]=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
	check "$arch" "$out"
	echo "built $out in ${secs[$arch]}s"
done

names=()
for arch in "${arches[@]}"; do names+=("kelp-$arch"); done
(cd "$dist" && sha256sum "${names[@]}" >sha256sum.txt)

echo
echo "release $KELP_VERSION in $dist/ (wall time of each build, on $(nproc) cores):"
for arch in "${arches[@]}"; do
	printf '  %-11s %6.1f MB  %5ss\n' "kelp-$arch" "$(awk -v s="$(stat -c %s "$dist/kelp-$arch")" 'BEGIN { print s / 1e6 }')" "${secs[$arch]}"
done
echo "  sha256sum.txt"
