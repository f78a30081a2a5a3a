#!/usr/bin/env bash
# PostgreSQL 18's idle_replication_slot_timeout (issue 58): a slot nothing
# reads for that long is invalidated at the next checkpoint, for instance
# while outboxd is stopped for maintenance. On PostgreSQL 18 (pg18.*, the
# mock broker):
#  1. outboxd check, with the timeout shorter than [postgres]
#     planned_downtime, WARNs naming both; without it, ok.
#  2. outboxd stopped, events committed, the timeout at 1 s and
#     checkpoints until the server invalidates the slot (invalidation_reason
#     = idle_timeout; waited for, not slept): outboxd check FAILs naming
#     the idle timeout (not removed WAL) and how to prevent it.
#  3. the daemon with on_slot_loss = halt: the log says reason idle_timeout
#     and since when it was not read, /metrics has
#     outboxd_slot_lost_reason{reason="idle_timeout"} 1, exit 2.
#  4. the timeout off again, the daemon with on_slot_loss = repair: it
#     repairs the gap by itself and streams on; every committed event is in
#     Kafka, in per-key order (outboxd verify: 0 missing, 0 order
#     violations; not check_delivery, whose header checks expect commit_lsn,
#     which the repair's copies from the table do not carry).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OUTBOXD_TEST_PLUGIN=pgoutput
e2e_init idle_timeout
pg_start
(($(psql_q "SHOW server_version_num") >= 180000)) ||
    fail "idle_replication_slot_timeout needs PostgreSQL 18 (OUTBOXD_PG_VERSION=18)"
broker_start

# insert_events PREFIX N: N events of 3 aggregates, one transaction each.
insert_events() {
    local i
    for ((i = 1; i <= $2; i++)); do
        echo "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload) VALUES (gen_random_uuid(), 'idle', '$1-$((i % 3))', $i, 'e', '{\"n\": $i}');"
    done | psql_q >/dev/null
}

# check_run NAME ARGS...: outboxd check with the test's configuration; its
# report in $T/c.NAME.out, its status in CHECK_RC.
check_run() {
    local name=$1
    shift
    CHECK_RC=0
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "$@" \
        >"$T/c.$name.out" 2>"$T/c.$name.err" || CHECK_RC=$?
    cat "$T/c.$name.out" >&2
}

set_timeout() { # VALUE: idle_replication_slot_timeout, reloaded
    psql_q "ALTER SYSTEM SET idle_replication_slot_timeout = '$1'" >/dev/null
    pg_reload
    assert_eq "$1" "$(psql_q "SHOW idle_replication_slot_timeout")" "idle_replication_slot_timeout"
}

step "1. outboxd check against the timeout and [postgres] planned_downtime"
outboxd_start
insert_events a 20
wait_caught_up 30
check_run off
grep -E '^ok   slot outlives planned_downtime: a stop of 1h keeps the slot \(idle_replication_slot_timeout off' \
    "$T/c.off.out" >/dev/null || fail "check did not say the slot outlives a 1 h stop"
set_timeout 10min
check_run short
grep -E '^warn slot outlives planned_downtime: idle_replication_slot_timeout = 10m: the server invalidates the slot after that long unread, less than \[postgres\] planned_downtime = 1h' \
    "$T/c.short.out" >/dev/null || fail "check did not warn of a 10 min timeout against a 1 h planned stop"
check_run planned --set postgres.planned_downtime=5m
grep -E '^ok   slot outlives planned_downtime: a stop of 5m keeps the slot \(idle_replication_slot_timeout 10m' \
    "$T/c.planned.out" >/dev/null || fail "check warned although planned_downtime is under the timeout"

step "2. stopped for maintenance longer than the timeout: the slot is invalidated"
outboxd_stop
insert_events b 30
set_timeout 1s
# The checkpointer invalidates a slot idle past the timeout; a CHECKPOINT
# now and then until it has (the slot has been idle since the stop).
invalidated() {
    psql_q "CHECKPOINT" >/dev/null
    [[ $(psql_q "SELECT coalesce(invalidation_reason, '') FROM pg_replication_slots WHERE slot_name = 'outboxd'") == idle_timeout ]]
}
wait_until 60 "the server invalidating the idle slot" invalidated
assert_sql "SELECT wal_status = 'lost' FROM pg_replication_slots WHERE slot_name = 'outboxd'" \
    "wal_status of the invalidated slot"
insert_events c 30 # after the invalidation too
check_run lost
assert_eq 1 "$CHECK_RC" "check's exit status on the invalidated slot"
grep -E '^FAIL slot "outboxd" not invalidated: the slot is invalidated \(wal_status = lost, reason idle_timeout\): nothing read it for longer than the server.s idle_replication_slot_timeout .*so that it does not happen again: set idle_replication_slot_timeout longer than the longest stop' \
    "$T/c.lost.out" >/dev/null || fail "check did not name the idle timeout as the cause"
grep -q 'removed WAL' "$T/c.lost.out" && fail "check blamed removed WAL for an idle timeout"

step "3. on_slot_loss = halt: the log and /metrics say idle_timeout; exit 2"
outboxd_start --no-wait --set postgres.halt_linger=30s
outboxd_log_wait 'halted: serving /readyz' 30
line=$(grep 'is invalidated (wal_status = lost' "$T/outboxd.log" | tail -n 1)
[[ $line == *"reason idle_timeout, not read since "*"idle_replication_slot_timeout"* ]] ||
    fail "the log does not name the idle timeout and since when: $line"
reason_metric() { [[ $(metric_value 'outboxd_slot_lost_reason{reason="idle_timeout"}') == 1 ]]; }
wait_until 10 'outboxd_slot_lost_reason{reason="idle_timeout"} 1 in /metrics' reason_metric
assert_eq 1 "$(metric_value outboxd_slot_lost)" "outboxd_slot_lost while halted"
outboxd_stop || true
assert_eq 2 "$OUTBOXD_RC" "exit status on the invalidated slot"

step "4. the timeout off, on_slot_loss = repair: repaired by the daemon, streaming on"
set_timeout 0
outboxd_start --set postgres.on_slot_loss=repair --set outbox.repair_margin=30s
outboxd_log_wait 'repair: slot "outboxd" was invalidated' 60
insert_events d 20
wait_caught_up 60
outboxd_stop || true
assert_eq 0 "$OUTBOXD_RC" "exit status after the repair"
vrc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" --json >"$T/verify.json" 2>"$T/verify.err" || vrc=$?
info "verify: rows=$(jq -r .rows "$T/verify.json") missing=$(jq -r .missing "$T/verify.json") order_violations=$(jq -r .order_violations "$T/verify.json") duplicates=$(jq -r .duplicates "$T/verify.json")"
assert_eq 100 "$(jq -r .rows "$T/verify.json")" "rows verified"
assert_eq 0 "$(jq -r .missing "$T/verify.json")" "missing after the repair"
assert_eq 0 "$(jq -r .order_violations "$T/verify.json")" "order violations after the repair"
assert_eq 0 "$vrc" "verify's exit status"
e2e_pass
