#!/usr/bin/env bash
# scripts/pg.sh — a THROWAWAY PostgreSQL cluster for tests and local development.
#
#   scripts/pg.sh start   start a cluster (idempotent); prints the DSN on stdout
#   scripts/pg.sh stop    stop that cluster and delete its files (no-op if none)
#   scripts/pg.sh env     print the DSN of the running cluster (exit 1 if none)
#   scripts/pg.sh status  say whether the cluster is running
#   scripts/pg.sh halt    stop the server but keep its files (a database outage)
#   scripts/pg.sh resume  start a halted server again, on the same port
#
# DSN: postgres://payhook:payhook@127.0.0.1:PORT/payhook?sslmode=disable
# (role payhook is a superuser so tests can CREATE DATABASE).
#
# Environment:
#   PAYHOOK_PG_DIR    create the cluster's directory under this directory
#                     (default: a fresh temp dir under ${TMPDIR:-/tmp}).
#                     Must be traversable by the `postgres` user when run as root.
#   PAYHOOK_PG_STATE  state file recording port and directory of the cluster
#                     (default: <repo>/.pg/state). Give each concurrent user of
#                     the script its own state file (scripts/test.sh does).
#   PAYHOOK_PG_PORT   first port to try (default 55432; goes upward until free).
#   PAYHOOK_PG_DURABLE  1: a cluster that flushes as a production server does
#                     (fsync, full_page_writes and synchronous_commit on), its
#                     WAL segments made ahead as a running server's are
#                     (warm_wal), for benchmarks. Default: fsync and
#                     full_page_writes off, faster for tests, which never
#                     measure the flush.
#
# All progress messages go to stderr; only the DSN goes to stdout.
# If no PostgreSQL server binaries are installed, they are installed with apt-get.
# As root, initdb/postgres run as the `postgres` system user (initdb refuses root).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE_FILE="${PAYHOOK_PG_STATE:-$REPO_ROOT/.pg/state}"
FIRST_PORT="${PAYHOOK_PG_PORT:-55432}"
MAX_PORT_TRIES=200
PG_USER_NAME=postgres # system user that owns the cluster when we run as root

log() { printf 'pg.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

dsn_for_port() {
	printf 'postgres://payhook:payhook@127.0.0.1:%s/payhook?sslmode=disable\n' "$1"
}

# newest installed server version's bin dir, or empty
find_pg_bin() {
	local d best="" bestv=0 v
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]] || continue
		v="$(basename "$(dirname "$d")")"
		[[ "$v" =~ ^[0-9]+$ ]] || continue
		if ((v > bestv)); then bestv=$v best=$d; fi
	done
	printf '%s' "$best"
}

ensure_pg_installed() {
	PG_BIN="$(find_pg_bin)"
	if [[ -z "$PG_BIN" ]]; then
		[[ "$(id -u)" == 0 ]] || die "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin and not root to install them (apt-get install postgresql)"
		log "PostgreSQL server not installed; installing with apt-get (this takes a minute)..."
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >&2
		apt-get install -y -qq --no-install-recommends postgresql >&2 </dev/null
		PG_BIN="$(find_pg_bin)"
		[[ -n "$PG_BIN" ]] || die "apt-get install postgresql did not provide /usr/lib/postgresql/*/bin/initdb"
	fi
}

# as_owner CMD...: run a command as the cluster owner. fd 9 (the state lock)
# is closed so the postmaster does not inherit it and hold the lock forever.
as_owner() {
	if [[ "$(id -u)" == 0 ]]; then
		runuser -u "$PG_USER_NAME" -- "$@" 9>&-
	else
		"$@" 9>&-
	fi
}

ensure_owner_user() {
	[[ "$(id -u)" == 0 ]] || return 0
	if ! id -u "$PG_USER_NAME" >/dev/null 2>&1; then
		log "creating system user $PG_USER_NAME"
		useradd --system --user-group --home-dir /var/lib/postgresql --no-create-home \
			--shell /bin/bash "$PG_USER_NAME"
	fi
}

# port_in_use PORT: true if something accepts TCP connections on 127.0.0.1:PORT
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

read_state() {
	STATE_PORT="" STATE_DIR=""
	[[ -f "$STATE_FILE" ]] || return 1
	local k v
	while IFS='=' read -r k v; do
		case "$k" in
		port) STATE_PORT="$v" ;;
		dir) STATE_DIR="$v" ;;
		esac
	done <"$STATE_FILE"
	[[ -n "$STATE_PORT" && -n "$STATE_DIR" ]]
}

# is the cluster recorded in the state file running and accepting connections?
state_running() {
	read_state || return 1
	[[ -f "$STATE_DIR/data/postmaster.pid" ]] || return 1
	"$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$STATE_PORT" -t 2 >/dev/null 2>&1
}

# remove a cluster directory we created (guarded by our marker file)
remove_dir() {
	local dir="$1"
	[[ -n "$dir" && "$dir" != / && -f "$dir/.payhook-pg" ]] || {
		[[ -n "$dir" && -e "$dir" ]] && log "not removing $dir: no .payhook-pg marker"
		return 0
	}
	rm -rf -- "$dir"
}

stop_dir() {
	local dir="$1"
	if [[ -f "$dir/data/postmaster.pid" ]]; then
		if ! as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1; then
			log "fast shutdown failed; trying immediate"
			as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
		fi
	fi
	remove_dir "$dir"
}

lock_state() {
	mkdir -p "$(dirname "$STATE_FILE")"
	exec 9>"$STATE_FILE.lock"
	flock 9
}

cmd_start() {
	ensure_pg_installed
	lock_state
	if state_running; then
		log "already running on port $STATE_PORT ($STATE_DIR)"
		dsn_for_port "$STATE_PORT"
		return 0
	fi
	if read_state; then
		log "stale state for port $STATE_PORT ($STATE_DIR); cleaning up"
		stop_dir "$STATE_DIR"
		rm -f "$STATE_FILE"
	fi
	ensure_owner_user

	local t0=$SECONDS base
	if [[ -n "${PAYHOOK_PG_DIR:-}" ]]; then
		mkdir -p "$PAYHOOK_PG_DIR"
		base="$(mktemp -d "$(cd "$PAYHOOK_PG_DIR" && pwd)/pg.XXXXXX")"
	else
		base="$(mktemp -d "${TMPDIR:-/tmp}/payhook-pg.XXXXXX")"
	fi
	touch "$base/.payhook-pg"
	[[ "$(id -u)" == 0 ]] && chown "$PG_USER_NAME:" "$base"
	chmod 700 "$base"
	if [[ "$(id -u)" == 0 ]] && ! runuser -u "$PG_USER_NAME" -- test -w "$base"; then
		rm -rf -- "$base"
		die "user $PG_USER_NAME cannot write $base (is a parent directory private?)"
	fi

	# initdb: superuser `postgres`; local socket trusted, TCP needs the password.
	(cd "$base" && as_owner "$PG_BIN/initdb" -D "$base/data" -U postgres -E UTF8 --locale=C \
		--auth-local=trust --auth-host=scram-sha-256 --no-sync >"$base/initdb.log" 2>&1) || {
		cat "$base/initdb.log" >&2
		rm -rf -- "$base"
		die "initdb failed"
	}

	local durable=off
	[[ "${PAYHOOK_PG_DURABLE:-}" == 1 ]] && durable=on
	cat >>"$base/data/postgresql.conf" <<EOF

# --- payhook throwaway test cluster (scripts/pg.sh) ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$base/data'
max_connections = 200
fsync = $durable
full_page_writes = $durable
synchronous_commit = on
logging_collector = off
log_min_messages = warning
EOF
	if [[ $durable == on ]]; then
		# Keeps the WAL segments warm_wal makes, for reuse, as a server
		# that has run does.
		echo "min_wal_size = '1GB'" >>"$base/data/postgresql.conf"
	fi

	# Pick a free port; retry if another process grabs it between check and bind.
	local port=$FIRST_PORT tries=0 started=0
	while ((tries < MAX_PORT_TRIES)); do
		if port_in_use "$port"; then
			port=$((port + 1)) tries=$((tries + 1))
			continue
		fi
		if (cd "$base" && as_owner "$PG_BIN/pg_ctl" -D "$base/data" -l "$base/postgres.log" \
			-o "-p $port" -w -t 60 start >/dev/null 2>&1); then
			started=1
			break
		fi
		if grep -qiE 'could not bind|address already in use|could not create any TCP' "$base/postgres.log" 2>/dev/null; then
			log "port $port taken; trying next"
			: >"$base/postgres.log"
			port=$((port + 1)) tries=$((tries + 1))
			continue
		fi
		tail -n 30 "$base/postgres.log" >&2 || true
		stop_dir "$base"
		die "pg_ctl start failed"
	done
	if ((started == 0)); then
		stop_dir "$base"
		die "no free port found in $FIRST_PORT..$((FIRST_PORT + MAX_PORT_TRIES))"
	fi

	# record state right away so `stop` can clean up even if the rest fails
	printf 'port=%s\ndir=%s\n' "$port" "$base" >"$STATE_FILE.tmp"
	mv "$STATE_FILE.tmp" "$STATE_FILE"

	local i
	for ((i = 0; i < 60; i++)); do
		"$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -t 1 >/dev/null 2>&1 && break
		sleep 0.5
	done
	"$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -t 5 >/dev/null 2>&1 || {
		tail -n 30 "$base/postgres.log" >&2 || true
		die "server on port $port not ready"
	}

	as_owner "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$base/data" -p "$port" -U postgres -d postgres >/dev/null <<'SQL' ||
CREATE ROLE payhook WITH LOGIN SUPERUSER PASSWORD 'payhook';
CREATE DATABASE payhook OWNER payhook;
SQL
		die "creating role/database payhook failed"
	if [[ $durable == on ]]; then warm_wal "$base" "$port"; fi

	log "started PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$port in $((SECONDS - t0))s (dir $base, fsync=$durable)"
	dsn_for_port "$port"
}

# warm_wal DIR PORT: a durable cluster's WAL as a server's that has run.
# A fresh cluster creates and zero-fills a new 16 MB segment each time it
# fills one, in the path of the commit that needs it: the commits then
# waited about 60 ms (PostgreSQL's p99 at c=64 in `make bench`,
# docs/benchmarks.md), a cost a running server, which recycles its
# segments, does not pay. So 64 segments are made now and checkpointed:
# min_wal_size (1GB) keeps them for the commits to reuse. Durability is
# unchanged: fsync, full_page_writes and synchronous_commit stay on.
warm_wal() {
	as_owner "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$1/data" -p "$2" -U postgres -d postgres >/dev/null <<'SQL' ||
CREATE TABLE payhook_warm_wal (n int);
DO $$
BEGIN
	FOR i IN 1..64 LOOP
		INSERT INTO payhook_warm_wal VALUES (i);
		PERFORM pg_switch_wal();
	END LOOP;
END $$;
DROP TABLE payhook_warm_wal;
CHECKPOINT;
SQL
		die "warming the WAL failed"
}

cmd_stop() {
	PG_BIN="$(find_pg_bin)"
	[[ -f "$STATE_FILE" ]] || return 0
	lock_state
	if read_state; then
		if [[ -z "$PG_BIN" ]]; then
			log "no PostgreSQL binaries found; cannot stop cluster in $STATE_DIR"
		else
			stop_dir "$STATE_DIR"
			log "stopped cluster on port $STATE_PORT and removed $STATE_DIR"
		fi
	fi
	rm -f "$STATE_FILE"
}

# halt and resume make an outage of a running cluster (the fault tests):
# the server stops as a crash would look to its clients (immediate
# shutdown), the files and the state stay, and resume starts it again on
# the same port.
cmd_halt() {
	ensure_pg_installed
	lock_state
	read_state || die "no cluster recorded in $STATE_FILE"
	as_owner "$PG_BIN/pg_ctl" -D "$STATE_DIR/data" -m immediate -w -t 60 stop >/dev/null ||
		die "pg_ctl stop failed for $STATE_DIR"
	log "halted cluster on port $STATE_PORT (files kept in $STATE_DIR)"
}

cmd_resume() {
	ensure_pg_installed
	lock_state
	read_state || die "no cluster recorded in $STATE_FILE"
	if state_running; then
		log "already running on port $STATE_PORT"
		return 0
	fi
	(cd "$STATE_DIR" && as_owner "$PG_BIN/pg_ctl" -D "$STATE_DIR/data" -l "$STATE_DIR/postgres.log" \
		-o "-p $STATE_PORT" -w -t 120 start >/dev/null) || {
		tail -n 30 "$STATE_DIR/postgres.log" >&2 || true
		die "pg_ctl start failed for $STATE_DIR"
	}
	log "resumed cluster on port $STATE_PORT"
}

cmd_env() {
	PG_BIN="$(find_pg_bin)"
	[[ -n "$PG_BIN" ]] && state_running || die "no cluster running (state file $STATE_FILE)"
	dsn_for_port "$STATE_PORT"
}

cmd_status() {
	PG_BIN="$(find_pg_bin)"
	if [[ -n "$PG_BIN" ]] && state_running; then
		echo "running: port $STATE_PORT, dir $STATE_DIR"
		dsn_for_port "$STATE_PORT"
	else
		echo "not running"
		return 1
	fi
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
env | dsn) cmd_env ;;
status) cmd_status ;;
halt) cmd_halt ;;
resume) cmd_resume ;;
*)
	echo "usage: $0 start|stop|env|status|halt|resume" >&2
	exit 2
	;;
esac
