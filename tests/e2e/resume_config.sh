#!/usr/bin/env bash
# A restart inside a transaction skips only what the stored count counted
# (issue 53, item 7). The offset file's txn_acked counts the events of the
# outbox tables and message prefixes configured when it was written; a
# restart configured with others must not skip by that count.
#  1. Two sections, a (public.outbox_events) and b (public.b_outbox), and
#     one transaction of N rows alternating a and b; outboxd, slowed by a
#     small queue, is stopped (SIGTERM) inside it: the offset file keeps a
#     part of it as ACKed (txn_acked) with the fingerprint of {a, b}
#     (txn_events, format 6).
#  2. Section b removed, restart: outboxd warns that the count is of other
#     events and skips none; every a row of the transaction reaches Kafka
#     (at least once: copies are allowed, a missing one fails). Before the
#     fix it skipped txn_acked a-events, of which only about half had been
#     delivered: those were lost.
#  3. Section b back, same configuration as written: a second stop inside
#     a second such transaction, restart with {a, b}: the count is used
#     (the resume line), no a or b row is missing and none is sent twice.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init resume_config
pg_start
broker_start --partitions 4 --topic outbox.event.A --topic outbox.event.B

psql_q "CREATE TABLE public.b_outbox (LIKE public.outbox_events INCLUDING ALL);"
[[ "$OUTBOXD_TEST_PLUGIN" == wal2json ]] ||
    psql_q "ALTER PUBLICATION outboxd_pub ADD TABLE public.b_outbox;"
export OUTBOXD_OUTBOX_A_TABLE=public.outbox_events
export OUTBOXD_OUTBOX_B_TABLE=public.b_outbox

N=20000
# one_transaction ROUND: N rows alternating a (odd i) and b (even i), in
# that order in the stream.
one_transaction() {
    psql_q "DO \$\$ BEGIN FOR i IN 1..$N LOOP
        IF i % 2 = 1 THEN
            INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
            VALUES (gen_random_uuid(), 'A', 'a-' || (i % 50), i, 'R$1', '{}');
        ELSE
            INSERT INTO public.b_outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
            VALUES (gen_random_uuid(), 'B', 'b-' || (i % 50), i, 'R$1', '{}');
        END IF;
    END LOOP; END \$\$;" >/dev/null
}

# stop_inside ROUND: outboxd (slowed) is stopped once part of the round's
# transaction is ACKed; prints txn_acked.
stop_inside() {
    local acked=0 i
    outboxd_start --set kafka.queue.buffering.max.messages=200 --set kafka.linger.ms=100
    one_transaction "$1"
    for ((i = 0; i < 1200; i++)); do
        acked=$(metric_value 'outboxd_events_acked_total{topic="outbox.event.A"}')
        ((${acked:-0} > 0)) && break
        sleep 0.05
    done
    ((${acked:-0} > 0)) || fail "round $1: nothing was ACKed within 60 s"
    outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
    grep -q '^txn=' "$T/outboxd.offset" ||
        fail "round $1: the stop did not store progress inside the transaction: $(cat "$T/outboxd.offset")"
    grep -qx 'format=6' "$T/outboxd.offset" && grep -qE '^txn_events=[0-9a-f]{16}$' "$T/outboxd.offset" ||
        fail "round $1: the progress has no fingerprint (format 6): $(cat "$T/outboxd.offset")"
    sed -n 's/^txn_acked=//p' "$T/outboxd.offset"
}

# missing_of TOPIC QUERY: the event_ids QUERY gives that are not in the
# dump's TOPIC (a fresh dump into $T/dump.jsonl).
missing_of() {
    local d=$T/dump.jsonl
    kdump_all >"$d" 2>"$T/kdump.err" || { cat "$T/kdump.err" >&2; fail "outboxd-kdump failed"; }
    comm -23 <(psql_q "$2" | sort -u) \
        <(jq -r --arg t "$1" 'select(.topic == $t) | .headers.event_id' "$d" | sort -u) | wc -l
}

step "1. stopped inside a transaction of $N rows of sections a and b"
kept=$(stop_inside 1)
txn=$(sed -n 's/^txn=//p' "$T/outboxd.offset")
((kept > 0 && kept < N)) || fail "txn_acked=$kept: expected part of the $N events"
info "the offset file keeps $kept events of transaction $txn as ACKed"

step "2. section b removed while stopped: nothing is skipped, no a row lost"
unset OUTBOXD_OUTBOX_B_TABLE
outboxd_start
wait_caught_up 180
assert_eq 0 "$(missing_of outbox.event.A "SELECT event_id FROM public.outbox_events")" \
    "a rows missing from Kafka"
outboxd_log_last_start | grep -q "the offset file says the first $kept events of transaction $txn were ACKed, but it counted the events of other outbox tables" ||
    fail "no warning that the stored count is of other events"
outboxd_log_last_start | grep -q "skipped the first" &&
    fail "the restart skipped events by a count of other events"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"

step "3. the same sections as written: the count is used"
export OUTBOXD_OUTBOX_B_TABLE=public.b_outbox
before=$(dump_count "$T/dump.jsonl")
kept=$(stop_inside 2)
txn=$(sed -n 's/^txn=//p' "$T/outboxd.offset")
outboxd_start
wait_caught_up 180
outboxd_log_last_start | grep -q "resuming inside transaction $txn: the offset file says its first $kept events were ACKed" ||
    fail "no resume line for transaction $txn"
assert_eq 0 "$(missing_of outbox.event.A "SELECT event_id FROM public.outbox_events")" \
    "a rows missing from Kafka"
# (round 1's b rows after its stop were never to be sent: b was removed)
assert_eq 0 "$(missing_of outbox.event.B "SELECT event_id FROM public.b_outbox WHERE event_type = 'R2'")" \
    "round 2's b rows missing from Kafka"
# Round 2's rows arrive once each: the dump grew by exactly N.
assert_eq $((before + N)) "$(dump_count "$T/dump.jsonl")" "messages after round 2 (0 copies)"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
e2e_pass
