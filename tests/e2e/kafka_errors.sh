#!/usr/bin/env bash
# Errors only a real broker gives, each with the outcome deploy/faults.md promises
# (one Kafka 3.9 broker for every case; E2E_KAFKA=real always):
#  - TOPIC_AUTHORIZATION_FAILED: StandardAuthorizer, a DENY WRITE ACL for
#    outboxd's principal (User:ANONYMOUS on the PLAINTEXT listener) on
#    outbox.event.Denied (DESCRIBE and READ allowed, so it is a topic it
#    sees and may not write);
#  - MESSAGE_TOO_LARGE: outbox.event.Small has max.message.bytes = 1000,
#    far below the producer's own message.max.bytes, so only the broker
#    refuses the event;
#  - a missing topic (auto.create.topics.enable = false);
#  - INVALID_TIMESTAMP: outbox.event.Old has message.timestamp.before.max.ms
#    = 0, and outboxd runs with [outbox] timestamp = commit on an event
#    committed before it started: the broker refuses the commit time.
# Under policy = dlq the first two (and INVALID_TIMESTAMP) go to outbox.dlq with their code and the
# slot moves on; under halt each stops outboxd with exit 1, a log line
# naming the event and the code, and the slot not confirmed past it. A
# missing topic stops outboxd under either policy (exit 1, naming the event
# and the topic; nothing dead-lettered), and `outboxd check` FAILs on it.
# `outboxd check` warns that outbox.event.Small takes smaller record
# batches than the producer builds, and is ok with batch.size = 1000.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export E2E_KAFKA=real
e2e_init kafka_errors
pg_start
cat >"$T/broker.properties" <<'EOF'
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=true
EOF
KAFKA_AUTO_CREATE=false E2E_KAFKA_PROPERTIES=$T/broker.properties broker_start
KAFKA_SH=$E2E_SRC_DIR/tests/kafka/kafka.sh
step "topics and ACLs"
"$KAFKA_SH" admin "$E2E_KAFKA_DIR" topic:outbox.event.Order:2 topic:outbox.event.Denied:2 \
    topic:outbox.event.Small:2:max.message.bytes=1000 topic:outbox.dlq:2 \
    topic:outbox.event.Old:1:message.timestamp.before.max.ms=0 \
    deny:User:ANONYMOUS:WRITE:outbox.event.Denied allow:User:ANONYMOUS:DESCRIBE:outbox.event.Denied \
    allow:User:ANONYMOUS:READ:outbox.event.Denied >"$T/admin.log" 2>&1 ||
    fail "creating topics and ACLs failed: $(cat "$T/admin.log")"

cols="event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload"
good_sql() { # N
    echo "INSERT INTO public.outbox_events ($cols) VALUES (gen_random_uuid(), 'Order', 'good-$1', 1, 'Good', '{\"good\": \"$1\"}')"
}
bad_sql() { # KIND ID: KIND denied | small | missing
    case $1 in
    denied) echo "INSERT INTO public.outbox_events ($cols) VALUES ('$2', 'Denied', 'd-1', 1, 'Bad', '{\"c\": 1}')" ;;
    small) echo "INSERT INTO public.outbox_events ($cols) VALUES ('$2', 'Small', 's-1', 1, 'Bad', jsonb_build_object('blob', repeat('x', 3000)))" ;;
    missing) echo "INSERT INTO public.outbox_events ($cols) VALUES ('$2', 'Missing', 'm-1', 1, 'Bad', '{\"c\": 3}')" ;;
    esac
}
declare -A code=([denied]=TOPIC_AUTHORIZATION_FAILED [small]=MSG_SIZE_TOO_LARGE
                 [missing]=UNKNOWN_TOPIC_OR_PART)
declare -A topic=([denied]=outbox.event.Denied [small]=outbox.event.Small
                  [missing]=outbox.event.Missing)

# slot_not_past SLOT LSN WHAT: SLOT's confirmed_flush_lsn <= LSN.
slot_not_past() {
    local c
    c=$(psql_q "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$1'")
    [[ -n "$c" ]] || fail "slot $1 has no confirmed_flush_lsn"
    lsn_ge "$2" "$c" || fail "$3: slot $1 confirmed $c, past the event (written after $2)"
    info "ok: $3: slot $1 at $c, not past the event (written after $2)"
}

step "policy dlq: the refused and the too-large event are dead-lettered, the slot moves on"
export OUTBOXD_SLOT=dlq_slot
outboxd_start --set errors.policy=dlq
psql_q "$(good_sql 1)"
psql_q "$(bad_sql denied 00000000-0000-4000-8000-0000000000d1)"
psql_q "$(good_sql 2)"
psql_q "$(bad_sql small 00000000-0000-4000-8000-0000000000d2)"
psql_q "$(good_sql 3)"
wait_caught_up 60
outboxd_assert_running
kdump_all >"$T/dlq.jsonl"
assert_eq 3 "$(jq -s '[.[] | select(.topic == "outbox.event.Order")] | length' "$T/dlq.jsonl")" \
    "good events delivered"
assert_eq 0 "$(jq -s '[.[] | select(.topic == "outbox.event.Denied" or .topic == "outbox.event.Small")] | length' "$T/dlq.jsonl")" \
    "messages in the refused topics"
for k in denied small; do
    id=00000000-0000-4000-8000-0000000000d$([[ $k == denied ]] && echo 1 || echo 2)
    m=$(jq -c --arg id "$id" 'select(.topic == "outbox.dlq" and .headers.event_id == $id)' "$T/dlq.jsonl")
    [[ -n "$m" ]] || fail "$k: event $id is not in outbox.dlq: $(grep -E 'WARN|ERROR' "$T/outboxd.log" | tail -3)"
    assert_eq "${code[$k]}" "$(jq -r '.headers.dlq_error' <<<"$m")" "dlq_error of the $k event"
    assert_eq "${topic[$k]}" "$(jq -r '.headers.dlq_original_topic' <<<"$m")" "dlq_original_topic of the $k event"
    [[ "$(jq -r '.headers.commit_lsn' <<<"$m")" == */* ]] || fail "$k: no commit_lsn header"
done
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"

step "policy dlq, timestamp = commit: a commit time the topic refuses (INVALID_TIMESTAMP) is dead-lettered"
OUTBOXD_SLOT=old_slot
psql_q "SELECT pg_create_logical_replication_slot('$OUTBOXD_SLOT', '$OUTBOXD_TEST_PLUGIN')" >/dev/null
psql_q "INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000b1', 'Old', 'old-1', 1, 'Bad', '{}')"
psql_q "$(good_sql 20)"
outboxd_start --set errors.policy=dlq --set outbox.timestamp=commit --set "offsets.file=$T/old.offset"
wait_caught_up 60
outboxd_assert_running
kdump_all >"$T/old.jsonl"
m=$(jq -c 'select(.topic == "outbox.dlq" and .headers.event_id == "00000000-0000-4000-8000-0000000000b1")' "$T/old.jsonl")
[[ -n "$m" ]] || fail "the refused event is not in outbox.dlq: $(grep -E 'WARN|ERROR' "$T/outboxd.log" | tail -3)"
assert_eq INVALID_TIMESTAMP "$(jq -r '.headers.dlq_error' <<<"$m")" "dlq_error of the event with an old commit time"
assert_eq 1 "$(jq -s '[.[] | select(.topic == "outbox.event.Order" and .key == "good-20")] | length' "$T/old.jsonl")" \
    "the good event after it delivered"
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
psql_q "SELECT pg_drop_replication_slot('$OUTBOXD_SLOT')" >/dev/null

# halt_case KIND POLICY [outboxd args]: a good event, then a bad one of
# KIND; outboxd must exit 1 naming it, with its own slot not confirmed past
# it.
halt_case() {
    local kind=$1 policy=$2 id before slot=halt_$1_$2 t0
    shift 2
    id=00000000-0000-4000-8000-0000000000$([[ $policy == dlq ]] && echo e || echo f)$(
        case $kind in denied) echo 1 ;; small) echo 2 ;; missing) echo 3 ;; esac)
    step "policy $policy: a $kind event (${code[$kind]}) stops outboxd"
    psql_q "SELECT pg_create_logical_replication_slot('$slot', '$OUTBOXD_TEST_PLUGIN')" >/dev/null
    psql_q "$(good_sql "10$kind")"
    before=$(current_lsn)
    psql_q "$(bad_sql "$kind" "$id")"
    psql_q "$(good_sql "11$kind")"
    OUTBOXD_SLOT=$slot
    t0=$SECONDS
    outboxd_start --no-wait --set "errors.policy=$policy" --set "offsets.file=$T/$slot.offset" "$@"
    outboxd_wait_exit 90
    info "outboxd exited $OUTBOXD_RC after $((SECONDS - t0)) s"
    assert_eq 1 "$OUTBOXD_RC" "exit status on a $kind event under $policy"
    grep -E "event $id \(commit_lsn [0-9A-F]+/[0-9A-F]+\).* ${topic[$kind]}.*${code[$kind]}|event $id \(commit_lsn [0-9A-F]+/[0-9A-F]+\).*${code[$kind]}.* ${topic[$kind]}" \
        "$T/outboxd.log" >/dev/null ||
        fail "no log line names event $id, ${topic[$kind]} and ${code[$kind]}: $(grep ERROR "$T/outboxd.log" | tail -3)"
    info "ok: $(grep -E "event $id" "$T/outboxd.log" | grep ERROR | tail -1 | cut -c1-300)"
    slot_not_past "$slot" "$before" "$kind under $policy"
    psql_q "SELECT pg_drop_replication_slot('$slot')" >/dev/null
}

halt_case denied halt
halt_case small halt

step "a missing topic: outboxd check reports it"
psql_q "$(bad_sql missing 00000000-0000-4000-8000-0000000000c3)"
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" --set postgres.slot=dlq_slot \
    --set "offsets.file=$T/outboxd.offset" >"$T/check.out" 2>&1 || rc=$?
cat "$T/check.out" >&2
grep -E 'FAIL.*outbox\.event\.Missing' "$T/check.out" >/dev/null ||
    fail "outboxd check does not FAIL on the missing topic outbox.event.Missing"
[[ $rc -ne 0 ]] || fail "outboxd check exited 0 with a missing topic"
info "ok: outboxd check exits $rc and names outbox.event.Missing"
# outbox.event.Small's max.message.bytes (1000) is below the producer's
# batch (1000000): check warns, naming it and the batch.size that avoids
# a refused batch taking its small events along; with that set, it is ok.
grep -qE '^warn +topic limits: 1 topic takes smaller record batches than the producer builds \(1000000 bytes\): outbox\.event\.Small takes 1000 ' "$T/check.out" ||
    fail "outboxd check does not warn about outbox.event.Small's max.message.bytes"
grep -q 'set \[kafka\] batch.size = 1000 ' "$T/check.out" || fail "the warning does not say which batch.size avoids it"
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" --set postgres.slot=dlq_slot \
    --set "offsets.file=$T/outboxd.offset" --set kafka.batch.size=1000 >"$T/check2.out" 2>&1 || true
grep 'topic limits' "$T/check2.out" >&2 || true
grep -qE '^ok +topic limits: every topic described \([0-9]+ of [0-9]+\) takes record batches of the producer.s 1000 bytes' "$T/check2.out" ||
    fail "with batch.size = 1000 the topic limits line is not ok"

# librdkafka fails a message for a topic the broker does not know after
# topic.metadata.propagation.max.ms (30 s by default, kept here once).
halt_case missing halt
grep -q "create topic outbox.event.Missing, then start outboxd again" "$T/outboxd.log" ||
    fail "the halt on the missing topic does not say to create it"
halt_case missing dlq --set kafka.topic.metadata.propagation.max.ms=3000
kdump_all >"$T/after.jsonl"
assert_eq 0 "$(jq -s '[.[] | select(.headers.event_id == "00000000-0000-4000-8000-0000000000e3")] | length' "$T/after.jsonl")" \
    "copies of the missing-topic event anywhere (dead-lettered would hide a configuration error)"
e2e_pass
