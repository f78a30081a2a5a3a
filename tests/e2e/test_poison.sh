#!/usr/bin/env bash
# Poison events under both [errors] policies, with the slot position checked.
# Classes: NULL event_id, NULL aggregate_id, empty aggregate_id, NULL
# event_type (a table without the NOT NULL constraints), an invalid topic
# name, a payload larger than message.max.bytes, an empty event_id (a text
# column), and a delivery the broker refuses for good
# (TOPIC_AUTHORIZATION_FAILED injected by the mock: that part runs on the
# mock only; E2E_KAFKA=real runs the rest against a real broker).
#  - dlq: each bad event lands in outbox.dlq with its key, its value
#    (truncated with a header when the value is what is too large), every
#    header the normal record would have carried (event_id, event_type,
#    aggregate_type, aggregate_id, aggregate_version, commit_lsn: those the
#    row has) and headers naming the original topic (or, for a topic that
#    cannot be, why in dlq_original_topic_error), the reason and the error;
#    good events around it are delivered, and the slot moves past it.
#  - halt: outboxd exits 1 naming the event, the LSN and the reason, after
#    confirming the good event before it and never the bad one.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init poison
pg_start
broker_start

psql_q <<'SQL'
CREATE TABLE public.loose_outbox (event_id text, aggregate_type text, aggregate_id text,
    aggregate_version bigint, event_type text, payload jsonb);
CREATE PUBLICATION loose_pub FOR TABLE public.loose_outbox WITH (publish = 'insert');
SQL
cols="event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload"
loose=(--set outbox.table=public.loose_outbox --set postgres.publication=loose_pub
       --set kafka.message.max.bytes=20000)

# bad_sql CLASS: the INSERT of one bad row of that class (ids end in the
# class number so the DLQ can be checked per class).
bad_sql() {
    case $1 in
    1) echo "INSERT INTO public.loose_outbox ($cols) VALUES (NULL, 'Order', 'o-1', 1, 'Bad', '{\"c\": 1}')" ;;
    2) echo "INSERT INTO public.loose_outbox ($cols) VALUES ('00000000-0000-4000-8000-000000000b02', 'Order', NULL, 1, 'Bad', '{\"c\": 2}')" ;;
    3) echo "INSERT INTO public.loose_outbox ($cols) VALUES ('00000000-0000-4000-8000-000000000b03', 'Order', '', 1, 'Bad', '{\"c\": 3}')" ;;
    4) echo "INSERT INTO public.loose_outbox ($cols) VALUES ('00000000-0000-4000-8000-000000000b04', 'Order', 'o-4', 1, NULL, '{\"c\": 4}')" ;;
    5) echo "INSERT INTO public.loose_outbox ($cols) VALUES ('00000000-0000-4000-8000-000000000b05', 'Bad Type!', 'o-5', 1, 'Bad', '{\"c\": 5}')" ;;
    6) echo "INSERT INTO public.loose_outbox ($cols) VALUES ('00000000-0000-4000-8000-000000000b06', 'Order', 'o-6', 1, 'Big', jsonb_build_object('blob', repeat('x', 50000)))" ;;
    7) echo "INSERT INTO public.loose_outbox ($cols) VALUES ('', 'Order', 'o-7', 1, 'Bad', '{\"c\": 7}')" ;;
    esac
}
good_sql() { # N
    echo "INSERT INTO public.loose_outbox ($cols) VALUES (gen_random_uuid(), 'Order', 'good-$1', 1, 'Good', '{\"good\": $1}')"
}
# The original headers each class's DLQ record must carry (commit_lsn
# aside), exactly: a NULL column has no header.
expect_headers=(x
    '{"event_type":"Bad","aggregate_type":"Order","aggregate_id":"o-1","aggregate_version":"1"}'
    '{"event_id":"00000000-0000-4000-8000-000000000b02","event_type":"Bad","aggregate_type":"Order","aggregate_version":"1"}'
    '{"event_id":"00000000-0000-4000-8000-000000000b03","event_type":"Bad","aggregate_type":"Order","aggregate_id":"","aggregate_version":"1"}'
    '{"event_id":"00000000-0000-4000-8000-000000000b04","aggregate_type":"Order","aggregate_id":"o-4","aggregate_version":"1"}'
    '{"event_id":"00000000-0000-4000-8000-000000000b05","event_type":"Bad","aggregate_type":"Bad Type!","aggregate_id":"o-5","aggregate_version":"1"}'
    '{"event_id":"00000000-0000-4000-8000-000000000b06","event_type":"Big","aggregate_type":"Order","aggregate_id":"o-6","aggregate_version":"1"}'
    '{"event_id":"","event_type":"Bad","aggregate_type":"Order","aggregate_id":"o-7","aggregate_version":"1"}')
# original_headers: the headers of a DLQ record (stdin) that are not dlq_*,
# commit_lsn left out, keys sorted.
original_headers() {
    jq -cS '.headers | with_entries(select(.key | startswith("dlq_") | not)) | del(.commit_lsn)'
}
# check_original MSG CLASS-LABEL EXPECTED-JSON TOPIC: every original header
# and the topic (TOPIC "" : the topic error must be there instead).
check_original() {
    local m=$1 what=$2 want=$3 topic=$4
    assert_eq "$(jq -cS . <<<"$want")" "$(original_headers <<<"$m")" "original headers of $what"
    [[ "$(jq -r '.headers.commit_lsn' <<<"$m")" == */* ]] || fail "$what: no commit_lsn"
    assert_eq "$topic" "$(jq -r '.headers.dlq_original_topic' <<<"$m")" "dlq_original_topic of $what"
    if [[ -z $topic ]]; then
        [[ -n "$(jq -r '.headers.dlq_original_topic_error // empty' <<<"$m")" ]] ||
            fail "$what: empty dlq_original_topic without dlq_original_topic_error"
    else
        assert_eq null "$(jq -c '.headers.dlq_original_topic_error' <<<"$m")" \
            "dlq_original_topic_error of $what (a topic is named)"
    fi
}
expect_code=(x NULL_EVENT_ID NULL_AGGREGATE_ID EMPTY_AGGREGATE_ID NULL_EVENT_TYPE BAD_TOPIC MSG_SIZE_TOO_LARGE
             EMPTY_EVENT_ID)
classes="1 2 3 4 5 6 7"

step "policy dlq: every class dead-lettered, good events delivered, slot moves on"
export OUTBOXD_SLOT=dlq_slot
outboxd_start "${loose[@]}" --set errors.policy=dlq
for c in $classes; do
    psql_q "$(good_sql "$c")"
    psql_q "$(bad_sql "$c")"
done
psql_q "$(good_sql 99)"
wait_for_confirmed_lsn "$(current_lsn)" 60 || fail "the slot did not move past the dead-lettered events"
outboxd_assert_running
kdump_all >"$T/dlq.jsonl"
assert_eq 7 "$(jq -r 'select(.topic == "outbox.dlq")' "$T/dlq.jsonl" | jq -s length)" "messages in outbox.dlq"
assert_eq 8 "$(jq -r 'select(.headers.event_type == "Good")' "$T/dlq.jsonl" | jq -s length)" "good events delivered"
assert_eq 0 "$(jq -r 'select(.topic != "outbox.dlq" and .headers.event_type != "Good")' "$T/dlq.jsonl" | jq -s length)" \
    "bad events published to their topic"
for c in $classes; do
    if [[ $c == 6 ]]; then
        m=$(jq -c 'select(.topic == "outbox.dlq" and .headers.dlq_error == "MSG_SIZE_TOO_LARGE")' "$T/dlq.jsonl" | head -1)
    else
        m=$(jq -c --arg v "{\"c\": $c}" 'select(.topic == "outbox.dlq" and .value == $v)' "$T/dlq.jsonl" | head -1)
    fi
    [[ -n "$m" ]] || fail "class $c (${expect_code[$c]}) is not in outbox.dlq"
    assert_eq "${expect_code[$c]}" "$(jq -r '.headers.dlq_error' <<<"$m")" "dlq_error of class $c"
    [[ -n "$(jq -r '.headers.dlq_reason // empty' <<<"$m")" ]] || fail "class $c: no dlq_reason"
    [[ "$(jq -r '.headers.commit_lsn' <<<"$m")" == */* ]] || fail "class $c: no commit_lsn"
    topic=outbox.event.Order
    [[ $c == 5 ]] && topic=""
    check_original "$m" "class $c (${expect_code[$c]})" "${expect_headers[$c]}" "$topic"
done
m=$(jq -c 'select(.topic == "outbox.dlq" and .headers.dlq_error == "BAD_TOPIC")' "$T/dlq.jsonl")
[[ "$(jq -r '.headers.dlq_original_topic_error' <<<"$m")" == *"0x20"* ]] ||
    fail "dlq_original_topic_error of the bad topic does not say why: $(jq -c .headers <<<"$m")"
m=$(jq -c 'select(.topic == "outbox.dlq" and .headers.dlq_error == "MSG_SIZE_TOO_LARGE")' "$T/dlq.jsonl")
assert_eq outbox.event.Order "$(jq -r '.headers.dlq_original_topic' <<<"$m")" "original topic of the too-large event"
assert_eq o-6 "$(jq -r '.key' <<<"$m")" "key of the too-large event"
[[ "$(jq -r '.headers.dlq_value_truncated_from' <<<"$m")" -gt 50000 ]] || fail "no truncation header on the too-large value"
[[ "$(jq -r '.value_hex | length / 2' <<<"$m")" -lt 20000 ]] || fail "the dead-lettered value was not truncated"
m=$(jq -c 'select(.topic == "outbox.dlq" and .headers.dlq_error == "EMPTY_AGGREGATE_ID")' "$T/dlq.jsonl")
assert_eq '""' "$(jq -c '.key_hex' <<<"$m")" "the empty key is kept as it was"
m=$(jq -c 'select(.topic == "outbox.dlq" and .headers.dlq_error == "EMPTY_EVENT_ID")' "$T/dlq.jsonl")
assert_eq '"" o-7' "$(jq -r '(.headers.event_id | tojson) + " " + .key' <<<"$m")" "event_id and key of the empty-event_id event"

# The injected refusal needs the mock; on real Kafka the ACL refusal is
# tested by the real.kafka_errors suite.
if mock_only "a delivery the broker refuses for good (injected TOPIC_AUTHORIZATION_FAILED)"; then
step "policy dlq: a delivery the broker refuses for good"
psql_q "$(good_sql 100)"
wait_caught_up 60
broker_cmd "error produce TOPIC_AUTHORIZATION_FAILED 1"
psql_q "INSERT INTO public.loose_outbox ($cols) VALUES ('00000000-0000-4000-8000-000000000b08', 'Order', 'o-8', 1, 'Refused', '{\"c\": 8}')"
wait_caught_up 60
outboxd_assert_running
kdump_all >"$T/dlq2.jsonl"
m=$(jq -c 'select(.topic == "outbox.dlq" and .headers.event_id == "00000000-0000-4000-8000-000000000b08")' "$T/dlq2.jsonl")
[[ -n "$m" ]] || fail "the refused event is not in outbox.dlq: $(grep -E 'WARN|ERROR' "$T/outboxd.log" | grep -v kafka: | tail -3)"
assert_eq TOPIC_AUTHORIZATION_FAILED "$(jq -r '.headers.dlq_error' <<<"$m")" "dlq_error of the refused event"
check_original "$m" "the refused event" \
    '{"event_id":"00000000-0000-4000-8000-000000000b08","event_type":"Refused","aggregate_type":"Order","aggregate_id":"o-8","aggregate_version":"1"}' \
    outbox.event.Order
fi
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"

step "policy halt: each class stops outboxd before its LSN"
for c in $classes; do
    slot=halt_$c
    psql_q "SELECT pg_create_logical_replication_slot('$slot', '$OUTBOXD_TEST_PLUGIN')" >/dev/null
    psql_q "$(good_sql $((200 + c)))"
    before=$(current_lsn)
    psql_q "$(bad_sql "$c")"
    psql_q "$(good_sql $((300 + c)))"
    OUTBOXD_SLOT=$slot
    outboxd_start --no-wait "${loose[@]}" --set "offsets.file=$T/$slot.offset"
    for ((i = 0; i < 300; i++)); do
        kill -0 "$OUTBOXD_PID" 2>/dev/null || break
        sleep 0.1
    done
    rc=0
    wait "$OUTBOXD_PID" || rc=$?
    OUTBOXD_PID=
    assert_eq 1 "$rc" "exit status of halt on class $c (${expect_code[$c]})"
    # (read whole first: with pipefail, `... | grep -q` fails when grep
    # stops reading before the writer is done)
    log=$(outboxd_log_last_start)
    grep -q "cannot be published: ${expect_code[$c]}" <<<"$log" ||
        fail "the log does not name ${expect_code[$c]}: $(grep ERROR "$T/outboxd.log" | tail -1)"
    confirmed=$(psql_q "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$slot'")
    lsn_ge "$before" "$confirmed" || fail "class $c: slot $slot confirmed $confirmed, past the bad event (after $before)"
    info "class $c: halted, slot $slot at $confirmed (bad event written after $before)"
    psql_q "SELECT pg_drop_replication_slot('$slot')" >/dev/null
done
e2e_pass
