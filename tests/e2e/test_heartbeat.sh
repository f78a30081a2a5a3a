#!/usr/bin/env bash
# [postgres] heartbeat_interval_ms: while another database in the same
# cluster writes heavily and the outbox's database is idle, the slot's
# restart_lsn moves past the WAL written before (PostgreSQL can recycle
# it), and the heartbeats come back on the stream (counted in /metrics,
# their round trip in outboxd_commit_to_ack_seconds{source="heartbeat"})
# without producing anything. The same workload with heartbeats off is
# measured and reported for comparison only: on PostgreSQL 15 outboxd's
# confirmation of keepalive positions already lets restart_lsn follow, in
# steps at each running-transactions record (every ~15 s).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init heartbeat
pg_start
psql_q "CREATE DATABASE busy"
psql -XAtq -v ON_ERROR_STOP=1 -d busy -c "CREATE TABLE public.t (id bigserial PRIMARY KEY, note text)"
broker_start

slot_lsn() { psql_q "SELECT $1 FROM pg_replication_slots WHERE slot_name = 'outboxd'"; }

# busy_phase NAME [outboxd args]: starts outboxd, delivers one event, then
# writes in database busy (~2 MB of WAL a second) until the slot's
# restart_lsn has passed the WAL position at the start, for at most 45 s.
# Sets PHASE_SECONDS (-1 when it did not) and PHASE_WAL (bytes written).
busy_phase() {
    local name=$1 w0 t0 writer
    shift
    outboxd_start "$@"
    psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
            VALUES (gen_random_uuid(), 'Beat', 'beat-$name', 1, 'Started', '{}')"
    wait_caught_up 60
    w0=$(current_lsn)
    step "$name: writes to database busy only, until restart_lsn passes $w0"
    rm -f "$T/writer.stop"
    e2e_bg bash -c 'while [[ ! -e "$1" ]] && psql -XAtq -v ON_ERROR_STOP=1 -d busy \
        -c "INSERT INTO public.t (note) SELECT repeat(\$\$x\$\$, 100) FROM generate_series(1, 2000)"; do
        sleep 0.25; done' _ "$T/writer.stop" >/dev/null 2>&1
    writer=$E2E_BG_PID
    t0=$SECONDS
    PHASE_SECONDS=-1
    while ((SECONDS - t0 < 45)); do
        if [[ "$(psql_q "SELECT restart_lsn >= '$w0'::pg_lsn FROM pg_replication_slots WHERE slot_name = 'outboxd'")" == t ]]; then
            PHASE_SECONDS=$((SECONDS - t0))
            break
        fi
        sleep 0.5
    done
    touch "$T/writer.stop"
    wait "$writer" 2>/dev/null || true
    PHASE_WAL=$(psql_q "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$w0')::bigint")
    info "$name: restart_lsn $(slot_lsn restart_lsn), passed $w0 after ${PHASE_SECONDS}s (-1: not within 45s); $PHASE_WAL bytes of WAL written meanwhile"
}

busy_phase "heartbeat off"
off_seconds=$PHASE_SECONDS
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"

busy_phase "heartbeat on" --set postgres.heartbeat_interval_ms=500
((PHASE_SECONDS >= 0)) || fail "with heartbeats restart_lsn did not pass the idle position within 45 s"
# The other database was busy meanwhile: at least one of the writer's
# batches (2,000 rows, about 300 kB of WAL) is past the start. (How much
# more depends on the machine's speed and how soon restart_lsn moved: 4 MB
# was asked before, and a loaded CI machine wrote 3.8 MB.)
((PHASE_WAL > 250000)) || fail "the busy database wrote only $PHASE_WAL bytes of WAL meanwhile (not one batch)"
info "ok: with heartbeats restart_lsn moved on after ${PHASE_SECONDS}s of busy writes (without: ${off_seconds}s)"

step "heartbeats in /metrics"
http_get /metrics >"$T/metrics.txt"
assert_eq 200 "$HTTP_STATUS" "/metrics status"
sent=$(awk '$1 == "outboxd_heartbeats_sent_total" { print $2 }' "$T/metrics.txt")
seen=$(awk '$1 == "outboxd_heartbeats_received_total" { print $2 }' "$T/metrics.txt")
info "heartbeats sent $sent, seen back on the stream $seen"
((sent >= 4)) || fail "only $sent heartbeats sent at 500 ms intervals"
((seen >= sent - 2 && seen <= sent)) || fail "$seen heartbeats came back of $sent sent"
rtt=$(awk '$1 == "outboxd_commit_to_ack_seconds_count{source=\"heartbeat\"}" { print $2 }' "$T/metrics.txt")
assert_eq "$seen" "$rtt" "heartbeat round trips in the latency histogram"

step "no event from heartbeats"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
check_delivery --exactly-once
assert_eq 2 "$(dump_count "$T/check.dump.jsonl")" "messages"
e2e_pass
