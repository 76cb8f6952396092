#!/usr/bin/env bash
# scripts/fuzz.sh — run payhook's fuzz targets, one after another.
#
#   scripts/fuzz.sh                      every Fuzz* target of ./... for FUZZTIME each
#   scripts/fuzz.sh FuzzVerify           the targets named FuzzVerify, in every package that has one
#   scripts/fuzz.sh FuzzVerify ./provider/stripe   that target in that package only
#
# The targets are found with `go test -list '^Fuzz' PKGS`. Each runs with
# `go test -run '^$' -fuzz '^NAME$' -fuzztime FUZZTIME PKG` (go test fuzzes
# one target of one package at a time); new failing inputs land in the
# package's testdata/fuzz/NAME/, to be committed with the fix. Every target
# runs even when one fails; the exit status is 1 if any failed.
#
# Environment:
#   FUZZTIME   how long each target runs (default 30s; e.g. 1m, or 1000x)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"
export PATH="/usr/local/go/bin:$PATH"

log() { printf 'fuzz.sh: %s\n' "$*" >&2; }

name="${1:-}"
pkgs="${2:-./...}"
fuzztime="${FUZZTIME:-30s}"

# `go test -list` prints the matching names of a package, then its
# "ok  <pkg>  <time>" line: pair each name with the package that follows.
list_re='^Fuzz'
[[ -n "$name" ]] && list_re="^${name}\$"
targets=()
pending=()
while IFS= read -r line; do
	case "$line" in
	Fuzz*) pending+=("$line") ;;
	"ok "* | "?  "*)
		pkg="$(awk '{print $2}' <<<"$line")"
		for n in "${pending[@]}"; do targets+=("$pkg $n"); done
		pending=()
		;;
	esac
done < <(go test -list "$list_re" $pkgs)

if ((${#targets[@]} == 0)); then
	log "no fuzz target matches ${name:-Fuzz*} in $pkgs"
	exit 1
fi
log "${#targets[@]} targets, $fuzztime each"

failed=()
for t in "${targets[@]}"; do
	read -r pkg n <<<"$t"
	log "== $n ($pkg)"
	if ! go test -run '^$' -fuzz "^${n}\$" -fuzztime "$fuzztime" "$pkg"; then
		failed+=("$n ($pkg)")
	fi
done

if ((${#failed[@]} > 0)); then
	log "FAILED: ${failed[*]}"
	exit 1
fi
log "all ${#targets[@]} targets ran $fuzztime without a failure"
