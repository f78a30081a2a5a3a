#!/usr/bin/env bash
# outboxd republish (README "Republish") on a real Kafka broker, pgoutput
# (the command reads the table, not the stream):
#   1. bad arguments exit 2 (no selection, half an aggregate, --until
#      alone, a timestamp or event id PostgreSQL cannot read);
#   2. a time range republished while the daemon streams under load: the
#      topic de-duplicated by the event_id header holds exactly the table's
#      events; every copy equals its original (topic, partition, key, value,
#      headers but commit_lsn), and exactly the events republish said it
#      sent have two copies;
#   3. by event id and by aggregate: exactly those events get one more
#      copy (counts per event id before and after), the aggregate's in
#      aggregate_version order; under [delivery] mode = exactly_once too
#      (outside transactions); --dry-run sends nothing; --outbox NAME
#      picks one of several [outbox.NAME] sections (and is needed then);
#      an id not in the
#      table exits 1 naming it; a selection that matches nothing exits 1
#      saying so;
#   4. a poison row, and a row larger than message.max.bytes: [errors]
#      policy = halt exits 1 naming it; policy = dlq dead-letters it
#      (dlq_error header; the large value truncated) and exits 0;
#   4b. an event the broker refuses after it was sent (a topic with a
#      smaller max.message.bytes): halt exits 1 naming it and the code;
#      dlq dead-letters it from its delivery report and exits 0;
#   4c. a bytea payload column read under bytea_output = escape goes out
#      as its bytes (all 256 values, a lone NUL, empty), and as a base64
#      JSON string under value_converter = json;
#   5. a topic that does not exist (allow.auto.create.topics = false) and
#      the broker down: exit 1 within message.timeout.ms, nothing claimed
#      sent;
#   6. rows deleted after insert: an empty selection explains that the
#      rows are gone and what to do.
source "$(dirname "$0")/lib.sh"
e2e_init republish

OUTBOXD=$OUTBOXD_BUILD_DIR/outboxd

# republish ARGS...: runs outboxd republish with the test's configuration
# (under OUTBOXD_WRAPPER too, e.g. "valgrind --error-exitcode=99", like the
# daemon); stdout in $T/rp.out, stderr in $T/rp.err, status in RP_RC.
republish() {
    RP_RC=0
    # shellcheck disable=SC2086
    ${OUTBOXD_WRAPPER:-} "$OUTBOXD" republish -c "$T/outboxd.ini" "$@" >"$T/rp.out" 2>"$T/rp.err" || RP_RC=$?
    sed 's/^/    | /' "$T/rp.out" "$T/rp.err" >&2
}

# dump FILE: every message, then per event_id header "ID COUNT" in FILE.ids.
dump() {
    kdump_all >"$1" 2>"$T/kdump.err" || { cat "$T/kdump.err" >&2; fail "outboxd-kdump failed"; }
    jq -r 'select(.topic != "outbox.dlq") | .headers.event_id' <"$1" | sort | uniq -c |
        awk '{print $2, $1}' >"$1.ids"
}

# count_of FILE ID: copies of event ID in a dump's counts.
count_of() { awk -v id="$2" '$1 == id {print $2; f = 1} END {if (!f) print 0}' "$1.ids"; }

pg_start
create_load_procedure
broker_start
outboxd_start --set kafka.linger.ms=5

step "bad arguments exit 2"
for args in "" "--until 2026-01-01" "--aggregate Load" "--aggregate-type Load" \
    "--event-id" "--event-id a,,b" "--since x --since y" "--bogus 1"; do
    # shellcheck disable=SC2086
    republish $args
    assert_eq 2 "$RP_RC" "republish $args"
done
grep -q 'give TYPE:ID' "$T/rp.err" || grep -q 'unknown or incomplete argument' "$T/rp.err" ||
    fail "the last bad argument is not named"
republish --since 'not a time'
assert_eq 2 "$RP_RC" "republish --since 'not a time'"
republish --event-id not-a-uuid
assert_eq 2 "$RP_RC" "republish --event-id not-a-uuid"

step "a range republished while the daemon streams under load"
psql_q "CALL public.load(30, 20, 3, 'w')" >/dev/null # before the range
sleep 1.1
since=$(psql_q "SELECT now()")
psql_q "CALL public.load(60, 20, 3, 'a')" >/dev/null # the range
until=$(psql_q "SELECT now()")
psql_q "CALL public.load(150, 20, 3, 'b')" >/dev/null &
loader=$!
republish --since "$since" --until "$until"
assert_eq 0 "$RP_RC" "republish of a range under load"
range_rows=$(psql_q "SELECT count(*) FROM public.outbox_events WHERE created_at >= '$since' AND created_at < '$until'")
sent=$(sed -n 's/^republish: sent \([0-9]*\) events.*all ACKed.*/\1/p' "$T/rp.out")
assert_eq "$range_rows" "$sent" "events republish said it sent (rows of the range)"
kill -0 $loader 2>/dev/null && info "the writer was still committing when republish ended"
wait $loader || fail "the load failed"
wait_caught_up 120
dump "$T/d1.jsonl"
psql_q "SELECT event_id FROM public.outbox_events ORDER BY 1" >"$T/table.ids"
awk '{print $1}' "$T/d1.jsonl.ids" | diff "$T/table.ids" - >"$T/ids.diff" ||
    { head "$T/ids.diff" >&2; fail "de-duplicated by event_id, the topics do not hold exactly the table's events"; }
info "de-duplicated: $(wc -l <"$T/table.ids") events, as in the table"
assert_eq "$sent" "$(awk '$2 == 2' "$T/d1.jsonl.ids" | wc -l)" "events with two copies"
assert_eq 0 "$(awk '$2 > 2' "$T/d1.jsonl.ids" | wc -l)" "events with more than two copies"
psql_q "SELECT event_id FROM public.outbox_events WHERE created_at >= '$since' AND created_at < '$until' ORDER BY 1" |
    diff - <(awk '$2 == 2 {print $1}' "$T/d1.jsonl.ids") >/dev/null ||
    fail "the events with two copies are not the range's"
# A copy equals its original but for commit_lsn (a row read from the table has none).
jq -c 'select(.topic != "outbox.dlq") | [.headers.event_id, .topic, .partition, .key_hex, .value_hex,
        [.headers_list[] | select(.[0] != "commit_lsn")]]' <"$T/d1.jsonl" | sort -u |
    jq -r '.[0]' | uniq -d >"$T/differ.ids"
[[ ! -s $T/differ.ids ]] || fail "$(wc -l <"$T/differ.ids") copies differ from their originals, e.g. $(head -1 "$T/differ.ids")"
n_lsn=$(jq -r 'select(.headers.commit_lsn != null) | .headers.event_id' <"$T/d1.jsonl" | sort | uniq -c | awk '$1 > 1' | wc -l)
assert_eq 0 "$n_lsn" "events whose two copies both carry commit_lsn"

step "by event id and by aggregate: exactly those, once more"
agg=b-7
mapfile -t two < <(psql_q "SELECT event_id FROM public.outbox_events WHERE aggregate_id LIKE 'b-%' AND aggregate_id <> '$agg' ORDER BY event_id LIMIT 2")
republish --event-id "${two[0]}" --event-id " ${two[1]}"
assert_eq 0 "$RP_RC" "republish by event id"
agg_rows=$(psql_q "SELECT count(*) FROM public.outbox_events WHERE aggregate_type = 'Load' AND aggregate_id = '$agg'")
republish --aggregate "Load:$agg"
assert_eq 0 "$RP_RC" "republish by aggregate"
grep -q "^republish: sent $agg_rows events" "$T/rp.out" || fail "republish by aggregate did not send $agg_rows events"
republish --aggregate "Load:$agg" --dry-run
assert_eq 0 "$RP_RC" "republish --dry-run"
assert_eq "$agg_rows" "$(grep -c '^republish: would send event' "$T/rp.out")" "events --dry-run lists"
# exactly_once: plain idempotent produce outside transactions; a
# read_committed consumer (kdump's default) sees the copy.
republish --event-id "${two[0]}" --set delivery.mode=exactly_once
assert_eq 0 "$RP_RC" "republish under [delivery] mode = exactly_once"
grep -q 'outside Kafka transactions' "$T/rp.err" || fail "exactly_once: republish does not say the copies are outside transactions"
dump "$T/d2.jsonl"
assert_eq $(($(wc -l <"$T/d1.jsonl") + 3 + agg_rows)) "$(wc -l <"$T/d2.jsonl")" "messages after (the ids', exactly_once's and the aggregate's copies, none from --dry-run)"
assert_eq $(($(count_of "$T/d1.jsonl" "${two[0]}") + 2)) "$(count_of "$T/d2.jsonl" "${two[0]}")" "copies of ${two[0]} (by id, then under exactly_once)"
assert_eq $(($(count_of "$T/d1.jsonl" "${two[1]}") + 1)) "$(count_of "$T/d2.jsonl" "${two[1]}")" "copies of ${two[1]}"
psql_q "SELECT event_id FROM public.outbox_events WHERE aggregate_id = '$agg'" >"$T/agg.ids"
while read -r id; do
    assert_eq $(($(count_of "$T/d1.jsonl" "$id") + 1)) "$(count_of "$T/d2.jsonl" "$id")" "copies of $id (aggregate $agg)"
done <"$T/agg.ids"
# The aggregate's new copies are the last agg_rows messages of its partition, by version.
jq -r --arg a "$agg" 'select(.key == $a) | .headers.aggregate_version' <"$T/d2.jsonl" |
    tail -n "$agg_rows" >"$T/agg.versions"
sort -n "$T/agg.versions" | diff -q - "$T/agg.versions" >/dev/null ||
    fail "the aggregate's copies are not in aggregate_version order: $(tr '\n' ' ' <"$T/agg.versions")"

# Several outbox sections: --outbox NAME picks one, and is needed.
two_sections=(--set outbox.one.table=public.outbox_events --set outbox.two.table=public.outbox_two)
republish "${two_sections[@]}" --event-id "${two[0]}" --dry-run
assert_eq 2 "$RP_RC" "republish without --outbox when there are two outbox sections"
grep -q 'several outbox sections: name one (one, two)' "$T/rp.err" || fail "the outbox sections are not named"
republish "${two_sections[@]}" --outbox one --event-id "${two[0]}" --dry-run
assert_eq 0 "$RP_RC" "republish --outbox one"
assert_eq 1 "$(grep -c "^republish: would send event ${two[0]} " "$T/rp.out")" "events --outbox one --dry-run lists"

missing=$(psql_q "SELECT gen_random_uuid()")
republish --event-id "${two[0]},$missing"
assert_eq 1 "$RP_RC" "republish of an id not in the table"
grep -q "$missing" "$T/rp.err" || fail "the missing event id is not named"
republish --aggregate Nope:1
assert_eq 1 "$RP_RC" "republish of a selection that matches nothing"
grep -q 'nothing matched the selection' "$T/rp.err" || fail "an empty selection is not said"

step "a poison row: halt names it, dlq dead-letters it"
outboxd_stop || fail "outboxd exited $OUTBOXD_RC on SIGTERM"
poison=$(psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
                 VALUES (gen_random_uuid(), 'Load', '', 'Bad', '{}') RETURNING event_id")
republish --event-id "$poison"
assert_eq 1 "$RP_RC" "republish of a poison row under policy = halt"
grep -q "a row cannot be published (public.outbox_events; EMPTY_AGGREGATE_ID.*$poison" "$T/rp.err" || fail "the poison row is not named"
republish --event-id "$poison" --set errors.policy=dlq
assert_eq 0 "$RP_RC" "republish of a poison row under policy = dlq"
dlq=$("$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" -b "$KAFKA_BOOTSTRAP" -t outbox.dlq --timeout-ms 20000 |
    jq -r --arg id "$poison" 'select(.headers.event_id == $id) | .headers.dlq_error')
assert_eq EMPTY_AGGREGATE_ID "$dlq" "the dead letter's dlq_error"

big=$(psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
              VALUES (gen_random_uuid(), 'Load', 'big', 'Big', jsonb_build_object('x', repeat('y', 5000))) RETURNING event_id")
republish --event-id "$big" --set kafka.message.max.bytes=3000
assert_eq 1 "$RP_RC" "republish of a row larger than message.max.bytes under policy = halt"
grep -q "an event cannot be produced (public.outbox_events; MSG_SIZE_TOO_LARGE.*$big" "$T/rp.err" || fail "the too-large event is not named"
republish --event-id "$big" --set kafka.message.max.bytes=3000 --set errors.policy=dlq
assert_eq 0 "$RP_RC" "republish of a row larger than message.max.bytes under policy = dlq"
"$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" -b "$KAFKA_BOOTSTRAP" -t outbox.dlq --timeout-ms 20000 |
    jq -r --arg id "$big" 'select(.headers.event_id == $id) | [.headers.dlq_error, .headers.dlq_value_truncated_from] | @tsv' >"$T/big.dlq"
read -r code from <"$T/big.dlq"
assert_eq MSG_SIZE_TOO_LARGE "$code" "the too-large row's dead letter's dlq_error"
[[ -n $from ]] || fail "the too-large row's dead letter does not say its value was truncated"

step "refused by the broker after sending: halt names it, dlq dead-letters it"
# outbox.event.Tiny takes at most 1000 bytes a message, far below the
# producer's message.max.bytes: only the broker's delivery report refuses.
# The broker's limit is on a record batch, and refuses every event in it:
# batch.size = 1000 (what deploy/faults.md, "Poison events", advises)
# keeps the small event out of the big one's batch.
"$E2E_SRC_DIR/tests/kafka/kafka.sh" admin "$E2E_KAFKA_DIR" \
    topic:outbox.event.Tiny:1:max.message.bytes=1000 >"$T/admin.log" 2>&1 ||
    fail "creating outbox.event.Tiny failed: $(cat "$T/admin.log")"
mapfile -t tiny < <(psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
    VALUES (gen_random_uuid(), 'Tiny', 't-1', 'Fits', '{}'),
           (gen_random_uuid(), 'Tiny', 't-1', 'Refused', jsonb_build_object('x', repeat('y', 3000)))
    RETURNING event_id")
republish --event-id "${tiny[0]},${tiny[1]}" --set kafka.batch.size=1000
assert_eq 1 "$RP_RC" "republish of an event the broker refuses, under policy = halt"
grep -q "NOT complete: 1 of 2 selected events were ACKed.*${tiny[1]} to outbox.event.Tiny: MSG_SIZE_TOO_LARGE" "$T/rp.err" ||
    fail "the refused event and its code are not named"
republish --event-id "${tiny[0]},${tiny[1]}" --set kafka.batch.size=1000 --set errors.policy=dlq
assert_eq 0 "$RP_RC" "republish of an event the broker refuses, under policy = dlq"
grep -q "^republish: sent 2 events (1 of them dead letters to outbox.dlq" "$T/rp.out" ||
    fail "republish does not say 2 sent, 1 of them a dead letter"
grep -q "event ${tiny[1]} was refused by the broker (MSG_SIZE_TOO_LARGE: .*dead-lettered to outbox.dlq" "$T/rp.err" ||
    fail "the dead-lettered refusal is not logged"
"$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" -b "$KAFKA_BOOTSTRAP" -t outbox.dlq --timeout-ms 20000 |
    jq -r --arg id "${tiny[1]}" 'select(.headers.event_id == $id) | [.headers.dlq_error, .headers.dlq_original_topic, (.value | length)] | @tsv' >"$T/tiny.dlq"
assert_eq "MSG_SIZE_TOO_LARGE	outbox.event.Tiny	$(psql_q "SELECT octet_length(payload::text) FROM public.outbox_events WHERE event_id = '${tiny[1]}'")" \
    "$(cat "$T/tiny.dlq")" "the refused event's dead letter (code, original topic, value length)"
"$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" -b "$KAFKA_BOOTSTRAP" -t outbox.event.Tiny --timeout-ms 20000 |
    jq -r '.headers.event_id' >"$T/tiny.ids"
assert_eq "${tiny[0]} ${tiny[0]}" "$(xargs <"$T/tiny.ids")" "outbox.event.Tiny: the event that fits, once per run"

step "a bytea payload read under bytea_output = escape: its bytes; base64 under value_converter = json"
psql_q <<'SQL' >/dev/null
CREATE TABLE public.outbox_bin (LIKE public.outbox_events INCLUDING DEFAULTS);
ALTER TABLE public.outbox_bin ALTER COLUMN payload TYPE bytea USING NULL;
ALTER ROLE postgres SET bytea_output = 'escape';
SQL
assert_eq escape "$(psql_q "SHOW bytea_output")" "bytea_output of a new session"
mapfile -t bin < <(psql_q "INSERT INTO public.outbox_bin (event_id, aggregate_type, aggregate_id, event_type, payload)
    VALUES (gen_random_uuid(), 'Bin', 'all', 'Bytes', (SELECT string_agg(set_byte('\\x00'::bytea, 0, i), ''::bytea ORDER BY i) FROM generate_series(0, 255) i)),
           (gen_random_uuid(), 'Bin', 'nul', 'Bytes', '\\x00'::bytea),
           (gen_random_uuid(), 'Bin', 'empty', 'Bytes', ''::bytea)
    RETURNING event_id")
republish --set outbox.table=public.outbox_bin --event-id "${bin[0]},${bin[1]},${bin[2]}"
assert_eq 0 "$RP_RC" "republish of bytea payloads"
republish --set outbox.table=public.outbox_bin --set outbox.value_converter=json --event-id "${bin[0]}"
assert_eq 0 "$RP_RC" "republish of a bytea payload under value_converter = json"
psql_q "ALTER ROLE postgres RESET bytea_output" >/dev/null
"$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" -b "$KAFKA_BOOTSTRAP" -t outbox.event.Bin --timeout-ms 20000 |
    jq -r '[.headers.event_id, .value_hex] | join(" ")' | sort >"$T/bin.got"
psql_q "SELECT event_id || ' ' || encode(payload, 'hex') FROM public.outbox_bin
        UNION ALL
        SELECT event_id || ' ' || encode(convert_to('\"' || replace(encode(payload, 'base64'), E'\n', '') || '\"', 'UTF8'), 'hex')
        FROM public.outbox_bin WHERE aggregate_id = 'all'" | sort >"$T/bin.want"
diff "$T/bin.want" "$T/bin.got" >&2 || fail "bytea payloads on Kafka differ from the table's bytes (< want, > got)"
info "bytea: 256 byte values, a lone NUL and an empty payload byte for byte; base64 under json"

step "a missing topic, then the broker down: exit 1, nothing claimed sent"
republish --event-id "${two[0]}" --set outbox.topic=republish.missing \
    --set kafka.allow.auto.create.topics=false --set kafka.message.timeout.ms=2000
assert_eq 1 "$RP_RC" "republish to a topic that does not exist"
grep -q 'sent' "$T/rp.out" && fail "republish claimed something sent to a missing topic"
grep -q 'NOT complete: 0 of 1 selected events were ACKed.*republish.missing' "$T/rp.err" ||
    fail "the failure does not name the topic"
broker_cmd "down 1"
republish --aggregate "Load:$agg" --set kafka.message.timeout.ms=2000
assert_eq 1 "$RP_RC" "republish with the broker down"
grep -q 'sent' "$T/rp.out" && fail "republish claimed something sent with the broker down"
grep -q "NOT complete: 0 of $agg_rows selected events were ACKed" "$T/rp.err" ||
    fail "the failure does not say that nothing was ACKed"

step "rows deleted after insert: nothing can be republished, and why"
psql_q "DELETE FROM public.outbox_events" >/dev/null
for ((i = 0; i < 150; i++)); do
    [[ $(psql_q "SELECT n_tup_del > 0 FROM pg_stat_user_tables WHERE relname = 'outbox_events'") == t ]] && break
    sleep 0.2
done
republish --since "$since"
assert_eq 1 "$RP_RC" "republish when the rows are gone"
grep -q 'the rows are gone.*deletes outbox rows after insert.*retention job' "$T/rp.err" ||
    fail "the empty selection does not explain that the rows are deleted after insert"
e2e_pass
