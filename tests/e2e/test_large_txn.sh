#!/usr/bin/env bash
# One transaction of 50,000 events (decoded with spilling to disk) arrives
# exactly once, per-key in order, all with the same commit_lsn; the slot is
# confirmed past it only after that.
# Then a second one is stopped by SIGTERM half-way: the offset file keeps
# how many of its events were ACKed (format 3), and the restart skips
# exactly those: still exactly once, 0 duplicates.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init large_txn
pg_start
# The mock keeps ~5 MB per partition: spread the ~10 MB over 8 partitions.
broker_start --partitions 8 --topic outbox.event.Bulk
outboxd_start

N=50000
step "one transaction of $N events over 200 keys"
t0=$SECONDS
psql_q <<SQL
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
SELECT gen_random_uuid(), 'Bulk', 'bulk-' || (i % 200), i, 'BulkCreated', jsonb_build_object('i', i)
FROM generate_series(1, $N) AS i;
SQL
info "inserted in $((SECONDS - t0))s"
wait_caught_up 180
info "delivered and confirmed $((SECONDS - t0))s after the insert began"
check_delivery --exactly-once
d=$T/check.dump.jsonl
assert_eq "$N" "$(dump_count "$d")" "messages"
assert_eq 1 "$(jq -r .headers.commit_lsn "$d" | sort -u | wc -l)" "distinct commit_lsn"
assert_eq 8 "$(jq -r .partition "$d" | sort -u | wc -l)" "partitions used"

step "small transactions after the big one"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        SELECT gen_random_uuid(), 'Bulk', 'bulk-' || i, $N + 1, 'After', '{}' FROM generate_series(0, 9) AS i"
wait_caught_up 60
check_delivery --exactly-once

step "SIGTERM in the middle of a second transaction of $N events"
# A small queue, sent every 100 ms, slows the transaction down to a few
# thousand events a second on the mock and on real Kafka alike, so the
# stop lands inside it.
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
outboxd_start --set kafka.queue.buffering.max.messages=200 --set kafka.linger.ms=100
before=0
psql_q <<SQL
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
SELECT gen_random_uuid(), 'Bulk', 'bulk-' || (i % 200), $N + 1 + i, 'Second', jsonb_build_object('i', i)
FROM generate_series(1, $N) AS i;
SQL
for ((i = 0; i < 1200; i++)); do
    acked=$(metric_value 'outboxd_events_acked_total{topic="outbox.event.Bulk"}')
    ((${acked:-0} > before)) && break
    sleep 0.05
done
info "stopping with $((acked - before)) of its $N events ACKed"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
# Progress inside a transaction is the txn= line (format 3 on; the file is
# format 4 since commit_time was added).
grep -q '^txn=' "$T/outboxd.offset" ||
    fail "the stop did not store progress inside the transaction (did it complete first?): $(cat "$T/outboxd.offset")"
kept=$(sed -n 's/^txn_acked=//p' "$T/outboxd.offset")
txn=$(sed -n 's/^txn=//p' "$T/outboxd.offset")
((kept > 0 && kept < N)) || fail "txn_acked=$kept: expected part of the $N events"
grep -q "the offset file keeps the first $kept events of transaction $txn as ACKed" "$T/outboxd.log" ||
    fail "the stop line does not say what the offset file keeps"
info "the offset file keeps $kept events of transaction $txn as ACKed"

step "restart: the $kept ACKed events are skipped, the rest produced"
outboxd_start
wait_caught_up 180
grep -q "resuming inside transaction $txn: the offset file says its first $kept events were ACKed" "$T/outboxd.log" ||
    fail "no resume line for transaction $txn"
grep -q "skipped the first $kept events of transaction $txn" "$T/outboxd.log" ||
    fail "no line saying the $kept events were skipped"
for ((i = 0; i < 300; i++)); do
    skipped=$(metric_value outboxd_events_skipped_total)
    [[ "$skipped" == "$kept" ]] && break
    sleep 0.1
done
assert_eq "$kept" "$skipped" "outboxd_events_skipped_total"
check_delivery --exactly-once
assert_eq $((2 * N + 10)) "$(dump_count "$T/check.dump.jsonl")" "messages (0 duplicates)"
grep -q '^txn' "$T/outboxd.offset" && fail "progress left in the offset file after the transaction completed"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
e2e_pass
