#!/usr/bin/env bash
# Polling mode, the failure-table rows on the broker side, and retention:
#  - broker down (ACK unknown: the delivery times out): rows go back to
#    PENDING with attempts + 1, the lease cleared, last_error set and a
#    backoff with jitter; never SENT before an ACK; delivered once the
#    broker is back;
#  - attempts used up -> QUARANTINED; a QUARANTINED event blocks the later
#    events of its aggregate (others flow); outboxd requeue puts it back
#    (attempts reset) and the aggregate's events follow in order;
#  - permanent failures -> QUARANTINED at once (too large, invalid topic,
#    refused by the broker);
#  - retention deletes old SENT rows in batches and keeps QUARANTINED ones.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/polling_lib.sh"
e2e_init polling_failures
pg_start
polling_schema
broker_start

step "broker down: PENDING with backoff, attempts counted, never SENT"
relay_start F --set polling.lease=4s --set polling.backoff_min=1s --set polling.backoff_max=2s \
    --set polling.max_attempts=100
wait_log F "polling public.outbox_events as F" 30
broker_cmd "down 1"
for i in 1 2 3 4 5; do ins "$i" "f-$i" 1; done
wait_rows "attempts >= 2" 5 30
assert_sql "SELECT count(*) = 0 FROM public.outbox_events WHERE status = 'SENT' OR sent_at IS NOT NULL" "nothing SENT while the broker is down"
assert_sql "SELECT bool_and(lease_owner IS NULL AND lease_until IS NULL AND last_error LIKE '%_MSG_TIMED_OUT%') FROM public.outbox_events WHERE status = 'PENDING'" \
    "PENDING rows: lease cleared, last_error names the timeout"
# First retry after attempt 1: base backoff_min (1 s), jitter down to half.
grep -oE 'retry 2 of 100 in [0-9]+ ms' "$T/relay.F.log" | awk '{print $6}' >"$T/delays1"
[[ -s "$T/delays1" ]] || fail "no first-retry delay logged"
awk '$1 < 500 || $1 > 1000 { bad = 1 } END { exit bad }' "$T/delays1" ||
    fail "first retry delays outside [500, 1000] ms: $(paste -sd' ' "$T/delays1")"
grep -oE 'retry [3-9] of 100 in [0-9]+ ms' "$T/relay.F.log" | awk '{print $6}' >"$T/delays2"
awk '$1 < 1000 || $1 > 2000 { bad = 1 } END { exit bad }' "$T/delays2" ||
    fail "later retry delays outside [1000, 2000] ms (backoff_max 2s): $(paste -sd' ' "$T/delays2")"
info "first retry delays (ms): $(paste -sd' ' "$T/delays1"); later: $(sort -u "$T/delays2" | head -8 | paste -sd' ')"
[[ $(sort -u "$T/delays1" | wc -l) -gt 1 ]] || fail "no jitter: every first retry waited $(head -1 "$T/delays1") ms"
broker_cmd "up 1"
wait_rows "status = 'SENT'" 5 30
assert_sql "SELECT bool_and(attempts >= 2 AND lease_generation = attempts + 1) FROM public.outbox_events" \
    "each delivered row kept its attempts (claimed once per attempt)"
relay_stop F

step "attempts used up: QUARANTINED; it blocks its aggregate only"
relay_start G --set polling.lease=4s --set polling.backoff_min=500ms --set polling.backoff_max=1s \
    --set polling.max_attempts=2 --set kafka.message.max.bytes=20000
wait_log G "polling public.outbox_events as G" 30
broker_cmd "down 1"
ins 20 q-1 1
wait_rows "event_id = '$(uuid 20)' AND status = 'QUARANTINED'" 1 20
assert_eq "QUARANTINED|2|-|2" "$(ev_state "$(uuid 20)")" "status|attempts|owner|generation of the exhausted event"
assert_sql "SELECT last_error LIKE 'gave up after 2 attempts: _MSG_TIMED_OUT%' FROM public.outbox_events WHERE event_id = '$(uuid 20)'" \
    "last_error says the attempts are used up"
broker_cmd "up 1"
ins 21 q-1 2
ins 22 q-2 1
wait_rows "event_id = '$(uuid 22)' AND status = 'SENT'" 1 20
# 22 was claimed by a claim that already saw 21 (claims take rows in seq
# order and 21 was inserted first): 21 was passed over then, not merely
# not reached yet.
assert_eq "PENDING|0|-|0" "$(ev_state "$(uuid 21)")" "q-1's next event waits behind the QUARANTINED one"

step "outboxd requeue"
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" requeue -c "$T/relay.G.ini" "$(uuid 20)" >"$T/requeue.out" 2>&1 || rc=$?
cat "$T/requeue.out" >&2
assert_eq 0 "$rc" "requeue exit status"
grep -q "^requeued $(uuid 20)\$" "$T/requeue.out" || fail "requeue did not confirm"
wait_rows "event_id IN ('$(uuid 20)', '$(uuid 21)') AND status = 'SENT'" 2 20
assert_eq "0" "$(psql_q "SELECT attempts FROM public.outbox_events WHERE event_id = '$(uuid 20)'")" "attempts reset by requeue"
kdump_all >"$T/dump1.jsonl"
assert_eq "1,2" "$(jq -r 'select(.key == "q-1") | .headers.aggregate_version' "$T/dump1.jsonl" | paste -sd,)" "q-1 in order after the requeue"
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" requeue -c "$T/relay.G.ini" "$(uuid 22)" "$(uuid 777)" >"$T/requeue2.out" 2>&1 || rc=$?
cat "$T/requeue2.out" >&2
assert_eq 1 "$rc" "requeue of a SENT and an unknown event: exit status"
grep -q "^not requeued $(uuid 22): it is SENT, not QUARANTINED" "$T/requeue2.out" || fail "no reason for the SENT event"
grep -q "^not requeued $(uuid 777): no such event in public.outbox_events" "$T/requeue2.out" || fail "no reason for the unknown event"
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" requeue -c "$T/relay.G.ini" >/dev/null 2>&1 || rc=$?
assert_eq 2 "$rc" "requeue without EVENT_ID: exit status"
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" requeue -c "$T/relay.G.ini" not-a-uuid >"$T/requeue3.out" 2>&1 || rc=$?
assert_eq 1 "$rc" "requeue of a malformed event_id: exit status"
grep -q 'ERROR: postgres: requeueing: .*invalid input syntax for type uuid: "not-a-uuid"' "$T/requeue3.out" ||
    fail "no clear error for a malformed event_id: $(cat "$T/requeue3.out")"

step "permanent failures: QUARANTINED at once"
ins 30 p-1 1 Order "jsonb_build_object('blob', repeat('x', 50000))"
ins 31 p-2 1 "Bad Type!"
wait_rows "event_id IN ('$(uuid 30)', '$(uuid 31)') AND status = 'QUARANTINED'" 2 20
assert_eq "QUARANTINED|1|-|1" "$(ev_state "$(uuid 30)")" "too-large event: status|attempts|owner|generation"
assert_sql "SELECT last_error LIKE 'MSG_SIZE_TOO_LARGE:%' FROM public.outbox_events WHERE event_id = '$(uuid 30)'" "last_error of the too-large event"
assert_sql "SELECT last_error LIKE 'BAD_TOPIC:%' FROM public.outbox_events WHERE event_id = '$(uuid 31)'" "last_error of the invalid topic"
broker_cmd "error produce TOPIC_AUTHORIZATION_FAILED 1"
ins 32 p-3 1
wait_rows "event_id = '$(uuid 32)' AND status = 'QUARANTINED'" 1 20
assert_sql "SELECT attempts = 1 AND last_error LIKE 'TOPIC_AUTHORIZATION_FAILED:%' FROM public.outbox_events WHERE event_id = '$(uuid 32)'" \
    "a delivery the broker refuses for good"
relay_stop G

step "retention: old SENT rows deleted in batches, QUARANTINED kept"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, status, sent_at, lease_generation)
        SELECT gen_random_uuid(), 'Order', 'old-' || g, 1, 'Tick', 'SENT', now() - interval '1 hour', 1 FROM generate_series(1, 45) g"
old_sent() { psql_q "SELECT count(*) FROM public.outbox_events WHERE status = 'SENT' AND sent_at < now() - interval '2 seconds'"; }
wait_until 10 "the 8 delivered rows 2 s old" eval '[[ "$(old_sent)" == 53 ]]'
old=$(old_sent)
assert_eq 53 "$old" "SENT rows older than 2 s (45 old + 8 delivered above)"
relay_start H --set polling.retention=2s --set polling.retention_interval=1s --set polling.retention_batch=10
wait_log H "retention: deleted 53 SENT rows older than 2 s in 6 batches" 10
assert_eq 0 "$(psql_q "SELECT count(*) FROM public.outbox_events WHERE status = 'SENT'")" "SENT rows left"
assert_eq 3 "$(psql_q "SELECT count(*) FROM public.outbox_events WHERE status = 'QUARANTINED'")" "QUARANTINED rows kept"
ins 40 r-1 1
wait_rows "event_id = '$(uuid 40)' AND status = 'SENT'" 1 10
info "a fresh SENT row stays until it is 2 s old, then goes"
wait_rows "event_id = '$(uuid 40)'" 0 10
relay_stop H
e2e_pass
