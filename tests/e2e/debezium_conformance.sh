#!/usr/bin/env bash
# Drop-in for Debezium's Outbox Event Router (issue 21, part 2): real
# Debezium 3.6.1 (PostgreSQL connector, plugin.name=pgoutput, the Outbox
# Event Router, in Kafka Connect standalone: tests/debezium/debezium.sh)
# and outboxd with [outbox] preset = debezium read the same outbox table of
# the same PostgreSQL, each on its own slot, and produce to the same real
# Kafka broker under their own topic prefix (dbz. and obx.). Both place the
# `type` column in an eventType header (Debezium's
# table.fields.additional.placement, outboxd's additional_placement).
#
# One workload of edge cases goes through both: many aggregates in one
# multi-row INSERT, a NULL payload, non-ASCII keys, types and payloads,
# JSON with escapes, a 1 MiB payload, a rolled-back transaction, a
# rolled-back savepoint, an UPDATE and a DELETE of outbox rows (both
# relays ignore them; the DELETE of a row inserted in the same
# transaction keeps its event).
#
# Then, per event (matched by the id header): the topic after the prefix,
# the partition (4 per topic: the key's murmur2 hash on both sides), the
# key bytes, the value bytes (null for null), and the headers in order,
# names and bytes. Every difference fails the test but the one listed in
# deploy/debezium.md's migration section as known: Debezium's own
# __debezium.context.* headers (extended.headers.enabled), which name the
# Connect task and have no outboxd equivalent; they are removed from
# Debezium's side before the diff, and the test checks they were there.
#
# Then the same comparison for a second pair on slots made before the
# workload: Debezium with JsonConverter (schemas.enable=false) and outboxd
# with [outbox] value_converter = json, both placing type and aggregateid
# in the value's envelope (type:envelope:eventType, aggregateid:envelope)
# besides the eventType header.
#
# Then the migration procedure of deploy/debezium.md under load: a writer commits
# ~1,500 one-event transactions; Debezium is stopped (SIGTERM) in the middle
# of them; outboxd starts on Debezium's slot and publication
# (create_slot = false, no offset file: from the slot's confirmed
# position) with Debezium's topic names. The combined output of both must
# hold every row of the table (0 missing, nothing unknown); duplicates are
# counted, and each must be one copy from Debezium and one from outboxd.
#
# Needs the real-Kafka jars (real.resolve) and Debezium's
# (real.resolve_debezium).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
E2E_TIMEOUT=${E2E_TIMEOUT:-600}
e2e_init debezium_conformance
DBZ=$E2E_SRC_DIR/tests/debezium/debezium.sh
BIG=1048576 # bytes of the big payload's string

pg_start
psql_q "CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
          aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb);
        CREATE PUBLICATION dbz_pub FOR TABLE public.outbox" >/dev/null
# Messages up to 4 MB: the 1 MiB payload does not fit Kafka's 1 MB default.
printf 'message.max.bytes=4194304\nreplica.fetch.max.bytes=4194304\n' >"$T/broker.properties"
E2E_KAFKA_PROPERTIES=$T/broker.properties broker_start --partitions 4

step "starting Debezium (Kafka Connect standalone)"
DBZ_SLOT=debezium DBZ_PUBLICATION=dbz_pub DBZ_TOPIC_PREFIX=dbz. \
    DBZ_ROUTER_EXTRA="table.fields.additional.placement=type:header:eventType" \
    DBZ_WORKER_EXTRA="producer.max.request.size=4194304" \
    "$DBZ" start "$T/debezium" >"$T/debezium.url" 2>"$T/debezium.err" || {
    "$DBZ" kill "$T/debezium" || true
    fail "Debezium did not start: $(tail -c 3000 "$T/debezium.err")"
}
E2E_BG_PIDS+=("$("$DBZ" pid "$T/debezium")")
info "Debezium RUNNING after $(cat "$T/debezium/start.ms") ms"

OUTBOXD_SLOT=outboxd outboxd_start --set outbox.preset=debezium \
    --set postgres.publication=dbz_pub --set 'outbox.topic=obx.outbox.event.${aggregatetype}' \
    --set outbox.additional_placement=type:header:eventType \
    --set kafka.message.max.bytes=4194304

# The slots of the JsonConverter pair (below), made before the workload so
# that they decode it too.
for slot in debezium_json outboxd_json; do
    psql_q "SELECT 1 FROM pg_create_logical_replication_slot('$slot', 'pgoutput')" >/dev/null
done

step "the workload"
expected=0
ins() { # SQL of one transaction; N: the events it commits
    psql -XAtq -v ON_ERROR_STOP=1 -c "$1" >/dev/null || fail "workload: $1"
    expected=$((expected + $2))
}
cols="id, aggregatetype, aggregateid, type, payload"
ins "INSERT INTO public.outbox ($cols) SELECT gen_random_uuid(), 'Order', 'order-' || (g % 60),
       'OrderCreated', jsonb_build_object('n', g, 'lines', jsonb_build_array(g, g * 2))
     FROM generate_series(1, 300) AS g" 300
ins "INSERT INTO public.outbox ($cols) VALUES (gen_random_uuid(), 'Order', 'order-null', 'OrderDeleted', NULL)" 1
ins "INSERT INTO public.outbox ($cols) VALUES
       (gen_random_uuid(), 'Kunde', 'kunde-äöü-고객', 'Angelegt', '{\"name\": \"Jürgen 김\", \"emoji\": \"🚀\", \"q\": \"a\\\"b\", \"nl\": \"x\\ny\"}'),
       (gen_random_uuid(), 'Kunde', 'kunde-€', 'Geändert', '[1, 2.50, -0.0, 1e3, null, true]')" 2
ins "INSERT INTO public.outbox ($cols) VALUES (gen_random_uuid(), 'Blob', 'blob-1', 'Uploaded',
       jsonb_build_object('blob', repeat('x', $BIG)))" 1
ins "BEGIN; INSERT INTO public.outbox ($cols) VALUES (gen_random_uuid(), 'Order', 'order-rb', 'Never', '{}'); ROLLBACK" 0
ins "BEGIN;
     INSERT INTO public.outbox ($cols) VALUES (gen_random_uuid(), 'Order', 'order-sp', 'Kept1', '{}');
     SAVEPOINT s;
     INSERT INTO public.outbox ($cols) VALUES (gen_random_uuid(), 'Order', 'order-sp', 'Discarded', '{}');
     ROLLBACK TO SAVEPOINT s;
     INSERT INTO public.outbox ($cols) VALUES (gen_random_uuid(), 'Order', 'order-sp', 'Kept2', '{}');
     COMMIT" 2
ins "UPDATE public.outbox SET payload = '{\"updated\": true}' WHERE aggregateid = 'order-sp'" 0
ins "BEGIN;
     INSERT INTO public.outbox ($cols) VALUES (gen_random_uuid(), 'Order', 'order-del', 'Transient', '{\"t\": 1}');
     DELETE FROM public.outbox WHERE aggregateid = 'order-del';
     COMMIT" 1
ins "DELETE FROM public.outbox WHERE aggregateid = 'order-null'" 0
info "$expected events committed"

# dump_prefix PREFIX FILE: every message of the PREFIX topics.
dump_prefix() {
    KDUMP_ARGS="-X fetch.max.bytes=8388608 -X max.partition.fetch.bytes=8388608" kdump_all |
        jq -c --arg p "$1" 'select(.topic | startswith($p))' >"$2"
}
# compare DBZ_DIR DBZ_PREFIX OBX_PREFIX: waits until Debezium (Connect in
# DBZ_DIR) and outboxd each delivered $expected messages to their topics,
# then compares them event by event; the dumps stay in $T/PREFIX.jsonl and
# the compared lines in $T/PREFIX.tsv.
compare() {
    local dir=$1 dp=$2 op=$3 i n_obx n_dbz ctx
    step "waiting until both relays delivered $expected messages ($dp, $op)"
    for ((i = 0; i < 120; i++)); do
        dump_prefix "$op" "$T/$op.jsonl"
        dump_prefix "$dp" "$T/$dp.jsonl"
        n_obx=$(wc -l <"$T/$op.jsonl") n_dbz=$(wc -l <"$T/$dp.jsonl")
        ((n_obx >= expected && n_dbz >= expected)) && break
        outboxd_assert_running
        [[ -n "$("$DBZ" pid "$dir")" ]] || fail "Debezium's Connect exited: $(tail -n 20 "$dir/connect.log")"
        sleep 1
    done
    info "outboxd: $n_obx messages, Debezium: $n_dbz"
    assert_eq "$expected" "$n_obx" "outboxd's messages"
    assert_eq "$expected" "$n_dbz" "Debezium's messages"
    step "comparing $dp and $op, event by event"
    normalise "$op" <"$T/$op.jsonl" >"$T/$op.tsv"
    normalise "$dp" <"$T/$dp.jsonl" >"$T/$dp.tsv"
    ctx=$(jq -s '[.[] | select([.headers_list[][0]] | any(startswith("__debezium.context.")))] | length' "$T/$dp.jsonl")
    info "Debezium's messages carrying __debezium.context.* headers: $ctx of $n_dbz"
    assert_eq "$expected" "$ctx" "Debezium messages with its context headers (the known difference)"
    assert_eq 0 "$(jq -s '[.[] | select([.headers_list[][0]] | any(startswith("__debezium")))] | length' "$T/$op.jsonl")" \
        "outboxd messages with __debezium headers"
    if ! diff "$T/$dp.tsv" "$T/$op.tsv" >"$T/diff.txt"; then
        head -c 4000 "$T/diff.txt" >&2
        fail "outboxd's messages differ from Debezium's ($(grep -c '^[<>]' "$T/diff.txt") lines; < Debezium, > outboxd; $T/diff.txt)"
    fi
    info "$expected events identical: topic, partition, key, value and headers"
    # What the comparison covered, so that a vacuous diff cannot pass.
    assert_eq "$expected" "$(cut -f1 "$T/$op.tsv" | sort -u | grep -vc '^-$')" "distinct event ids"
    assert_eq 4 "$(cut -f3 "$T/$op.tsv" | sort -u | wc -l)" "partitions used"
    assert_eq "id,eventType" "$(cut -f7 "$T/$op.tsv" | sort -u)" "header names"
}
# One line per message: id, topic without the prefix, partition, key,
# value and the headers in order (hex), Debezium's context headers apart.
normalise() { # PREFIX < dump
    jq -r --arg p "$1" '
        def own: startswith("__debezium.context.") | not;
        [.headers_list[] | select(.[0] | own)] as $h
        | [($h | map(select(.[0] == "id")) | .[0][1] // "-"),
           (.topic | ltrimstr($p)), (.partition | tostring),
           (.key_hex // "null"), (.value_hex // "null"),
           ($h | length | tostring),
           ($h | map(.[0]) | join(",")),
           (.headers_hex | with_entries(select(.key | own)) | tojson)] | @tsv' | sort
}
compare "$T/debezium" dbz. obx.
assert_eq 1 "$(awk -F '\t' '$5 == "null"' "$T/obx..tsv" | wc -l)" "null values (the NULL payload)"
big=$(jq -r 'select(.key == "blob-1") | .value_hex | length / 2' "$T/obx..jsonl")
((big > BIG)) || fail "the big payload arrived with $big bytes"
info "the 1 MiB payload arrived whole ($big bytes) from both"
assert_eq 1 "$(jq -r 'select(.key == "kunde-äöü-고객") | .value' "$T/obx..jsonl" | grep -c 'Jürgen 김')" \
    "non-ASCII payload"
assert_eq 0 "$(jq -r 'select(.key == "order-rb" or (.headers.eventType // "") == "Discarded")' "$T/obx..jsonl" | wc -l)" \
    "events of rolled-back work"

step "Debezium with JsonConverter and an envelope, and outboxd with value_converter = json"
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
placement=type:envelope:eventType,aggregateid:envelope,type:header:eventType
DBZ_SLOT=debezium_json DBZ_PUBLICATION=dbz_pub DBZ_TOPIC_PREFIX=dbzj. DBZ_NAME=debezium-json \
    DBZ_ROUTER_EXTRA="table.fields.additional.placement=$placement" \
    DBZ_WORKER_EXTRA="producer.max.request.size=4194304
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=false" \
    "$DBZ" start "$T/debezium_json" >/dev/null 2>"$T/debezium_json.err" || {
    "$DBZ" kill "$T/debezium_json" || true
    fail "Debezium (JsonConverter) did not start: $(tail -c 3000 "$T/debezium_json.err")"
}
E2E_BG_PIDS+=("$("$DBZ" pid "$T/debezium_json")")
OUTBOXD_SLOT=outboxd_json outboxd_start --set outbox.preset=debezium \
    --set postgres.publication=dbz_pub --set postgres.create_slot=false \
    --set 'outbox.topic=obxj.outbox.event.${aggregatetype}' \
    --set outbox.value_converter=json --set "outbox.additional_placement=$placement" \
    --set kafka.message.max.bytes=4194304 --set "offsets.file=$T/json.offset"
compare "$T/debezium_json" dbzj. obxj.
assert_eq '{"payload":null,"eventType":"OrderDeleted","aggregateid":"order-null"}' \
    "$(jq -r 'select(.key == "order-null") | .value' "$T/obxj..jsonl")" "the envelope of a NULL payload"
assert_eq "$(psql_q "SELECT payload::text FROM public.outbox WHERE aggregateid = 'kunde-äöü-고객'")" \
    "$(jq -r 'select(.key == "kunde-äöü-고객") | .value | fromjson | .payload' "$T/obxj..jsonl")" \
    "the envelope's payload: the jsonb text as a JSON string"
"$DBZ" stop "$T/debezium_json" || fail "Debezium (JsonConverter) did not stop"

step "taking over Debezium's slot under load (deploy/debezium.md's migration procedure)"
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
psql_q "SELECT pg_drop_replication_slot(s) FROM unnest(ARRAY['debezium_json', 'outboxd_json']) AS s" >/dev/null
# A writer of one event per transaction, about 150 a second, for ~10 s.
LOAD_N=${LOAD_N:-1500}
psql -XAtq -v ON_ERROR_STOP=1 -c "DO \$\$ BEGIN FOR i IN 1..$LOAD_N LOOP
      INSERT INTO public.outbox ($cols) VALUES (gen_random_uuid(), 'Switch', 'sw-' || (i % 40),
        'Switched', jsonb_build_object('i', i));
      COMMIT; PERFORM pg_sleep(0.005); END LOOP; END \$\$" >"$T/load.out" 2>&1 &
load=$!
E2E_BG_PIDS+=("$load")
sleep 3
OUTBOXD_SLOT=debezium
info "Debezium's slot before the stop: confirmed $(slot_confirmed_lsn)"
t0=$(date +%s%N)
"$DBZ" stop "$T/debezium" || fail "Debezium did not stop"
confirmed=$(slot_confirmed_lsn)
info "Debezium stopped in $((($(date +%s%N) - t0) / 1000000)) ms; its slot confirmed $confirmed"
takeover=(--set outbox.preset=debezium --set postgres.publication=dbz_pub
    --set postgres.create_slot=false --set 'outbox.topic=dbz.outbox.event.${aggregatetype}'
    --set outbox.additional_placement=type:header:eventType
    --set kafka.message.max.bytes=4194304 --set "offsets.file=$T/takeover.offset")
outboxd_start "${takeover[@]}"
grep -q "streaming slot \"debezium\" from $confirmed " "$T/outboxd.log" ||
    fail "outboxd did not start from Debezium's confirmed position $confirmed: $(grep 'streaming slot' "$T/outboxd.log" | tail -n 1)"
wait "$load" || fail "the writer failed: $(cat "$T/load.out")"
# The span-context column (Debezium's tracing.span.context.field): its
# W3C entries become headers (Debezium without OpenTelemetry ignores the
# column; see deploy/debezium.md's known differences, so it is added only now).
psql_q "ALTER TABLE public.outbox ADD COLUMN tracingspancontext text" >/dev/null
psql_q "INSERT INTO public.outbox ($cols, tracingspancontext) VALUES (gen_random_uuid(), 'Switch',
          'traced-1', 'Traced', '{}', E'#Thu Dec 03 12:00:00 UTC 2026\\ntraceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\\ntracestate=rojo\\\\=00f067aa0ba902b7\\n')" >/dev/null
wait_caught_up 90
dump_prefix dbz. "$T/switch.jsonl"
psql_q "SELECT id FROM public.outbox" | sort >"$T/switch.rows"
# (order-del and order-null were deleted: their messages have no row)
jq -r 'select(.key != "order-del" and .key != "order-null") | .headers.id' "$T/switch.jsonl" |
    sort >"$T/switch.ids"
rows=$(wc -l <"$T/switch.rows") msgs=$(wc -l <"$T/switch.ids")
missing=$(comm -23 "$T/switch.rows" <(sort -u "$T/switch.ids") | wc -l)
dups=$((msgs - $(sort -u "$T/switch.ids" | wc -l)))
by_dbz=$(jq -r 'select([.headers_list[][0]] | any(startswith("__debezium.context."))) | .headers.id' "$T/switch.jsonl" | sort -u)
info "the switch: $rows rows in the table, $msgs messages in the dbz. topics (both relays), $missing missing, $dups duplicates"
both=$(comm -12 <(echo "$by_dbz") <(jq -r 'select([.headers_list[][0]] | any(startswith("__debezium")) | not) | .headers.id' "$T/switch.jsonl" | sort -u) | wc -l)
info "events sent by both (Debezium, then outboxd from the slot's confirmed position): $both"
# Every duplicate is an event Debezium sent and outboxd sent again: what
# Debezium had produced past the position it last confirmed to the slot.
assert_eq "$dups" "$both" "duplicates that are one copy from each relay"
assert_eq 0 "$missing" "events missing from the combined output of Debezium and outboxd"
assert_eq 0 "$(comm -13 "$T/switch.rows" <(sort -u "$T/switch.ids") | grep -c . || true)" \
    "messages for rows that are not in the table"
assert_eq $((expected - 2 + LOAD_N + 1)) "$rows" "rows (all but the two deleted)"
assert_eq '[["id",true],["eventType","Traced"],["traceparent","00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"],["tracestate","rojo=00f067aa0ba902b7"]]' \
    "$(jq -c 'select(.key == "traced-1") | [.headers_list[] | if .[0] == "id" then [.[0], true] else . end]' "$T/switch.jsonl")" \
    "the span context's headers"
# The migration's last step: outboxd verify, with outboxd's configuration,
# over what both relays wrote.
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" "${takeover[@]}" --json \
    >"$T/verify.json" 2>"$T/verify.err" || fail "outboxd verify exited $? after the switch: $(cat "$T/verify.err") $(head -c 2000 "$T/verify.json")"
info "verify after the switch: $(jq -c '{ok, rows, messages, missing, duplicates, order_violations, unknown}' "$T/verify.json")"
assert_eq 0 "$(jq -r '.missing' "$T/verify.json")" "verify: missing"
assert_eq "$dups" "$(jq -r '.duplicates' "$T/verify.json")" "verify: duplicates (the switch's)"
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
e2e_pass
