#!/usr/bin/env bash
# tests/bench/emit.sh - what the table-less outbox (sql/outbox_emit.sql)
# gains, in one run, against the two ways of writing an outbox table:
#
#   insert   INSERT INTO public.outbox_events (the rows stay)
#   insdel   INSERT, then DELETE of the same row in the same transaction
#            (the usual way to keep the table empty; outboxd publishes the
#            insert, the delete is no event)
#   emit     SELECT outbox_emit(...): a transactional logical message
#
# Every method writes the same events (the ~300-byte jsonb payload of
# bench_lib.sh, 1,000 aggregate ids, one event per transaction) through a
# PL/pgSQL function of the same shape (bench_insert, bench_insdel,
# bench_emit), so pgbench runs the same statement count:
#   1. writer: pgbench -c CLIENTS -j 2 -T SECONDS -n, nothing reading the
#      slot: committed transactions per second (each one event);
#   2. WAL: pg_current_wal_lsn() before and after, divided by the events
#      (full_page_writes = on and a CHECKPOINT before each method, so each
#      pays its page images alike; fsync stays off as in every e2e test:
#      the rate is the writer's CPU and WAL volume, not a disk's flush);
#   3. drain: the slot was created before the writer ran, so outboxd then
#      finds the method's whole backlog; the time from its start until the
#      slot's confirmed_flush_lsn reaches the end LSN (every event ACKed),
#      events per second. The run fails unless outboxd says it produced and
#      had ACKed exactly the events pgbench committed.
# The table is truncated and VACUUMed before each method. With --rounds N
# the methods run N times, the order rotating; the report gives per-round
# figures and the ratios of the medians against insert.
#
# Usage: tests/bench/emit.sh [--seconds S] [--clients C] [--rounds N]
#            [--plugin pgoutput|wal2json] [--kafka mock|real] [--out FILE]
#            [--smoke]
# Defaults: 20 s, 4 clients, 1 round, pgoutput, the mock Kafka cluster,
# JSON to $OUTBOXD_BUILD_DIR/bench-emit-<plugin>.json. --smoke: 3 s.
set -Eeuo pipefail

SECS=20 CLIENTS=4 ROUNDS=1 PLUGIN=pgoutput KAFKA=mock OUT=
while [[ $# -gt 0 ]]; do
    case $1 in
    --seconds) SECS=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --plugin) PLUGIN=$2; shift 2 ;;
    --kafka) KAFKA=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --smoke) SECS=3; shift ;;
    -h | --help) sed -n '2,/^set -E/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "emit.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in SECS CLIENTS ROUNDS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "emit.sh: $v must be a positive number" >&2; exit 2; }
done
[[ $PLUGIN == pgoutput || $PLUGIN == wal2json ]] ||
    { echo "emit.sh: --plugin must be pgoutput or wal2json" >&2; exit 2; }
[[ $KAFKA == mock || $KAFKA == real ]] || { echo "emit.sh: --kafka must be mock or real" >&2; exit 2; }
[[ $KAFKA == real ]] && export E2E_KAFKA=real
export OUTBOXD_TEST_PLUGIN=$PLUGIN
export E2E_TIMEOUT=${E2E_TIMEOUT:-3600}
# shellcheck source=../e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
# shellcheck source=bench_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
: "${OUT:=$OUTBOXD_BUILD_DIR/bench-emit-$PLUGIN.json}"

e2e_init bench_emit
RESULTS=$T/results.jsonl
: >"$RESULTS"
now_s() { date +%s.%N; }

bench_pg_start
psql_q "ALTER SYSTEM SET full_page_writes = on" >/dev/null
pg_reload
psql -XAtq -v ON_ERROR_STOP=1 -f "$E2E_SRC_DIR/sql/outbox_emit.sql" >/dev/null ||
    fail "loading sql/outbox_emit.sql failed"
bench_schema public.outbox_events "event_id, aggregate_type, aggregate_id, event_type, payload" |
    psql_q >/dev/null
psql_q <<'SQL' >/dev/null
CREATE FUNCTION bench_insert(n bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
    VALUES (gen_random_uuid(), 'Order', 'order-' || (n % 1000), 'OrderPlaced', bench_payload(n));
END $$;
CREATE FUNCTION bench_insdel(n bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    id uuid := gen_random_uuid();
BEGIN
    INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
    VALUES (id, 'Order', 'order-' || (n % 1000), 'OrderPlaced', bench_payload(n));
    DELETE FROM public.outbox_events WHERE event_id = id;
END $$;
CREATE FUNCTION bench_emit(n bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM public.outbox_emit('Order', 'order-' || (n % 1000), 'OrderPlaced', bench_payload(n));
END $$;
SQL
info "payload: $(psql_q "SELECT octet_length(bench_payload(123456)::text)") bytes of jsonb text"
broker_start
if [[ $KAFKA == mock ]]; then broker_cmd "create outbox.event.Order 4"; fi

# measure METHOD ROUND: one method's writer, WAL and drain; records them.
measure() {
    local m=$1 r=$2 slot=emit_${1}_$2 lsn0 lsn1 events tps wal t0 t1 rc=0 line pid
    step "round $r: $m"
    psql_q "TRUNCATE public.outbox_events" >/dev/null
    psql_q "VACUUM public.outbox_events" >/dev/null
    psql_q "SELECT 1 FROM pg_create_logical_replication_slot('$slot', '$PLUGIN')" >/dev/null
    psql_q "CHECKPOINT" >/dev/null
    printf '\\set n random(1, 1000000000)\nSELECT bench_%s(:n);\n' "$m" >"$T/$m.sql"
    lsn0=$(current_lsn)
    "$PG_BINDIR/pgbench" -n -c "$CLIENTS" -j 2 -T "$SECS" -f "$T/$m.sql" \
        >"$T/pgbench.$m.$r.log" 2>&1 || fail "pgbench ($m) failed: $(tail -5 "$T/pgbench.$m.$r.log")"
    lsn1=$(current_lsn)
    events=$(sed -nE 's/^number of transactions actually processed: ([0-9]+).*/\1/p' "$T/pgbench.$m.$r.log")
    tps=$(sed -nE 's/^tps = ([0-9.]+) .*/\1/p' "$T/pgbench.$m.$r.log" | head -1)
    [[ -n "$events" && -n "$tps" ]] || fail "pgbench ($m) printed no counts: $(cat "$T/pgbench.$m.$r.log")"
    wal=$(psql_q "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')")
    info "$m: $events events, $tps commits/s, $((wal / events)) WAL bytes/event"
    # the drain of that backlog
    bench_outboxd_conf "$slot" "$T/$slot.ini" $'\n[outbox]\nmessage_prefix = outbox'
    slot_wait_for "$slot" "confirmed_flush_lsn >= '$lsn1'::pg_lsn" >"$T/done.$slot" 2>&1 &
    pid=$!
    sleep 0.3
    t0=$(now_s)
    "$OUTBOXD_BUILD_DIR/outboxd" -c "$T/$slot.ini" >"$T/outboxd.$slot.log" 2>&1 </dev/null &
    RELAY_PID=$!
    E2E_BG_PIDS+=("$RELAY_PID")
    wait "$pid" || fail "waiting for slot $slot: $(cat "$T/done.$slot")"
    t1=$(cat "$T/done.$slot")
    kill -TERM "$RELAY_PID"
    wait "$RELAY_PID" || rc=$?
    [[ $rc -eq 0 ]] || fail "outboxd ($m) exited with $rc: $(tail -5 "$T/outboxd.$slot.log")"
    line=$(grep -o 'produced [0-9]* events, [0-9]* ACKed' "$T/outboxd.$slot.log" | tail -1)
    [[ "$line" == "produced $events events, $events ACKed" ]] ||
        fail "outboxd ($m): '$line', expected $events events produced and ACKed"
    psql_q "SELECT pg_drop_replication_slot('$slot')" >/dev/null
    local drain_s
    drain_s=$(printf '%.6f' "$(echo "$t1 - $t0" | bc -l)")
    info "$m: drained $events events in ${drain_s:0:6} s: $(echo "$events / $drain_s" | bc) events/s"
    record method="\"$m\"" round="$r" events="$events" commits_per_s="$tps" wal_bytes="$wal" \
        drain_s="$drain_s"
}

METHODS=(insert insdel emit)
for ((r = 1; r <= ROUNDS; r++)); do
    for ((k = 0; k < 3; k++)); do measure "${METHODS[(r - 1 + k) % 3]}" "$r"; done
done

jq -s --arg plugin "$PLUGIN" --arg kafka "$KAFKA" --argjson secs "$SECS" \
    --argjson clients "$CLIENTS" '
  def median: sort | if length % 2 == 1 then .[length / 2 | floor]
                     else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  map(. + {wal_bytes_per_event: (.wal_bytes / .events), drain_events_per_s: (.events / .drain_s)})
  | . as $runs
  | (reduce ("insert", "insdel", "emit") as $m ({};
       .[$m] = ($runs | map(select(.method == $m)) |
                {commits_per_s: (map(.commits_per_s) | median),
                 wal_bytes_per_event: (map(.wal_bytes_per_event) | median),
                 drain_events_per_s: (map(.drain_events_per_s) | median)}))) as $med
  | {plugin: $plugin, kafka: $kafka, seconds: $secs, clients: $clients, runs: $runs,
     median: $med,
     vs_insert: (reduce ("insdel", "emit") as $m ({};
       .[$m] = {commits: ($med[$m].commits_per_s / $med.insert.commits_per_s),
                wal: ($med[$m].wal_bytes_per_event / $med.insert.wal_bytes_per_event),
                drain: ($med[$m].drain_events_per_s / $med.insert.drain_events_per_s)})),
     emit_vs_insdel: {commits: ($med.emit.commits_per_s / $med.insdel.commits_per_s),
                      wal: ($med.emit.wal_bytes_per_event / $med.insdel.wal_bytes_per_event),
                      drain: ($med.emit.drain_events_per_s / $med.insdel.drain_events_per_s)}}
' "$RESULTS" >"$OUT"
jq -r '
  def r2: . * 100 | round / 100;
  "outbox write methods, \(.plugin), kafka \(.kafka), pgbench \(.clients) clients x \(.seconds) s, one event per transaction",
  "method\tcommits/s\tWAL bytes/event\tdrain events/s",
  (.median | to_entries[] | "\(.key)\t\(.value.commits_per_s | floor)\t\(.value.wal_bytes_per_event | floor)\t\(.value.drain_events_per_s | floor)"),
  "vs insert: insdel commits x\(.vs_insert.insdel.commits | r2), WAL x\(.vs_insert.insdel.wal | r2), drain x\(.vs_insert.insdel.drain | r2); emit commits x\(.vs_insert.emit.commits | r2), WAL x\(.vs_insert.emit.wal | r2), drain x\(.vs_insert.emit.drain | r2)",
  "emit vs insdel: commits x\(.emit_vs_insdel.commits | r2), WAL x\(.emit_vs_insdel.wal | r2), drain x\(.emit_vs_insdel.drain | r2)"
' "$OUT" | column -t -s $'\t'

info "figures in $OUT"
e2e_pass
