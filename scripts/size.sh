#!/usr/bin/env bash
# Measures kelp's size on linux/amd64:
#   - the shipped binary (the launcher with the core inside, compressed),
#     as scripts/build.sh builds it for a release: static, stripped;
#   - the core (the full kelp the launcher extracts and runs), stripped;
#   - where the core's bytes go: the packages, and the modules, whose
#     symbols (code, read-only data, data; `go tool nm -size`) are largest.
#
#   bash scripts/size.sh              # top 30 packages, top 20 modules
#   TOP=50 bash scripts/size.sh
#
# The shipped binary must stay within 70 MB (LIMIT_MB): the script fails
# beyond it. The symbol sizes need the symbol table, which build.sh's
# -s -w strip, so they come from an unstripped link of the same core (same
# packages, same static -trimpath build; the symbol table and DWARF are
# all -s -w remove). That link is only measured, never shipped.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
ensure_go >/dev/null
ensure_pkgs binutils # readelf, size

top="${TOP:-30}"
limit_mb="${LIMIT_MB:-70}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export GOOS=linux GOARCH=amd64
unset GOARM

mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }

echo "== the shipped binary (scripts/build.sh, linux/amd64)"
OUT="$work/kelp" bash scripts/build.sh
shipped=$(stat -c %s "$work/kelp")

# The core, as shipped: what the launcher extracts (into a directory of
# our own, by running it: --help goes to the core).
KELP_EXTRACT_DIR="$work/extract" "$work/kelp" --help >/dev/null
core_file="$(find "$work/extract" -type f -name kelp)"
[ -n "$core_file" ] || { echo "size.sh: the launcher extracted no core" >&2; exit 1; }
core=$(stat -c %s "$core_file")

echo "== the core, unstripped, for its symbol table"
CGO_ENABLED=0 go build -trimpath -o "$work/kelp-core.syms" .
go tool nm -size -sort size "$work/kelp-core.syms" >"$work/nm"
# Where the file's bytes are, by section (the symbol tables and DWARF
# aside, which the shipped core has not). Symbols from .bss and .noptrbss
# on take no room in the file (nm calls some of them D: a 32 MB DRBG
# buffer), so they are left out below.
size -A -d "$work/kelp-core.syms" | awk '$1 ~ /^\./ && $1 !~ /^\.(debug|symtab|strtab|shstrtab|bss|noptrbss)/ && $2 > 0 {
	printf "  %-18s %8.2f MB\n", $1, $2 / 1e6 }' >"$work/sections"
bss_start="$(readelf -SW "$work/kelp-core.syms" | awk '$2 == ".bss" { print $4 }')"
[ -n "$bss_start" ] || { echo "size.sh: no .bss section in the core" >&2; exit 1; }

# Package of each import path's module (std: the standard library).
go list -deps -f '{{.ImportPath}} {{with .Module}}{{.Path}}{{else}}std{{end}}' . >"$work/modules"

# pkg turns a symbol name into its package's import path: the name up to
# the first dot after its last slash (dots in a path's last element are
# %2e in symbol names), ignoring receivers, type arguments and the
# prefixes of type descriptors and itabs. Compiler-made symbols of no
# package (go:string.*, ...) are grouped by their prefix.
awk -v modules="$work/modules" -v out="$work" -v bss="$bss_start" '
	BEGIN { while ((getline l < modules) > 0) { split(l, f, " "); mod[f[1]] = f[2] } }
	function pkg(n,   c, i, s, d) {
		sub(/^go:itab\./, "", n)
		sub(/^type:\.(eq|hash|namedata|importpath)\./, "", n)
		sub(/^type:/, "", n)
		sub(/^[*\[\]0-9]+/, "", n)
		if (n ~ /^go:/) { sub(/\..*/, "", n); return "(" n ")" }
		c = length(n) + 1
		i = index(n, "("); if (i > 0 && i < c) c = i
		i = index(n, "["); if (i > 0 && i < c) c = i
		i = index(n, ","); if (i > 0 && i < c) c = i
		n = substr(n, 1, c - 1)
		s = n; i = 0
		while ((d = index(s, "/")) > 0) { i += d; s = substr(s, d + 1) }
		d = index(s, ".")
		if (d == 0) return "(other)"
		return substr(n, 1, i + d - 1)
	}
	function pad(a) { while (length(a) < 16) a = "0" a; return a }
	$3 ~ /^[TtRrDd]$/ && pad($1) < pad(bss) {
		name = $4; for (k = 5; k <= NF; k++) name = name " " $k
		p = pkg(name); size[p] += $2; total += $2
		m = (p in mod) ? mod[p] : (p ~ /^\(/ ? "(compiler-made)" : "(unknown)")
		msize[m] += $2
	}
	END {
		for (p in size) printf "%d %s\n", size[p], p > (out "/packages")
		for (m in msize) printf "%d %s\n", msize[m], m > (out "/modules.size")
		print total > (out "/total")
	}
' "$work/nm"
total=$(cat "$work/total")
table() { # N FILE: the N largest lines of FILE (bytes name), with MB and %
	sort -rn "$2" | awk -v n="$1" -v t="$total" 'NR <= n { printf "  %7.2f MB  %5.1f%%  %s\n", $1 / 1e6, 100 * $1 / t, $2 }'
}
{
	echo "the core's sections (unstripped build; the shipped core has these alone):"
	cat "$work/sections"
	echo
	echo "symbols in them (text, rodata, data; .gopclntab, the function tables, is not"
	echo "split by package, and grows with .text): $(mb "$total") in $(wc -l <"$work/packages") packages"
	echo
	echo "top $top packages:"
	table "$top" "$work/packages"
	echo
	echo "top 20 modules:"
	table 20 "$work/modules.size"
} >"$work/report"

echo
echo "== kelp size, linux/amd64 ($(go env GOVERSION))"
echo "shipped binary (launcher + compressed core): $shipped bytes ($(mb "$shipped")); limit ${limit_mb} MB"
echo "core (extracted, stripped):                  $core bytes ($(mb "$core"))"
echo
cat "$work/report"
if [ "$shipped" -gt $((limit_mb * 1000 * 1000)) ]; then
	echo "size.sh: the shipped binary is over ${limit_mb} MB" >&2
	exit 1
fi
