#!/usr/bin/env bash
# One transaction of 50,000 events (decoded with spilling to disk) arrives
# exactly once, per-key in order, all with the same commit_lsn; the slot is
# confirmed past it only after that.
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
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
e2e_pass
