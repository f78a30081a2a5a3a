#!/usr/bin/env bash
# Polling mode, leases and generations (the failure-table rows after the
# broker), and the consumer inbox:
#  - a late ACK from an old generation changes nothing: relay A's claim is
#    taken over (generation 2) while A waits for the broker; A's SENT then
#    touches 0 rows, is logged, and the row stays the new owner's;
#  - two real relays: the first hangs (SIGSTOP) with the event in flight,
#    its lease expires, the second re-claims (generation 2) and marks SENT;
#    the first wakes up, gets its ACK, and its SENT is refused; Kafka holds
#    both copies (a duplicate explained by the lease expiry);
#  - broker ACK, then the relay dies before recording SENT: the row stays
#    CLAIMED, the lease expires, another relay publishes it again;
#  - sql/inbox.sql: the duplicates above give one effect each; the same
#    event_id with another payload is refused; a rolled-back consumer
#    transaction leaves nothing behind.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/polling_lib.sh"
e2e_init polling_lease
pg_start
polling_schema
broker_start
SLOW=(--set polling.lease=2s --set kafka.message.timeout.ms=30000 --set polling.batch_size=1
      --set polling.poll_interval_ms=200)

step "a late SENT from an old generation changes nothing (takeover by SQL)"
relay_start A "${SLOW[@]}"
wait_log A "polling public.outbox_events as A" 30
grep -q 'message.timeout.ms = 30000 is not below the lease' "$T/relay.A.log" ||
    fail "no warning about a delivery timeout longer than the lease"
broker_cmd "rtt 1 1000"
ins 1 l-1 1
wait_rows "event_id = '$(uuid 1)' AND status = 'CLAIMED' AND lease_owner = 'A' AND lease_generation = 1" 1 5
# What relay B's claim does once A's lease has expired: next generation.
assert_eq 2 "$(psql_q "UPDATE public.outbox_events SET lease_owner = 'B', lease_generation = lease_generation + 1,
    lease_until = now() + interval '1 hour', next_attempt_at = now() + interval '1 hour'
    WHERE event_id = '$(uuid 1)' AND status = 'CLAIMED' AND lease_owner = 'A' RETURNING lease_generation")" \
    "generation after the takeover (before A's ACK)"
# 1 s per request and one request in flight per connection
# (max.in.flight.requests.per.connection = 1): the requests before the
# produce (the new topic's metadata, ...) and the produce come one after
# the other. librdkafka 2.14.2 sends more of them than 2.0.2 did: at 3 s
# per request the ACK came after 30 s, as the message timed out; at 1 s
# it comes well inside message.timeout.ms.
wait_log A "event $(uuid 1): lease lost \\(no longer CLAIMED by A at generation 1\\): its SENT outcome is not recorded" 45
assert_eq "CLAIMED|0|B|2" "$(ev_state "$(uuid 1)")" "the row after A's late ACK"
assert_sql "SELECT sent_at IS NULL FROM public.outbox_events WHERE event_id = '$(uuid 1)'" "no sent_at"
# Let "B" finish it, as a relay would.
psql_q "UPDATE public.outbox_events SET status = 'SENT', sent_at = now(), lease_owner = NULL, lease_until = NULL WHERE event_id = '$(uuid 1)'"

step "two relays: the first hangs, its lease expires, the second re-claims and sends; the late ACK is refused"
relay_start B "${SLOW[@]}"
wait_log B "polling public.outbox_events as B" 30
broker_cmd "rtt 1 1500"
ins 2 l-2 1
wait_rows "event_id = '$(uuid 2)' AND status = 'CLAIMED' AND lease_generation = 1" 1 5
first=$(psql_q "SELECT lease_owner FROM public.outbox_events WHERE event_id = '$(uuid 2)'")
second=$([[ $first == A ]] && echo B || echo A)
# The first relay stops dead (a long pause, a frozen VM) with the event in
# flight; with batch_size = 1 the second is free to take over.
kill -STOP "${RELAY_PID[$first]}"
info "relay $first (generation 1) stopped with SIGSTOP"
wait_rows "event_id = '$(uuid 2)' AND status = 'CLAIMED' AND lease_owner = '$second' AND lease_generation = 2" 1 15
wait_rows "event_id = '$(uuid 2)' AND status = 'SENT' AND lease_generation = 2" 1 60
sent_at=$(psql_q "SELECT sent_at FROM public.outbox_events WHERE event_id = '$(uuid 2)'")
kill -CONT "${RELAY_PID[$first]}"
info "relay $first continues"
wait_log "$first" "event $(uuid 2): lease lost \\(no longer CLAIMED by $first at generation 1\\): its SENT outcome is not recorded" 30
assert_eq "SENT|0|-|2|$sent_at" "$(ev_state "$(uuid 2)")|$(psql_q "SELECT sent_at FROM public.outbox_events WHERE event_id = '$(uuid 2)'")" \
    "the row after the first relay's late ACK (unchanged)"
grep -q "event $(uuid 2): lease lost" "$T/relay.$second.log" && fail "relay $second lost a lease it held"
broker_cmd "rtt 1 0"
relay_stop A
relay_stop B

step "ACK, then the relay dies before recording SENT: published again"
relay_start C --set polling.lease=3s --set kafka.message.timeout.ms=20000
wait_log C "polling public.outbox_events as C" 30
sess_open L
broker_cmd "rtt 1 1000"
ins 3 l-3 1
wait_rows "event_id = '$(uuid 3)' AND status = 'CLAIMED' AND lease_owner = 'C'" 1 5
# NOWAIT: the relay holds no row lock while it waits for the broker.
sess_run L "BEGIN; SELECT 1 FROM public.outbox_events WHERE event_id = '$(uuid 3)' FOR UPDATE NOWAIT;"
# The ACK arrives; C's SENT update now waits for our row lock.
# (1 s per request: librdkafka 2.14.2 sends several before the produce of
# a new topic, and at 2 s the message ran into its 20 s timeout under the
# AddressSanitizer build in a full CI run; 60 s of waiting for the ACK.)
for ((i = 0; i < 600; i++)); do
    waiting=$(psql_q "SELECT pid FROM pg_stat_activity WHERE application_name = 'outboxd-polling' AND wait_event_type = 'Lock' AND query LIKE 'UPDATE%SENT%'")
    [[ -n "$waiting" ]] && break
    sleep 0.1
done
[[ -n "$waiting" ]] || fail "relay C never tried to record SENT"
info "relay C got the ACK; its SENT update (backend $waiting) waits"
broker_cmd "rtt 1 0"
kdump_all >"$T/dump3.jsonl"
assert_eq 1 "$(jq -r --arg id "$(uuid 3)" 'select(.headers.event_id == $id) | .offset' "$T/dump3.jsonl" | wc -l)" "copies of the event in Kafka before the crash"
relay_kill9 C
psql_q "SELECT pg_terminate_backend($waiting)" >/dev/null
sess_run L "ROLLBACK;"
sess_close L
assert_eq "CLAIMED|0|C|1" "$(ev_state "$(uuid 3)")" "the row after the crash (SENT never recorded)"
relay_start D --set polling.lease=3s
wait_rows "event_id = '$(uuid 3)' AND status = 'SENT' AND lease_generation = 2" 1 15
relay_stop D

step "verify: nothing missing, the duplicates are the two re-claimed events"
polling_verify "$T/verify.json"
assert_eq "3|5|0|2|2|0" "$(jq -r '[.rows, .messages, .missing, .duplicates, .duplicate_events, .order_violations] | map(tostring) | join("|")' "$T/verify.json")" \
    "rows|messages|missing|duplicates|duplicate events|order violations"
assert_eq "$(uuid 2),$(uuid 3)" "$(jq -r '.duplicate_examples[].event_id' "$T/verify.json" | sort | paste -sd,)" "the duplicated events"

step "consumer inbox (sql/inbox.sql): two deliveries, one effect"
psql -XAtq -v ON_ERROR_STOP=1 -f "$E2E_SRC_DIR/sql/inbox.sql" >/dev/null
psql_q "CREATE TABLE public.ledger (account text PRIMARY KEY, credits int NOT NULL);
        INSERT INTO public.ledger VALUES ('acct', 0)"
kdump_all >"$T/dump.jsonl"
assert_eq 5 "$(wc -l <"$T/dump.jsonl")" "messages delivered"
while IFS=$'\t' read -r id value; do
    # The consumer transaction: record the event_id and apply the effect
    # together, or neither.
    psql_q "BEGIN;
UPDATE public.ledger SET credits = credits + 1
 WHERE account = 'acct' AND public.inbox_accept('$id', 'billing', \$v\$$value\$v\$);
COMMIT;"
done < <(jq -r '[.headers.event_id, .value] | @tsv' "$T/dump.jsonl")
assert_eq 3 "$(psql_q "SELECT credits FROM public.ledger")" "effects of 5 deliveries of 3 events"
assert_eq 3 "$(psql_q "SELECT count(*) FROM public.processed_events WHERE consumer = 'billing'")" "processed_events rows"
assert_eq f "$(psql_q "SELECT public.inbox_accept('$(uuid 3)', 'billing', \$v\$$(jq -r --arg id "$(uuid 3)" 'select(.headers.event_id == $id) | .value' "$T/dump.jsonl" | head -1)\$v\$)")" \
    "a third delivery is a duplicate"
assert_eq t "$(psql_q "SELECT public.inbox_accept('$(uuid 3)', 'shipping', '{}')")" "another consumer applies it once too"
rc=0
psql_q "BEGIN; UPDATE public.ledger SET credits = credits + 100 WHERE account = 'acct';
SELECT public.inbox_accept('$(uuid 3)', 'billing', '{\"forged\": true}'); COMMIT;" >/dev/null 2>"$T/inbox.err" || rc=$?
[[ $rc -ne 0 ]] || fail "the same event_id with another payload was accepted"
grep -q "arrived again with a different payload" "$T/inbox.err" || fail "unexpected error: $(cat "$T/inbox.err")"
assert_eq 3 "$(psql_q "SELECT credits FROM public.ledger")" "credits after the refused payload (its transaction rolled back)"
psql_q "BEGIN; SELECT public.inbox_accept('$(uuid 50)', 'billing', '{}'); ROLLBACK;" >/dev/null
assert_eq t "$(psql_q "SELECT public.inbox_accept('$(uuid 50)', 'billing', '{}')")" "an event of a rolled-back consumer transaction is new again"
e2e_pass
