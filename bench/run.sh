#!/usr/bin/env bash
# bench/run.sh — make bench: measure payhook and its peer side by side and
# regenerate the generated section of docs/benchmarks.md.
#
# One run, on one durable PostgreSQL cluster (scripts/pg.sh with
# PAYHOOK_PG_DURABLE=1: fsync, full_page_writes and synchronous_commit on):
#   1. payhook bench: the floor, payhook on SQLite, payhook on PostgreSQL
#      and stripe-sync-engine (bench/peer) on the same cluster, at c=16,
#      c=64 and a fixed rate, every figure a ratio of the floor;
#   2. ack throughput with 1, 2 and 3 payhook serve processes on one
#      PostgreSQL (each with its own floor);
#   3. database bytes per stored event, both engines and the peer;
#   4. memory and goroutines of a payhook serve over a soak at a fixed rate;
#   5. with BENCH_BACKLOG: how fast a backlog of N events drains;
#   6. processing alone: a c=64 load held, then worked off (--hold);
# then cmd/benchdoc writes docs/benchmarks.md's generated section and the
# chart. Sizes are variables (make bench BENCH_EVENTS=20000 ...):
#
#   BENCH_EVENTS      distinct events per load (2000)
#   BENCH_DUPLICATES  redeliveries per load (a tenth of BENCH_EVENTS)
#   BENCH_RATE        the fixed-rate load, deliveries/s (1000)
#   BENCH_SOAK        soak seconds (60; BENCH_LONG=1: 600)
#   BENCH_SOAK_RATE   soak deliveries/s (50)
#   BENCH_STALL       how long a drain may make no progress before the run fails (3m)
#   BENCH_INSTANCES   instance counts (1,2,3; "" skips them)
#   BENCH_BACKLOG     backlog sizes ("" skips them; BENCH_LONG=1: 10000,1000000)
#   BENCH_DOC         the file to regenerate (docs/benchmarks.md; "" only prints)
#   BENCH_DIR         where the run's files go (a fresh dir under /var/tmp)
#
# Needs Go, PostgreSQL's server binaries (scripts/pg.sh installs them as
# root), psql, node >= 20 and npm (the peer's packages come from the npm
# registry, once, into a cache dir), curl and jq.
set -euo pipefail

# The whole script is one block, read before it runs: editing the file
# during a run does not change the run.
{
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
export PATH="/usr/local/go/bin:$PATH"

EVENTS="${BENCH_EVENTS:-2000}"
DUPS="${BENCH_DUPLICATES:-$((EVENTS / 10))}"
RATE="${BENCH_RATE:-1000}"
SOAK="${BENCH_SOAK:-60}"
[[ "${BENCH_LONG:-}" == 1 && -z "${BENCH_SOAK:-}" ]] && SOAK=600
SOAK_RATE="${BENCH_SOAK_RATE:-50}"
STALL="${BENCH_STALL:-3m}"
INSTANCES="${BENCH_INSTANCES-1,2,3}"
BACKLOG="${BENCH_BACKLOG-}"
[[ "${BENCH_LONG:-}" == 1 && -z "${BENCH_BACKLOG+x}" ]] && BACKLOG=10000,1000000
DOC="${BENCH_DOC-docs/benchmarks.md}"
DIR="${BENCH_DIR:-$(mktemp -d /var/tmp/payhook-bench.XXXXXX)}"
mkdir -p "$DIR"

log() { printf 'bench: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
for c in go psql node npm curl jq; do command -v "$c" >/dev/null || die "$c is not installed"; done

PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PAYHOOK_PG_STATE="$DIR/pg/state" scripts/pg.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

uptime_now() { uptime | sed 's/.*load average: //'; }
START="$(date -u '+%Y-%m-%d %H:%M UTC')"
UPTIME_START="$(uptime_now)"
log "run files in $DIR; load average $UPTIME_START"

# --- the database cluster, the binary, the peer ------------------------------
PG="$(PAYHOOK_PG_DURABLE=1 PAYHOOK_PG_STATE="$DIR/pg/state" PAYHOOK_PG_PORT=58432 scripts/pg.sh start)"
PGBASE="${PG%/payhook\?*}"
pgdb() { printf '%s/%s?sslmode=disable' "$PGBASE" "$1"; }
for d in run peer empty inst soak backlog held; do psql "$PG" -qXc "CREATE DATABASE $d" >/dev/null; done
# The commit the binary is built from, read now: the tree may move on
# while the run lasts.
COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo '+changes')"
go build -o "$DIR/payhook" ./cmd/payhook
PAYHOOK="$DIR/payhook"
"$PAYHOOK" migrate --db "$(pgdb empty)" >/dev/null 2>&1
"$PAYHOOK" migrate --db "sqlite://$DIR/empty.db" >/dev/null 2>&1

bench/peer/peer.sh migrate "$(pgdb peer)"
peer_before="$(psql "$(pgdb peer)" -AtXc 'SELECT pg_database_size(current_database())')"
SECRET="whsec_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' | cut -c1-32)"

# start_bg LOGFILE CMD...: start a command in the background, its stdout
# and stderr in LOGFILE; its pid in PIDS and $BG.
start_bg() {
	local out="$1"
	shift
	"$@" >"$out" 2>&1 &
	BG=$!
	PIDS+=("$BG")
}
# wait_line FILE REGEX PID: wait until FILE has a line matching REGEX,
# printing it; fail if PID exits first.
wait_line() {
	local i
	for ((i = 0; i < 600; i++)); do
		if grep -m1 -E "$2" "$1" 2>/dev/null; then return 0; fi
		kill -0 "$3" 2>/dev/null || { cat "$1" >&2; die "process $3 exited before saying '$2'"; }
		sleep 0.2
	done
	cat "$1" >&2
	die "no '$2' in $1 after 120 s"
}

start_bg "$DIR/peer.log" bench/peer/peer.sh serve "$(pgdb peer)" "$SECRET"
PEER_PID=$BG
PEER_URL="$(wait_line "$DIR/peer.log" '^listening ' "$PEER_PID" | awk '{print $2}')"
log "peer listening at $PEER_URL"

# A payhook serve process on database $1, port $2, with the source "bench".
cat >"$DIR/payhook.yaml" <<EOF
sources:
  - name: bench
    provider: stripe
    environment: test
    secrets: ["$SECRET"]
EOF
serve() {
	start_bg "$DIR/serve-$2.log" "$PAYHOOK" serve --config "$DIR/payhook.yaml" --db "$1" --addr "127.0.0.1:$2"
	local pid=$BG i
	for ((i = 0; i < 600; i++)); do
		curl -fsS "http://127.0.0.1:$2/healthz" >/dev/null 2>&1 && return 0
		kill -0 "$pid" 2>/dev/null || { cat "$DIR/serve-$2.log" >&2; die "payhook serve on port $2 exited"; }
		sleep 0.2
	done
	die "payhook serve on port $2 did not answer /healthz"
}

COMMON=(--event payment.succeeded --events "$EVENTS" --duplicates "$DUPS" --stall "$STALL")
: >"$DIR/commands.txt"
cmdline() {
	printf '%s\n' "$*" | sed -e "s|$DIR|\$RUN|g" -e "s|$SECRET|\$SECRET|g" -e "s|$REPO/||g" -e "s|$PGBASE|\$PG|g" \
		-e "s|$PEER_URL|\$PEER|g" -e 's|?sslmode=disable||g' >>"$DIR/commands.txt"
}
cmdline "PAYHOOK_PG_DURABLE=1 scripts/pg.sh start   # PostgreSQL at \$PG: fsync, full_page_writes, synchronous_commit on; WAL made ahead"
cmdline "bench/peer/peer.sh migrate \$PG/peer && bench/peer/peer.sh serve \$PG/peer \$SECRET   # at \$PEER"

# --- 1. side by side ---------------------------------------------------------
log "side by side: floor, sqlite, postgres, peer at c=16, c=64, rate=$RATE/s ($EVENTS + $DUPS events per load)"
SVG="$DIR/bench.svg"
args=(bench --floor --db "sqlite://$DIR/run.db" --db "$(pgdb run)" --url "peer=$PEER_URL" --secret "$SECRET"
	"${COMMON[@]}" --concurrency 16,64 --rate "$RATE" --svg "$SVG" --json)
cmdline "payhook ${args[*]} > run.json"
"$PAYHOOK" "${args[@]}" >"$DIR/run.json"
ROWS=()
row() { # figure target value note
	ROWS+=("$(jq -nc --arg f "$1" --arg t "$2" --arg v "$3" --arg n "$4" --arg l "$(uptime_now)" \
		'{figure:$f, target:$t, value:$v, note:$n, load_avg:$l}')")
}

# --- 3. bytes per stored event (the run's databases) --------------------------
pgsize() { psql "$1" -AtXc 'SELECT pg_database_size(current_database())'; }
fsize() { local s=0 f; for f in "$1" "$1-wal"; do [[ -f "$f" ]] && s=$((s + $(stat -c %s "$f"))); done; echo "$s"; }
per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { if (n > 0) printf "%.0f", (a - b) / n; else print "–" }'; }
n_pg="$(psql "$(pgdb run)" -AtXc 'SELECT count(*) FROM payhook_events')"
n_peer="$(psql "$(pgdb peer)" -AtXc 'SELECT count(*) FROM stripe.payment_intents')"
n_sqlite="$(sqlite3 "$DIR/run.db" 'SELECT count(*) FROM payhook_events' 2>/dev/null || echo 0)"
sqlite3 "$DIR/run.db" 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null 2>&1 || true
row "database bytes per stored event" sqlite "$(per "$(fsize "$DIR/run.db")" "$(fsize "$DIR/empty.db")" "$n_sqlite") B" \
	"file size less an empty migrated file's, over $n_sqlite events: event, job, billing rows, indexes" 
row "database bytes per stored event" postgres "$(per "$(pgsize "$(pgdb run)")" "$(pgsize "$(pgdb empty)")" "$n_pg") B" \
	"pg_database_size less an empty migrated database's, over $n_pg events: event, River job, billing rows, indexes"
row "database bytes per stored event" peer "$(per "$(pgsize "$(pgdb peer)")" "$peer_before" "$n_peer") B" \
	"pg_database_size less after its migrations, over $n_peer payment intents (one row each, no event log)"
cmdline "# bytes per event: pg_database_size / file size after the run, less an empty migrated database's"

# --- 2. instances on one PostgreSQL --------------------------------------------
if [[ -n "$INSTANCES" ]]; then
	"$PAYHOOK" migrate --db "$(pgdb inst)" >/dev/null 2>&1
	urls=()
	INST_PIDS=()
	running=0
	echo '[]' >"$DIR/instances.json"
	for n in ${INSTANCES//,/ }; do
		while ((running < n)); do
			running=$((running + 1))
			serve "$(pgdb inst)" $((18080 + running))
			INST_PIDS+=("$BG")
			urls+=("http://127.0.0.1:$((18080 + running))/webhooks/bench")
		done
		log "ack throughput with $n instance(s) on one PostgreSQL"
		list="$(IFS=,; echo "${urls[*]:0:n}")"
		args=(bench --floor --url "pg-$n=$list" --url-db "$(pgdb inst)" --secret "$SECRET" "${COMMON[@]}" --concurrency 64 --json)
		"$PAYHOOK" "${args[@]}" >"$DIR/inst-$n.json"
		jq -s '.[0] + [.[1].results[]]' "$DIR/instances.json" "$DIR/inst-$n.json" >"$DIR/inst.tmp"
		mv "$DIR/inst.tmp" "$DIR/instances.json"
	done
	jq '{results: .}' "$DIR/instances.json" >"$DIR/inst.tmp" && mv "$DIR/inst.tmp" "$DIR/instances.json"
	for p in "${INST_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	cmdline "payhook serve --config payhook.yaml --db \$PG/inst --addr 127.0.0.1:1808N   # N = 1..3, started one more per row"
	cmdline "payhook bench --floor --url pg-N=http://127.0.0.1:18081/webhooks/bench,... --url-db \$PG/inst --secret \$SECRET ${COMMON[*]} --concurrency 64 --json"
fi

# --- 4. soak: memory and goroutines at a fixed rate ----------------------------
if ((SOAK > 0)); then
	"$PAYHOOK" migrate --db "$(pgdb soak)" >/dev/null 2>&1
	serve "$(pgdb soak)" 18090
	log "soak: $SOAK s at $SOAK_RATE/s against payhook serve on PostgreSQL"
	metric() { awk -v m="$1" '$1 == m { printf "%.0f", $2 }' "$2"; }
	(
		while :; do
			curl -fsS http://127.0.0.1:18090/metrics >"$DIR/m.txt" 2>/dev/null &&
				printf '%s %s %s %s\n' "$(date +%s)" "$(metric go_goroutines "$DIR/m.txt")" \
					"$(metric go_memstats_heap_inuse_bytes "$DIR/m.txt")" "$(metric process_resident_memory_bytes "$DIR/m.txt")"
			sleep 5
		done
	) >"$DIR/soak.samples" &
	PIDS+=($!)
	SAMPLER=$!
	args=(bench --url "soak=http://127.0.0.1:18090/webhooks/bench" --url-db "$(pgdb soak)" --secret "$SECRET"
		--event payment.succeeded --events $((SOAK * SOAK_RATE)) --duplicates 0 --rate "$SOAK_RATE" --concurrency "" --stall "$STALL" --json)
	"$PAYHOOK" "${args[@]}" >"$DIR/soak.json"
	kill "$SAMPLER" 2>/dev/null || true
	cmdline "payhook serve --config payhook.yaml --db \$PG/soak --addr 127.0.0.1:18090   # /metrics sampled every 5 s"
	cmdline "payhook bench --url soak=http://127.0.0.1:18090/webhooks/bench --url-db \$PG/soak --secret \$SECRET --event payment.succeeded --events $((SOAK * SOAK_RATE)) --duplicates 0 --rate $SOAK_RATE --concurrency '' --json"
	# The first sample after a tenth of the soak (warm), the last, the maximum.
	summary="$(awk -v skip="$((SOAK / 10))" '
		NR == 1 { t0 = $1 }
		$1 - t0 >= skip && $2 != "" {
			if (!n) { g0 = $2; h0 = $3; r0 = $4 }
			g1 = $2; h1 = $3; r1 = $4; n++
			if ($2 > gm) gm = $2; if ($3 > hm) hm = $3; if ($4 > rm) rm = $4
		}
		END {
			if (!n) { print "no samples"; exit }
			printf "goroutines %d → %d (max %d); heap in use %.1f → %.1f MiB (max %.1f); RSS %.1f → %.1f MiB (max %.1f); %d samples",
				g0, g1, gm, h0/1048576, h1/1048576, hm/1048576, r0/1048576, r1/1048576, rm/1048576, n
		}' "$DIR/soak.samples")"
	acks="$(jq -r '.results[0] | "\(.acked) of \(.sent) acked, p99 \(.latency.p99 / 1e6 | floor) ms, drain \(.drain / 1e9 | floor) s"' "$DIR/soak.json")"
	row "memory and goroutines over a ${SOAK}-s soak at ${SOAK_RATE}/s" postgres "$summary" "$acks; payhook serve's /metrics every 5 s, from ${SOAK}/10 s on"
fi

# --- 5. backlog drain -------------------------------------------------------------
# N events acknowledged as fast as payhook takes them (c=64), while it
# processes; processing is slower than acknowledging, so most of them
# wait: the rate is N over the time from the first delivery until none
# waits. The database starts empty for each size.
if [[ -n "$BACKLOG" ]]; then
	port=18100
	for n in ${BACKLOG//,/ }; do
		port=$((port + 1))
		psql "$PG" -qXc "DROP DATABASE IF EXISTS backlog" -c "CREATE DATABASE backlog" >/dev/null
		"$PAYHOOK" migrate --db "$(pgdb backlog)" >/dev/null 2>&1
		serve "$(pgdb backlog)" "$port"
		pid=$BG
		log "backlog: $n events"
		args=(bench --url "backlog-$n=http://127.0.0.1:$port/webhooks/bench" --url-db "$(pgdb backlog)" --secret "$SECRET"
			--event payment.succeeded --events "$n" --duplicates 0 --concurrency 64 --stall "$STALL" --json)
		"$PAYHOOK" "${args[@]}" >"$DIR/backlog-$n.json"
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		v="$(jq -r '.results[0] | "\(.stored / (.drain / 1e9) | floor) events/s"' "$DIR/backlog-$n.json")"
		note="$(jq -r '.results[0] | "\(.stored) stored, drained \(.drain / 1e9 | floor) s after the first delivery; acks \(.acks_per_sec | floor)/s, p99 \(.latency.p99 / 1e6 | floor) ms"' "$DIR/backlog-$n.json")"
		row "backlog of $n events, processed/s" postgres "$v" "$note"
	done
	cmdline "payhook bench --url backlog-N=http://127.0.0.1:1810x/webhooks/bench --url-db \$PG/backlog --secret \$SECRET --event payment.succeeded --events N --duplicates 0 --concurrency 64 --json   # N = ${BACKLOG}, a fresh database each"
fi

# --- 6. processing alone -----------------------------------------------------------
# The c=64 load again, each engine's processing held until every delivery
# is answered (--hold): then how fast it works off the events waiting,
# with no delivery to acknowledge, beside the acks/s of the same load.
log "processing alone: $EVENTS events held, then released, on SQLite and PostgreSQL"
args=(bench --db "sqlite://$DIR/held.db" --db "$(pgdb held)" --hold --event payment.succeeded --events "$EVENTS" --duplicates 0
	--concurrency 64 --stall "$STALL" --json)
cmdline "payhook ${args[*]} > held.json"
"$PAYHOOK" "${args[@]}" >"$DIR/held.json"
for t in sqlite postgres; do
	v="$(jq -r --arg t "$t" '.results[] | select(.target == $t) |
		"\(.processed_alone_per_sec | floor) events/s (\(.processed_alone_per_sec / .acks_per_sec * 100 | round / 100)× its acks/s)"' "$DIR/held.json")"
	note="$(jq -r --arg t "$t" '.results[] | select(.target == $t) |
		"\(.held_waiting) events waiting when released; acks \(.acks_per_sec | floor)/s at c=64 in the same load"' "$DIR/held.json")"
	row "processing alone, events held until a c=64 load was answered, processed/s" "$t" "$v" "$note"
done

# --- the document ----------------------------------------------------------------
printf '%s\n' "${ROWS[@]}" | jq -s . >"$DIR/scale.json"
pg_settings="$(jq -r '.machine.databases.postgres // "?"' "$DIR/run.json")"
jq -n --arg start "$START" --arg stop "$(date -u '+%H:%M UTC')" --arg nproc "$(nproc)" \
	--arg cpu "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)" --arg go "$(go env GOVERSION)" \
	--arg pg "$pg_settings" --arg sqlite "$(jq -r '.machine.databases.sqlite // "?"' "$DIR/run.json" | sed 's/^SQLite //')" \
	--arg node "$(node --version)" --arg peer "stripe-sync-engine 0.48.5, stripe 23.1.0 (bench/peer, one Node process, 10 connections)" \
	--arg commit "$COMMIT" \
	--arg u0 "$UPTIME_START" --arg u1 "$(uptime_now)" --arg svg "$( [[ -n "$DOC" ]] && echo bench.svg)" \
	'{start:$start, "end":$stop, nproc:$nproc, cpu:$cpu, go:$go, postgres:$pg, sqlite:$sqlite, node:$node, peer:$peer,
	  commit:$commit, uptime_start:$u0, uptime_end:$u1, svg:$svg}' >"$DIR/env.json"
if [[ -n "$DOC" ]]; then
	cp "$SVG" "$(dirname "$DOC")/bench.svg"
	go run ./cmd/benchdoc --doc "$DOC" --dir "$DIR"
	log "wrote $DOC and $(dirname "$DOC")/bench.svg (run files in $DIR)"
else
	log "run files in $DIR"
fi
exit
}
