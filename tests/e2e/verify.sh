#!/usr/bin/env bash
# `outboxd verify` against a real table and the mock broker:
#  - after outboxd delivered everything: exit 0, and the JSON counts match;
#  - --since restricts the rows (created_at) and the messages (from that
#    time on); a message of an older event is not "unknown";
#  - a duplicate produced with kcat (a re-delivery of an old event after
#    newer ones): counted, still exit 0, not an order violation;
#  - a row inserted while outboxd is stopped (slot dropped): missing, exit 1;
#    older than --since, it is out of scope there (exit 0);
#  - an older aggregate_version produced after a newer one (kcat): an order
#    violation, exit 1; a key on a second partition: a split key;
#  - messages not in the table, or without event_id: unknown;
#  - a row outboxd dead-lettered ([errors] policy = dlq, a topic name that
#    is not valid): "dead-lettered" with the record's dlq_error, not
#    missing; alone (--since) it exits 0;
#  - exit 2 ("could not run") for bad --since, --since without created_at,
#    a bad [kafka] key, a missing table, an unreachable Postgres, and an
#    unreachable broker: within about --timeout, naming it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init verify
pg_start
broker_start
outboxd_start

TO=outbox.event.Order
TC=outbox.event.Customer

# id N: the event_id of test event N.
id() { printf '00000000-0000-4000-8000-%012d' "$1"; }

# ins N TYPE AGG VERSION|NULL [CREATED_AT_SQL]: one outbox row.
ins() {
    psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, created_at)
            VALUES ('$(id "$1")', '$2', '$3', $4, 'Test', '{\"n\": $1}', ${5:-now()})"
}

# run_verify RC NAME [verify args]: runs verify, which must exit RC; its
# stdout is in $T/v.NAME.out, its stderr in $T/v.NAME.err.
run_verify() {
    local want=$1 name=$2 rc=0
    shift 2
    step "outboxd verify $* (expect exit $want)"
    local t0=$SECONDS
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" "$@" \
        >"$T/v.$name.out" 2>"$T/v.$name.err" || rc=$?
    VERIFY_SECONDS=$((SECONDS - t0))
    if [[ $rc -ne $want ]]; then
        cat "$T/v.$name.out" >&2
        tail -n 20 "$T/v.$name.err" >&2
        fail "verify $name: exit $rc, expected $want"
    fi
    info "verify $name: exit $rc"
}

# jv NAME FILTER: jq -c FILTER over the JSON of run NAME.
jv() { jq -c "$2" "$T/v.$1.out"; }

# expect_json NAME 'field=value ...': checks top-level fields.
expect_json() {
    local name=$1 kv
    [[ $(wc -l <"$T/v.$name.out") -eq 1 ]] || fail "verify $name: not one JSON line"
    for kv in $2; do
        assert_eq "${kv#*=}" "$(jv "$name" ".${kv%%=*}")" "$name: ${kv%%=*}"
    done
}

# partition_of TOPIC KEY: the partition outboxd used for KEY.
partition_of() {
    kdump_all | jq -r --arg t "$1" --arg k "$2" 'select(.topic == $t and .key == $k) | .partition' |
        sort -u | head -n 1
}

# kprod TOPIC PARTITION KEY [kcat -H args...]: produces one message.
kprod() {
    local topic=$1 part=$2 key=$3
    shift 3
    info "kcat: $topic [$part] key=$key $*"
    echo '{"by": "kcat"}' | kcat -b "$KAFKA_BOOTSTRAP" -P -t "$topic" -p "$part" -k "$key" "$@" ||
        fail "kcat could not produce to $topic"
}

step "events delivered by outboxd"
ins 1 Order order-1 1
ins 2 Order order-1 2
ins 3 Order order-1 3
ins 4 Order order-2 1
ins 5 Customer cust-1 1
ins 6 Customer cust-1 NULL
wait_caught_up 60
sleep 1
SINCE=$(psql_q "SELECT now()::text")
sleep 1
psql_q "BEGIN;
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
VALUES ('$(id 7)', 'Order', 'order-1', 4, 'Test', NULL),
       ('$(id 8)', 'Order', 'order-3', 1, 'Test', NULL),
       ('$(id 9)', 'Order', 'order-3', 2, 'Test', NULL),
       ('$(id 10)', 'Customer', 'cust-2', 1, 'Test', NULL);
COMMIT;"
wait_caught_up 60
check_delivery --exactly-once

run_verify 0 clean
grep -q '^missing: *0$' "$T/v.clean.out" || fail "summary lacks 'missing: 0'"
grep -q '^result: OK$' "$T/v.clean.out" || fail "summary lacks 'result: OK'"
grep -q '10 rows of public.outbox_events.*10 messages in 2 topics' "$T/v.clean.out" ||
    fail "summary head: $(head -n 1 "$T/v.clean.out")"
run_verify 0 clean_json --json
expect_json clean_json "rows=10 messages=10 topics=2 missing=0 missing_examples=[] duplicates=0
    duplicate_events=0 unknown=0 order_violations=0 ok=true"

run_verify 0 since --since "$SINCE" --json
expect_json since "rows=4 messages=4 topics=2 missing=0 unknown=0 order_violations=0 ok=true"

step "a duplicate: event 2 (order-1, version 2) again after version 4"
P_O1=$(partition_of "$TO" order-1)
kprod "$TO" "$P_O1" order-1 -H "event_id=$(id 2)" -H aggregate_version=2
run_verify 0 dup --json
expect_json dup "messages=11 missing=0 duplicates=1 duplicate_events=1 unknown=0 order_violations=0 ok=true"
assert_eq "\"$(id 2)\"" "$(jv dup '.duplicate_examples[0].event_id')" "duplicate example"
assert_eq 2 "$(jv dup '.duplicate_examples[0].copies')" "copies"
# With --since only the new copy is read: its event is older than --since
# but in the table, so it is neither unknown nor a duplicate.
run_verify 0 dup_since --since "$SINCE" --json
expect_json dup_since "rows=4 messages=5 duplicates=0 unknown=0 ok=true"

step "a row outboxd never sees: stopped, slot dropped, an hour old"
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
psql_q "SELECT pg_drop_replication_slot('${OUTBOXD_SLOT:-outboxd}')" >/dev/null
ins 11 Invoice inv-1 1 "now() - interval '1 hour'"
run_verify 1 missing
grep -q '^missing: *1$' "$T/v.missing.out" || fail "summary lacks 'missing: 1'"
grep -q "event_id=$(id 11) topic=outbox.event.Invoice key=inv-1" "$T/v.missing.out" ||
    fail "summary lacks the missing event"
grep -q '^result: FAILED' "$T/v.missing.out" || fail "summary lacks 'result: FAILED'"
grep -q 'topic outbox.event.Invoice does not exist' "$T/v.missing.err" ||
    fail "no warning about the absent topic"
run_verify 1 missing_json --json
expect_json missing_json "rows=11 topics=3 missing=1 ok=false"
assert_eq "\"$(id 11)\"" "$(jv missing_json '.missing_examples[0].event_id')" "missing example"
assert_eq '"outbox.event.Invoice"' "$(jv missing_json '.missing_examples[0].topic')" "its topic"
run_verify 0 missing_since --since "$SINCE" --json
expect_json missing_since "rows=4 missing=0 ok=true"

step "out of order: event 12 (order-3, version 1) after version 2"
ins 12 Order order-3 1
P_O3=$(partition_of "$TO" order-3)
kprod "$TO" "$P_O3" order-3 -H "event_id=$(id 12)" -H aggregate_version=1
run_verify 1 order --json
expect_json order "rows=12 missing=1 unknown=0 order_violations=1 version_regressions=1 split_keys=0 ok=false"
assert_eq "\"$(id 12)\"" "$(jv order '.order_examples[0].event_id')" "violation example"
assert_eq '"version"' "$(jv order '.order_examples[0].kind')" "violation kind"
assert_eq 2 "$(jv order '.order_examples[0].previous_version')" "previous version"
run_verify 1 order_since --since "$SINCE" --json
expect_json order_since "rows=5 missing=0 order_violations=1 ok=false"
grep -q "aggregate_version 1 after 2" <("${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" 2>/dev/null || true) ||
    fail "summary does not show the violation"

step "a key on a second partition: cust-2's event 10 again elsewhere"
P_C2=$(partition_of "$TC" cust-2)
kprod "$TC" $(((P_C2 + 1) % 4)) cust-2 -H "event_id=$(id 10)" -H aggregate_version=1
run_verify 1 split --json
expect_json split "duplicates=2 order_violations=2 version_regressions=1 split_keys=1"
assert_eq '"split"' "$(jv split '[.order_examples[] | select(.kind == "split")][0].kind')" "split example"

step "unknown messages: an event not in the table, one without event_id"
kprod "$TO" 0 ghost -H "event_id=ffffffff-0000-4000-8000-000000000000"
kprod "$TO" 0 ghost
run_verify 1 unknown --json
expect_json unknown "messages=15 unknown=2 missing=1"
assert_eq '["ffffffff-0000-4000-8000-000000000000",null]' \
    "$(jv unknown '[.unknown_examples[].event_id]')" "unknown examples"

step "bad options and set-up"
run_verify 2 bad_since --since 'not a time'
grep -q -- '--since "not a time"' "$T/v.bad_since.err" || fail "no --since error: $(cat "$T/v.bad_since.err")"
psql_q "CREATE TABLE public.nocreated (event_id uuid PRIMARY KEY, aggregate_type text, aggregate_id text,
        aggregate_version bigint, event_type text, payload jsonb)"
run_verify 2 no_created --set outbox.table=public.nocreated --since "$SINCE"
grep -q 'public.nocreated has no created_at column' "$T/v.no_created.err" ||
    fail "no created_at error: $(cat "$T/v.no_created.err")"
run_verify 0 no_created_all --set outbox.table=public.nocreated --json
expect_json no_created_all "rows=0 messages=0 topics=0 ok=true"
run_verify 2 no_table --set outbox.table=public.nothere
grep -q 'nothere.*does not exist' "$T/v.no_table.err" || fail "no missing-table error: $(cat "$T/v.no_table.err")"
run_verify 2 bad_kafka --set kafka.no.such.property=1
grep -q 'no.such.property' "$T/v.bad_kafka.err" || fail "no [kafka] error: $(cat "$T/v.bad_kafka.err")"
# Producer-only keys in [kafka] are left out of the consumer.
run_verify 0 producer_keys --set outbox.table=public.nocreated --set kafka.acks=all \
    --set kafka.linger.ms=5 --set kafka.enable.idempotence=true
grep -q 'producer property' "$T/v.producer_keys.err" && fail "producer-only keys reached the consumer"
grep -q 'could not run' "$T/v.no_table.err" || fail "no 'could not run': $(cat "$T/v.no_table.err")"
run_verify 2 no_postgres --set "postgres.conninfo=host=127.0.0.1 port=$(free_port) dbname=x user=x"
grep -q 'could not run: postgres: connecting' "$T/v.no_postgres.err" ||
    fail "no Postgres error: $(cat "$T/v.no_postgres.err")"
run_verify 2 bad_timeout --timeout 0
grep -q -- '--timeout "0"' "$T/v.bad_timeout.err" || fail "no --timeout error: $(cat "$T/v.bad_timeout.err")"

step "an unreachable broker: exit 2 within about --timeout"
run_verify 2 no_broker --set "kafka.bootstrap.servers=127.0.0.1:$(free_port)" --timeout 3s
grep -q 'could not run: kafka: .*within 3000 ms' "$T/v.no_broker.err" ||
    fail "no broker error naming the wait: $(tail -n 3 "$T/v.no_broker.err")"
((VERIFY_SECONDS <= 8)) || fail "verify took ${VERIFY_SECONDS} s with --timeout 3s"
info "unreachable broker: exit 2 after ${VERIFY_SECONDS} s (--timeout 3s)"

step "a dead-lettered event: [errors] policy = dlq, an invalid topic name"
rm -f "$T/outboxd.offset" # of the dropped slot: outboxd starts on a new one
outboxd_start --set errors.policy=dlq
sleep 1
SINCE2=$(psql_q "SELECT now()::text")
sleep 1
ins 13 'Bad Type!' bad-1 1
ins 14 Order order-4 1
wait_caught_up 60
kdump_all >"$T/dlq.jsonl" || fail "kdump failed"
assert_eq 1 "$(jq -c --arg id "$(id 13)" 'select(.topic == "outbox.dlq" and .headers.event_id == $id)' "$T/dlq.jsonl" | wc -l)" \
    "event 13 in outbox.dlq ($(jq -c 'select(.topic == "outbox.dlq") | .headers' "$T/dlq.jsonl"))"
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
run_verify 0 dlq_since --since "$SINCE2" --json
expect_json dlq_since "rows=2 missing=0 dead_lettered=1 dead_letters=1 dead_letters_unmatched=0
    dlq_topic=\"outbox.dlq\" ok=true"
assert_eq "\"$(id 13)\"" "$(jv dlq_since '.dead_lettered_examples[0].event_id')" "dead-lettered example"
assert_eq '"BAD_TOPIC"' "$(jv dlq_since '.dead_lettered_examples[0].dlq_error')" "its dlq_error"
run_verify 0 dlq_since_text --since "$SINCE2"
grep -q '^dead-lettered: *1 (in outbox.dlq' "$T/v.dlq_since_text.out" || fail "summary lacks 'dead-lettered: 1'"
grep -q "event_id=$(id 13) .* dlq_error=BAD_TOPIC" "$T/v.dlq_since_text.out" ||
    fail "summary lacks the dead-lettered event: $(cat "$T/v.dlq_since_text.out")"
grep -q '^result: OK (1 dead-lettered)$' "$T/v.dlq_since_text.out" || fail "summary lacks 'result: OK (1 dead-lettered)'"
# The whole table: event 11 is still missing (exit 1), event 13 is not.
run_verify 1 dlq_all --json
expect_json dlq_all "missing=1 dead_lettered=1 ok=false"
assert_eq "\"$(id 11)\"" "$(jv dlq_all '.missing_examples[0].event_id')" "the one missing event"
e2e_pass
