#!/usr/bin/env bash
# Polling mode, the normal path and the rows of the failure table before the
# broker: a rolled-back transaction leaves no event; events committed while
# no relay runs wait as PENDING with no lease and are delivered when one
# starts; claim -> produce -> ACK -> SENT (lease cleared, generation 1); a
# new row is found through NOTIFY (poll interval 60 s), and through the poll
# interval when the trigger is disabled; events of one aggregate from one
# transaction (equal created_at) arrive in order; message contents; outboxd
# check in polling mode; outboxd verify; SIGTERM exits 0; configuration
# errors exit 2 (timestamp = commit among them: no commit time here); a
# bytea payload arrives as its bytes, all 256 values, under bytea_output =
# escape; outboxd republish sends that row again, the same bytes, and leaves
# its status, attempts and lease as they were.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/polling_lib.sh"
e2e_init polling_basic
pg_start
broker_start

step "the logical table is no polling table: check FAILs, the daemon exits 1 at start"
relay_ini bad
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/relay.bad.ini" >"$T/check0.out" 2>&1 || rc=$?
assert_eq 1 "$rc" "outboxd check exit status"
grep -q '^FAIL polling table public.outbox_events: polling mode needs the state columns, and status, attempts, next_attempt_at, lease_owner, lease_generation, lease_until, sent_at, last_error are missing; create the table from sql/outbox_polling.sql' "$T/check0.out" ||
    { cat "$T/check0.out" >&2; fail "no FAIL line naming the missing state columns"; }
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" -c "$T/relay.bad.ini" >"$T/start0.out" 2>&1 || rc=$?
assert_eq 1 "$rc" "daemon exit status"
grep -q 'ERROR: polling table public.outbox_events: polling mode needs the state columns' "$T/start0.out" ||
    { cat "$T/start0.out" >&2; fail "the daemon did not say why"; }
polling_schema

step "configuration errors exit 2 and name the key"
for bad in "source.mode=poll" "polling.lease=30" "polling.lease=500ms" "polling.backoff_min=10m" \
    "outbox.timestamp=commit"; do
    rc=0
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" -c "$T/relay.bad.ini" --set "$bad" 2>"$T/bad.err" || rc=$?
    assert_eq 2 "$rc" "exit status with --set $bad"
    key=${bad%%=*}; key=${key#*.}
    grep -q "$key" "$T/bad.err" || fail "the error for $bad does not name $key: $(cat "$T/bad.err")"
done

step "failure table: a rolled-back transaction leaves no event"
psql_q "BEGIN; INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type) VALUES ('$(uuid 999)', 'Order', 'o-rb', 'Tick'); ROLLBACK;"
assert_eq 0 "$(psql_q "SELECT count(*) FROM public.outbox_events")" "rows after ROLLBACK"

step "failure table: committed while no relay runs -> PENDING, no lease"
# One transaction: 20 events of aggregate o-1 (versions 1..20, equal
# created_at) interleaved with 20 of o-2.
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        SELECT gen_random_uuid(), 'Order', 'o-' || (1 + g % 2), 1 + g / 2, 'Tick', jsonb_build_object('g', g)
        FROM generate_series(0, 39) g"
ins 1 o-3 1 Invoice "'{\"amount\": 12000, \"text\": \"\\\"quoted\\\" ü\"}'::jsonb"
assert_eq 1 "$(psql_q "SELECT count(DISTINCT created_at) FROM public.outbox_events WHERE aggregate_id IN ('o-1', 'o-2')")" "one created_at for the whole transaction"
assert_sql "SELECT bool_and(status = 'PENDING' AND lease_owner IS NULL AND lease_until IS NULL AND lease_generation = 0 AND attempts = 0) FROM public.outbox_events" \
    "every row PENDING without a lease"

step "outboxd check in polling mode"
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/relay.bad.ini" >"$T/check.out" 2>&1 || rc=$?
cat "$T/check.out" >&2
assert_eq 0 "$rc" "outboxd check exit status"
grep -q '^skip wal_level = logical: not used in \[source\] mode = polling' "$T/check.out" || fail "wal_level not skipped"
grep -q '^skip slot: not used' "$T/check.out" || fail "slot not skipped"
grep -q '^ok   polling table public.outbox_events' "$T/check.out" || fail "no ok line for the polling table"
grep -q '^FAIL' "$T/check.out" && fail "check has a FAIL line"

step "relay A delivers the backlog: SENT, lease cleared, generation 1"
RELAY_POLL_MS=60000 relay_start A
wait_rows "status = 'SENT'" 41 30
assert_sql "SELECT bool_and(sent_at IS NOT NULL AND lease_owner IS NULL AND lease_until IS NULL AND lease_generation = 1 AND attempts = 0 AND last_error IS NULL) FROM public.outbox_events" \
    "SENT rows: sent_at set, lease cleared, claimed once, no attempts"
wait_log A "polling public.outbox_events as A" 30

step "a new row is claimed through NOTIFY (poll interval is 60 s)"
t0=$SECONDS
ins 2 o-4 1
wait_rows "event_id = '$(uuid 2)' AND status = 'SENT'" 1 5
info "delivered within $((SECONDS - t0))s"

step "message contents"
kdump_all >"$T/dump.jsonl"
m=$(jq -c --arg id "$(uuid 1)" 'select(.headers.event_id == $id)' "$T/dump.jsonl")
assert_eq outbox.event.Invoice "$(jq -r .topic <<<"$m")" "topic"
assert_eq o-3 "$(jq -r .key <<<"$m")" "key = aggregate_id"
assert_eq "$(psql_q "SELECT payload::text FROM public.outbox_events WHERE event_id = '$(uuid 1)'")" "$(jq -r .value <<<"$m")" "value = payload"
assert_eq "aggregate_id,aggregate_type,aggregate_version,event_id,event_type" \
    "$(jq -r '[.headers_list[][0]] | sort | join(",")' <<<"$m")" "headers (no commit_lsn in polling mode)"
assert_eq "Invoice|o-3|1|Tick" "$(jq -r '[.headers.aggregate_type, .headers.aggregate_id, .headers.aggregate_version, .headers.event_type] | join("|")' <<<"$m")" "header values"
assert_eq "$(seq 1 20 | paste -sd,)" \
    "$(jq -r 'select(.key == "o-1") | .headers.aggregate_version' "$T/dump.jsonl" | paste -sd,)" \
    "o-1's 20 events of one transaction in order"

step "SIGTERM: exit 0"
relay_stop A
grep -q 'polling relay stopped: claimed 42, sent 42, retried 0, quarantined 0' "$T/relay.A.log" ||
    fail "no or wrong summary line: $(grep 'stopped' "$T/relay.A.log")"

step "without the trigger: found through the poll interval; check warns"
psql_q "ALTER TABLE public.outbox_events DISABLE TRIGGER outbox_events_notify"
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/relay.bad.ini" >"$T/check2.out" 2>&1 || true
grep -q "^warn polling table .*no enabled trigger NOTIFYs channel \"outboxd\"" "$T/check2.out" ||
    { cat "$T/check2.out" >&2; fail "check did not warn about the missing trigger"; }
RELAY_POLL_MS=300 relay_start B
wait_log B "polling public.outbox_events as B" 30
sleep 1
ins 3 o-5 1
wait_rows "event_id = '$(uuid 3)' AND status = 'SENT'" 1 5
relay_stop B

step "outboxd verify on the polling table"
polling_verify "$T/verify.json"
assert_eq "43|43|0|0|0" "$(jq -r '[.rows, .messages, .missing, .duplicates, .order_violations] | map(tostring) | join("|")' "$T/verify.json")" \
    "rows|messages|missing|duplicates|order violations"

step "a bytea payload: its bytes, though the database says bytea_output = escape"
psql_q "ALTER TABLE public.outbox_events ALTER COLUMN payload TYPE bytea USING convert_to(payload::text, 'UTF8')"
psql_q "ALTER DATABASE postgres SET bytea_output = 'escape'"
ins 4 b-1 1 Bin "(SELECT decode(string_agg(lpad(to_hex(i), 2, '0'), '' ORDER BY i), 'hex') FROM generate_series(0, 255) AS i)"
relay_start C
wait_rows "event_id = '$(uuid 4)' AND status = 'SENT'" 1 10
relay_stop C
"$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" -b "$KAFKA_BOOTSTRAP" -t outbox.event.Bin >"$T/bin.jsonl" ||
    fail "outboxd-kdump failed"
assert_eq "$(printf '%02x' {0..255} | tr -d '\n')" "$(jq -r .value_hex "$T/bin.jsonl")" "all 256 byte values"

step "outboxd republish of a polling table: the same bytes again, the row's state untouched"
before=$(psql_q "SELECT status || '|' || attempts || '|' || coalesce(lease_owner, '-') || '|' || lease_generation FROM public.outbox_events WHERE event_id = '$(uuid 4)'")
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" republish -c "$T/relay.C.ini" --event-id "$(uuid 4)" >"$T/rp.out" 2>"$T/rp.err" ||
    { cat "$T/rp.out" "$T/rp.err" >&2; fail "republish of a polling table's row failed"; }
grep -q '^republish: sent 1 events of .*all ACKed by Kafka' "$T/rp.out" || { cat "$T/rp.out" >&2; fail "republish did not say 1 sent"; }
"$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" -b "$KAFKA_BOOTSTRAP" -t outbox.event.Bin >"$T/bin2.jsonl" ||
    fail "outboxd-kdump failed"
assert_eq "2 1" "$(jq -r .value_hex "$T/bin2.jsonl" | wc -l) $(jq -r .value_hex "$T/bin2.jsonl" | sort -u | wc -l)" \
    "copies of the bytea event, and distinct values among them"
assert_eq "$before" "$(psql_q "SELECT status || '|' || attempts || '|' || coalesce(lease_owner, '-') || '|' || lease_generation FROM public.outbox_events WHERE event_id = '$(uuid 4)'")" \
    "status|attempts|lease_owner|lease_generation after republish"
e2e_pass
