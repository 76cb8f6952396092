#!/usr/bin/env bash
# bench/peer/peer.sh — the peer payhook bench measures side by side:
# stripe-sync-engine behind a node:http server (server.js).
#
#   bench/peer/peer.sh install        npm ci the pinned packages into the cache dir
#                                     (once per package-lock.json); prints the dir
#   bench/peer/peer.sh migrate DSN    run stripe-sync-engine's migrations on DSN
#   bench/peer/peer.sh serve DSN SECRET
#                                     serve webhooks signed with SECRET until killed;
#                                     prints "listening URL" on stdout when it accepts
#
# Environment: PAYHOOK_PEER_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/payhook-bench-peer),
# PEER_PORT, PEER_POOL_MAX, PEER_STRIPE_PORT (server.js).
# Needs node >= 20 and npm; the only network use is the npm registry, by npm ci.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${PAYHOOK_PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/payhook-bench-peer}"

die() { printf 'peer.sh: error: %s\n' "$*" >&2; exit 1; }

install() {
	command -v node >/dev/null || die "node is not installed (need node >= 20)"
	command -v npm >/dev/null || die "npm is not installed"
	local major
	major="$(node -p 'process.versions.node.split(".")[0]')"
	((major >= 20)) || die "node $(node --version) is too old (need >= 20)"
	local key dir
	key="$(cat "$HERE/package.json" "$HERE/package-lock.json" | sha256sum | cut -c1-16)"
	dir="$CACHE/$key"
	if [[ ! -f "$dir/.installed" ]]; then
		mkdir -p "$dir"
		cp "$HERE/package.json" "$HERE/package-lock.json" "$dir/"
		printf 'peer.sh: installing stripe-sync-engine into %s\n' "$dir" >&2
		(cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2) || die "npm ci failed"
		touch "$dir/.installed"
	fi
	cp "$HERE/server.js" "$dir/server.js"
	printf '%s\n' "$dir"
}

case "${1:-}" in
install) install ;;
migrate)
	[[ $# == 2 ]] || die "usage: $0 migrate DSN"
	dir="$(install)"
	PEER_DATABASE_URL="$2" exec node "$dir/server.js" migrate
	;;
serve)
	[[ $# == 3 ]] || die "usage: $0 serve DSN SECRET"
	dir="$(install)"
	PEER_DATABASE_URL="$2" PEER_WEBHOOK_SECRET="$3" exec node "$dir/server.js" serve
	;;
*)
	echo "usage: $0 install|migrate DSN|serve DSN SECRET" >&2
	exit 2
	;;
esac
