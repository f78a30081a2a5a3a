#!/usr/bin/env bash
# Single-row and multi-row transactions arrive exactly once, with the right
# topic, key, value and headers; a transaction's events share one
# commit_lsn; SIGTERM exits 0 and the offset file holds a confirmed LSN.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init basic
pg_start
judge_slot
broker_start
outboxd_start

step "the allocator the build chose serves the daemon"
# CMakeLists.txt links the daemon with jemalloc unless told not to (or
# sanitized); the start-up line names the allocator malloc() resolved to.
want=libc
if grep -q '^OUTBOXD_JEMALLOC:BOOL=ON' "$OUTBOXD_BUILD_DIR/CMakeCache.txt" &&
    ! grep -q '^OUTBOXD_SANITIZE:BOOL=ON' "$OUTBOXD_BUILD_DIR/CMakeCache.txt"; then
    want=jemalloc
fi
# It also names the librdkafka loaded at run time: the build's (the pinned
# release, or the system's in the rdkafka202.* copies).
rdk=$("${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" --version | sed -n 's/^librdkafka //p')
[[ -n "$rdk" ]] || fail "outboxd --version names no librdkafka"
grep -qE "starting \(logical mode, allocator $want( [0-9.]+)?, librdkafka ${rdk//./\\.}\)" "$T/outboxd.log" ||
    fail "start-up line does not name allocator $want and librdkafka $rdk: $(grep -m1 starting "$T/outboxd.log")"

step "single-row transaction"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        VALUES ('00000000-0000-4000-8000-000000000001', 'Order', 'order-1', 1, 'OrderCreated', '{\"total\": 10, \"items\": [1, 2]}')"
wait_caught_up 60
check_delivery --exactly-once
assert_eq 1 "$(dump_count "$T/check.dump.jsonl")" "messages after one insert"
assert_eq "outbox.event.Order" "$(jq -r .topic "$T/check.dump.jsonl")" "topic"
assert_eq "order-1" "$(jq -r .key "$T/check.dump.jsonl")" "key"
assert_eq '{"items": [1, 2], "total": 10}' "$(jq -r .value "$T/check.dump.jsonl")" "value (jsonb text)"
assert_eq OrderCreated "$(jq -r .headers.event_type "$T/check.dump.jsonl")" "event_type header"
assert_eq 1 "$(jq -r .headers.aggregate_version "$T/check.dump.jsonl")" "aggregate_version header"

step "multi-row transaction over two aggregate types"
psql_q <<'SQL'
BEGIN;
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
VALUES ('00000000-0000-4000-8000-000000000002', 'Order', 'order-1', 2, 'OrderPaid', '{"paid": true}'),
       ('00000000-0000-4000-8000-000000000003', 'Order', 'order-2', 1, 'OrderCreated', '{"total": 5}'),
       ('00000000-0000-4000-8000-000000000004', 'Customer', 'cust-1', 1, 'CustomerCreated', '{"name": "Ann"}');
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
SELECT gen_random_uuid(), 'Order', 'order-' || (10 + i % 5), 1 + i / 5, 'OrderLine', jsonb_build_object('line', i)
FROM generate_series(0, 19) AS i;
COMMIT;
SQL
wait_caught_up 60
check_delivery --exactly-once
assert_eq 24 "$(dump_count "$T/check.dump.jsonl")" "messages in total"
assert_eq 1 "$(jq -r 'select(.headers.event_type == "OrderLine" or .headers.aggregate_version == "2" or .key == "cust-1" or .key == "order-2") | .headers.commit_lsn' "$T/check.dump.jsonl" | sort -u | wc -l)" \
    "distinct commit_lsn in the multi-row transaction"
assert_eq "outbox.event.Customer outbox.event.Order" "$(jq -r .topic "$T/check.dump.jsonl" | sort -u | xargs)" "topics"

step "20 autocommit single-row transactions"
for i in $(seq 1 20); do
    echo "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload) VALUES (gen_random_uuid(), 'Order', 'order-3', $i, 'Tick', '{\"n\": $i}');"
done | psql_q
wait_caught_up 60
check_delivery --exactly-once
assert_eq 20 "$(jq -r 'select(.key == "order-3") | .headers.commit_lsn' "$T/check.dump.jsonl" | sort -u | wc -l)" \
    "distinct commit_lsn of 20 transactions"

step "graceful stop"
confirmed=$(slot_confirmed_lsn)
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
[[ -s "$T/outboxd.offset" ]] || fail "offset file $T/outboxd.offset missing or empty"
off=$(offset_file_lsn)
[[ "$off" =~ ^[0-9A-F]+/[0-9A-F]+$ ]] || fail "offset file holds '$off', not an LSN"
lsn_ge "$off" "$confirmed" || fail "offset file LSN $off is behind the slot's confirmed_flush_lsn $confirmed"
info "offset file: $off, slot confirmed: $(slot_confirmed_lsn)"

step "restart after a clean stop: no event is sent again"
outboxd_start
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        VALUES (gen_random_uuid(), 'Order', 'order-1', 3, 'OrderShipped', NULL)"
wait_caught_up 60
check_delivery --exactly-once
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
e2e_pass
