#!/usr/bin/env bash
# [delivery] mode = exactly_once on a real Kafka broker (E2E_KAFKA=real):
#  1. a load of small transactions (every 10th rolled back) with kill -9 of
#     outboxd three times and one SIGTERM: a read_committed consumer's dump
#     has every committed event exactly once, in per-key order; a
#     read_uncommitted dump of the same topics has more copies (the aborted
#     transactions' copies exist: it is the transactions that remove
#     them); `outboxd verify` is clean, `verify --isolation
#     read_uncommitted` is not;
#  2. the position is in the progress topic: with the offset file deleted,
#     a restart resumes from the progress record and re-sends nothing;
#  3. a zombie: instance A is stopped (SIGSTOP) in the middle of a Kafka
#     transaction, its walsender is terminated, instance B takes the slot
#     (fencing A) and streams; A, continued, must exit by itself without
#     committing anything, and the dump stays exactly once;
#  4. one 40,000-event Postgres transaction spans several Kafka transactions
#     (txn_max_events 5000): outboxd is killed -9 after one of them
#     committed inside it; the restart resumes inside that transaction
#     from the progress record's count, and the dump stays exactly once;
#  5. with [errors] policy = dlq, a row that cannot be mapped goes to the
#     dead-letter topic in the same Kafka transaction as its neighbours: a
#     kill -9 inside that transaction leaves one read_committed copy of the
#     dead letter (and an aborted one read_uncommitted); verify counts it
#     dead-lettered, nothing missing, no duplicate.
# Transactions are held open 2 s (txn_max_ms) so every kill lands inside one.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init exactly_once
[[ "${E2E_KAFKA:-mock}" == real ]] ||
    fail "exactly_once.sh needs a real broker (E2E_KAFKA=real): the mock cluster does not " \
        "check idempotent sequence numbers, so it cannot judge transactions"
pg_start
broker_start
create_load_procedure
EOS=(--set delivery.mode=exactly_once --set delivery.txn_max_ms=2000ms
    --set postgres.retry_max_ms=1000)
load_count() { psql_q "SELECT count(*) FROM public.outbox_events"; }
read_uncommitted_dups() { # dump file: events with more than one copy
    jq -r .headers.event_id "$1" | sort | uniq -d | wc -l
}

step "1: kill -9 three times and a SIGTERM under load"
outboxd_start "${EOS[@]}"
grep -q 'transactional producer outboxd-[0-9]*-outboxd ready' "$T/outboxd.log" ||
    fail "no 'transactional producer ... ready' line: is exactly_once on?"
e2e_bg psql_q "CALL public.load(2500, 16, 4, 'k')"
LOAD_PID=$E2E_BG_PID
for i in 1 2 3; do
    sleep 3
    info "committed events so far: $(load_count)"
    outboxd_kill9
    outboxd_start "${EOS[@]}"
done
sleep 2
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
outboxd_start "${EOS[@]}"
wait "$LOAD_PID" || fail "the load failed"
info "load done: $(load_count) committed events"
wait_caught_up 120
check_delivery --exactly-once
KDUMP_ARGS="-X isolation.level=read_uncommitted" kdump_all >"$T/uncommitted.jsonl"
ROWS=$(load_count)
UNCOMMITTED=$(wc -l <"$T/uncommitted.jsonl")
DUPS=$(read_uncommitted_dups "$T/uncommitted.jsonl")
info "read_committed: $(wc -l <"$T/check.dump.jsonl") messages for $ROWS rows;" \
    "read_uncommitted: $UNCOMMITTED messages, $DUPS events with aborted copies"
((DUPS > 0)) || fail "read_uncommitted shows no extra copy after 3 kills inside open" \
    "transactions: the test would not notice transactions that remove nothing"
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" "${EOS[@]}" >"$T/verify.out" 2>&1 ||
    { cat "$T/verify.out" >&2; fail "outboxd verify (read_committed) is not clean"; }
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" "${EOS[@]}" --isolation read_uncommitted \
    >"$T/verify.unc.out" 2>&1 || rc=$?
[[ $rc == 1 ]] || { cat "$T/verify.unc.out" >&2; fail "verify --isolation read_uncommitted" \
    "exited $rc, expected 1 (the aborted copies are duplicates there)"; }
grep -q 'result: FAILED' "$T/verify.unc.out" || fail "verify read_uncommitted printed no FAILED"
UNC_DUPS=$(sed -n 's/^duplicates: *\([0-9]*\) extra copies.*/\1/p' "$T/verify.unc.out")
((UNC_DUPS > 0)) || fail "verify read_uncommitted counts no duplicate"
grep -q '^duplicates: *0 extra copies' "$T/verify.out" ||
    fail "verify read_committed counts duplicates: $(grep '^duplicates' "$T/verify.out")"
info "verify: read_committed 0 duplicates; read_uncommitted $UNC_DUPS extra copies (exit 1)"

"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "${EOS[@]}" >"$T/check.out" 2>&1 || true
grep -E '^ok   progress topic: outboxd.progress exists, compacted; ' "$T/check.out" >&2 ||
    { cat "$T/check.out" >&2; fail "outboxd check does not say the progress topic exists, compacted"; }

step "2: the position comes from the progress topic, not the file"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
BEFORE=$(wc -l <"$T/check.dump.jsonl")
rm -f "$T/outboxd.offset"
psql_q "CALL public.load(50, 16, 4, 'p')"
outboxd_start "${EOS[@]}"
grep "outboxd\[$OUTBOXD_PID\]" "$T/outboxd.log" | grep 'the progress topic outboxd.progress holds' >/dev/null ||
    fail "the restart did not take its position from the progress topic"
wait_caught_up 120
check_delivery --exactly-once
info "after the restart without an offset file: $(wc -l <"$T/check.dump.jsonl") messages" \
    "(was $BEFORE), exactly once"

step "3: a zombie instance is fenced"
e2e_bg psql_q "CALL public.load(3000, 16, 4, 'z')"
LOAD_PID=$E2E_BG_PID
sleep 3
A=$OUTBOXD_PID
kill -STOP "$A"
info "instance A (pid $A) stopped"
psql_q "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'outboxd' AND active_pid IS NOT NULL" >/dev/null
OUTBOXD_PID=
for ((i = 0; i < 300; i++)); do
    [[ "$(psql_q "SELECT active FROM pg_replication_slots WHERE slot_name = 'outboxd'")" == f ]] && break
    sleep 0.1
done
outboxd_start "${EOS[@]}"
B=$OUTBOXD_PID
sleep 3
kill -CONT "$A"
info "instance A continued"
pid_wait_exit "$A" 60
rc=$EXIT_RC
((rc != 0)) || fail "the fenced instance A exited 0"
info "instance A exited with status $rc"
grep "outboxd\[$A\]" "$T/outboxd.log" | grep -E 'ERROR|FATAL' | grep -i 'fenced' >&2 ||
    fail "no error line of A says it was fenced"
wait "$LOAD_PID" || fail "the load failed"
outboxd_assert_running
wait_caught_up 120
check_delivery --exactly-once
if grep -q '"RolledBack"' "$T/check.dump.jsonl"; then fail "an event of a rolled-back transaction arrived"; fi
info "B (pid $B) went on; $(load_count) rows, each delivered once"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"

step "4: a kill -9 inside a transaction that spans several Kafka transactions"
BIG=(--set delivery.txn_max_events=5000)
outboxd_start "${EOS[@]}" "${BIG[@]}"
e2e_bg psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
    SELECT gen_random_uuid(), 'Load', 'big-' || (g % 16), g, 'Tick', jsonb_build_object('g', g)
    FROM generate_series(1, 40000) AS g"
BIG_PID=$E2E_BG_PID
for ((i = 0; i < 600; i++)); do
    grep "outboxd\[$OUTBOXD_PID\]" "$T/outboxd.log" | grep 'committed: .*(inside a transaction)' >/dev/null && break
    sleep 0.1
done
grep "outboxd\[$OUTBOXD_PID\]" "$T/outboxd.log" | grep 'committed: .*(inside a transaction)' | head -n 1 >&2 ||
    fail "no Kafka transaction committed inside the 40,000-event transaction within 60 s"
outboxd_kill9
wait "$BIG_PID" || fail "the 40,000-event insert failed"
outboxd_start "${EOS[@]}" "${BIG[@]}"
# Logged before START_REPLICATION, but the slot may still show the killed
# instance's walsender as active (busy decoding the 40,000 rows, it notices
# the closed socket only when it sends): waited for, not grepped once.
outboxd_log_wait "outboxd\[$OUTBOXD_PID\].*resuming inside transaction [0-9A-F/]+: the stored position says its first [0-9]+ events" 60
grep "outboxd\[$OUTBOXD_PID\]" "$T/outboxd.log" | grep -E 'the progress topic .* holds|resuming inside transaction' >&2
wait_caught_up 180
check_delivery --exactly-once
info "$(load_count) rows, each delivered once after a kill -9 inside a 40,000-event transaction"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"

step "5: a dead letter in the same Kafka transaction"
# Held open 8 s here, so the kill lands once the dead letter is written
# and before its transaction commits.
DLQ=(--set errors.policy=dlq --set delivery.txn_max_ms=8s)
dlq_copies() { # ISOLATION [TIMEOUT_MS]: copies of the dead letter in outbox.dlq
    "$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" -b "$KAFKA_BOOTSTRAP" -t outbox.dlq \
        --timeout-ms "${2:-60000}" -X "isolation.level=$1" 2>/dev/null |
        jq -r 'select(.headers.event_id == "00000000-0000-4000-8000-00000000d1e0") | .offset' | wc -l
}
outboxd_start "${EOS[@]}" "${DLQ[@]}"
psql_q <<'SQL'
BEGIN;
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
VALUES (gen_random_uuid(), 'Load', 'dlq-0', 1, 'Tick', '{"dlq": 1}'),
       ('00000000-0000-4000-8000-00000000d1e0', 'Bad Type!', 'dlq-0', 2, 'Bad', '{"dlq": 2}'),
       (gen_random_uuid(), 'Load', 'dlq-0', 3, 'Tick', '{"dlq": 3}');
COMMIT;
SQL
for ((i = 0; i < 150; i++)); do
    (($(dlq_copies read_uncommitted 2000) >= 1)) && break
    sleep 0.2
done
(($(dlq_copies read_committed 2000) == 0)) ||
    fail "the dead letter is visible read_committed before its transaction committed"
outboxd_kill9
outboxd_start "${EOS[@]}" "${DLQ[@]}"
wait_caught_up 120
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
assert_eq 1 "$(dlq_copies read_committed)" "read_committed copies of the dead letter"
UNC=$(dlq_copies read_uncommitted)
((UNC >= 2)) || fail "read_uncommitted shows $UNC copies of the dead letter: the kill did not" \
    "land inside its Kafka transaction, so this step proves nothing"
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" "${EOS[@]}" "${DLQ[@]}" --json \
    >"$T/verify.dlq.json" 2>"$T/verify.dlq.err" ||
    { cat "$T/verify.dlq.json" "$T/verify.dlq.err" >&2; fail "verify is not clean after the dead letter"; }
assert_eq 1 "$(jq -r .dead_lettered "$T/verify.dlq.json")" "verify dead_lettered"
assert_eq 0 "$(jq -r .missing "$T/verify.dlq.json")" "verify missing"
assert_eq 0 "$(jq -r .duplicates "$T/verify.dlq.json")" "verify duplicates"
info "the dead letter: 1 copy read_committed, $UNC read_uncommitted; verify clean"
e2e_pass
