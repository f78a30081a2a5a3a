#!/usr/bin/env bash
# The table-less outbox (sql/outbox_emit.sql, [outbox] message_prefix), for
# both plugins in one run (one PostgreSQL, one broker; a slot per plugin):
#  - events from outbox_emit() arrive byte for byte (jsonb, text, bytea
#    payloads, a NULL payload, aggregate_version, extra headers) and once;
#  - rows and messages mixed in one transaction keep statement order and
#    share the commit_lsn; across transactions they follow commit order
#    (a transaction that began first but commits last comes last);
#  - a non-transactional message with the prefix is not produced and is
#    counted in outboxd_messages_ignored_total{reason="non_transactional"};
#    messages of other prefixes are left alone; heartbeats still work;
#  - malformed content (not JSON, an unknown version) is dead-lettered
#    under policy dlq as BAD_MESSAGE with the raw content as the value, and
#    the stream goes on;
#  - a rolled-back transaction's messages are not produced;
#  - messages written while outboxd is stopped arrive after the restart,
#    nothing lost and nothing sent twice; restarted under [outbox]
#    timestamp = commit, each message (and the row beside them) carries its
#    transaction's commit time in ms (pg_xact_commit_timestamp of a row
#    written in the same transaction);
#  - (pgoutput) two [outbox.NAME] sections, each its own message_prefix:
#    each message goes to its section's topic template, in statement order
#    with that section's rows, a prefix no section has is left alone;
#    check's outbox messages line and verify's note per section; one
#    prefix in two sections is refused, naming both.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init emit
pg_start
psql_q "ALTER SYSTEM SET track_commit_timestamp = on" >/dev/null
pg_restart
psql -XAtq -v ON_ERROR_STOP=1 -f "$E2E_SRC_DIR/sql/outbox_emit.sql" >/dev/null ||
    fail "loading sql/outbox_emit.sql failed"

# public.emitted: what each committed event must look like on Kafka, written
# in the same transaction as the event (so a rollback takes both), in
# statement order (n).
psql_q <<'SQL'
CREATE TABLE public.emitted (
    n bigserial PRIMARY KEY, event_id uuid NOT NULL, topic text NOT NULL, key text NOT NULL,
    value_hex text, event_type text NOT NULL, aggregate_type text NOT NULL, version text,
    extra jsonb);
CREATE FUNCTION public.rec(id uuid, t text, k text, et text, v text, ver bigint, h jsonb)
RETURNS uuid LANGUAGE sql AS $$
    INSERT INTO public.emitted (event_id, topic, key, value_hex, event_type, aggregate_type,
                                version, extra)
    VALUES (id, 'outbox.event.' || t, k, v, et, t, ver::text, jsonb_strip_nulls(h))
    RETURNING event_id $$;
CREATE FUNCTION public.m_json(t text, k text, et text, p jsonb, ver bigint DEFAULT NULL,
                              h jsonb DEFAULT NULL) RETURNS uuid LANGUAGE sql AS $$
    SELECT public.rec(public.outbox_emit(t, k, et, p, ver, h), t, k, et,
                      encode(convert_to(p::text, 'UTF8'), 'hex'), ver, h) $$;
CREATE FUNCTION public.m_text(t text, k text, et text, p text, ver bigint DEFAULT NULL,
                              h jsonb DEFAULT NULL) RETURNS uuid LANGUAGE sql AS $$
    SELECT public.rec(public.outbox_emit(t, k, et, p, ver, h), t, k, et,
                      encode(convert_to(p, 'UTF8'), 'hex'), ver, h) $$;
CREATE FUNCTION public.m_bytes(t text, k text, et text, p bytea, ver bigint DEFAULT NULL,
                               h jsonb DEFAULT NULL) RETURNS uuid LANGUAGE sql AS $$
    SELECT public.rec(public.outbox_emit(t, k, et, p, ver, h), t, k, et,
                      encode(p, 'hex'), ver, h) $$;
CREATE FUNCTION public.r_row(t text, k text, et text, p jsonb, ver bigint DEFAULT NULL)
RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    eid uuid := gen_random_uuid();
BEGIN
    INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id,
                                      aggregate_version, event_type, payload)
    VALUES (eid, t, k, ver, et, p);
    RETURN public.rec(eid, t, k, et, encode(convert_to(p::text, 'UTF8'), 'hex'), ver, NULL);
END $$;
SQL
broker_start

# expect_json TAG: the expected events of topics outbox.event.TAG_*, one
# normalized JSON object per line, sorted.
expect_json() {
    psql_q "SELECT row_to_json(e) FROM (SELECT event_id, topic, key, value_hex, event_type,
                   aggregate_type, version, coalesce(extra, '{}') AS extra
            FROM public.emitted WHERE aggregate_type LIKE '$1\\_%') e" |
        jq -S -c . | sort
}

# got_json TAG DUMP: the same from a dump; fails on a header twice.
got_json() {
    jq -S -c --arg p "outbox.event.$1_" '
        select(.topic | startswith($p)) |
        if (.headers_list | length) != (.headers | length) then error("header twice: \(.)") else . end |
        {event_id: .headers.event_id, topic, key, value_hex, event_type: .headers.event_type,
         aggregate_type: .headers.aggregate_type, version: .headers.aggregate_version,
         extra: (.headers | del(.event_id, .event_type, .aggregate_type, .aggregate_id,
                                .aggregate_version, .commit_lsn))}' "$2" | sort
}

# check_events TAG: every committed event of TAG arrived once, byte for byte.
check_events() {
    kdump_all >"$T/dump.jsonl" 2>"$T/kdump.err" || { cat "$T/kdump.err" >&2; fail "kdump failed"; }
    expect_json "$1" >"$T/want.$1"
    got_json "$1" "$T/dump.jsonl" >"$T/got.$1" || fail "reading the dump failed"
    diff "$T/want.$1" "$T/got.$1" >&2 ||
        fail "events of $1 differ from what was emitted (< expected, > on Kafka)"
    info "$(wc -l <"$T/want.$1") events of $1 arrived once, byte for byte"
}

# key_order TAG KEY: the event ids of KEY on Kafka, in offset order.
key_order() {
    jq -r --arg p "outbox.event.$1_" --arg k "$2" \
        'select((.topic | startswith($p)) and .key == $k) | .headers.event_id' "$T/dump.jsonl" | xargs
}

for plugin in pgoutput wal2json; do
    tag=${plugin:0:1}w # pw, ww: aggregate types (and topics) of this run
    export OUTBOXD_TEST_PLUGIN=$plugin OUTBOXD_SLOT=emit_$plugin
    step "== $plugin =="
    outboxd_start --set outbox.message_prefix=outbox --set errors.policy=dlq \
        --set "offsets.file=$T/$plugin.offset" --set postgres.heartbeat_interval_ms=200

    step "$plugin: payloads byte for byte: jsonb, text, bytea, NULL; version and headers"
    psql_q <<SQL >/dev/null
BEGIN;
SELECT public.m_json('${tag}_order', 'o-1', 'OrderPlaced', '{"total": 10, "note": "Grüße \"q\"\\\\n"}', 1,
                     '{"tenant": "acme", "trace": "t-1", "dropped": null}');
SELECT public.m_text('${tag}_order', 'o-1', 'Noted', E'line1\nline2\ttab "quoted" \\\\ ünï', 2);
SELECT public.m_bytes('${tag}_blob', 'b-1', 'Blob', (SELECT string_agg(set_byte('\\x00'::bytea, 0, i), ''::bytea ORDER BY i) FROM generate_series(0, 255) i));
SELECT public.m_bytes('${tag}_blob', 'b-2', 'Empty', ''::bytea);
SELECT public.m_json('${tag}_order', 'o-2', 'Cleared', NULL);
COMMIT;
SQL
    wait_caught_up 60
    check_events "$tag"
    assert_eq 256 "$(jq -r --arg t "outbox.event.${tag}_blob" 'select(.topic == $t and .key == "b-1") | .value_hex | length / 2' "$T/dump.jsonl")" \
        "bytes of the bytea payload"
    assert_eq null "$(jq -r --arg t "outbox.event.${tag}_order" 'select(.topic == $t and .key == "o-2") | .value_hex' "$T/dump.jsonl")" \
        "a NULL payload is a null value"

    step "$plugin: rows and messages in one transaction keep statement order"
    ids=$(psql_q <<SQL
BEGIN;
SELECT public.r_row('${tag}_mix', 'm', 'R1', '{"i": 1}');
SELECT public.m_json('${tag}_mix', 'm', 'M2', '{"i": 2}');
SELECT public.m_text('${tag}_mix', 'm', 'M3', 'three');
SELECT public.r_row('${tag}_mix', 'm', 'R4', '{"i": 4}');
SELECT public.m_json('${tag}_mix', 'm', 'M5', '{"i": 5}');
COMMIT;
SQL
    )
    ids=$(xargs <<<"$ids")
    step "$plugin: across transactions, commit order (the later BEGIN commits first)"
    sess_open "late_$plugin"
    sess_run "late_$plugin" "BEGIN; SELECT public.m_json('${tag}_mix', 'm', 'LATE', '{\"i\": 7}');"
    ids="$ids $(psql_q "SELECT public.m_text('${tag}_mix', 'm', 'EARLY', 'six')")"
    sess_run "late_$plugin" "COMMIT;"
    sess_close "late_$plugin"
    ids="$ids $(psql_q "SELECT event_id FROM public.emitted WHERE event_type = 'LATE' AND aggregate_type = '${tag}_mix'")"
    wait_caught_up 60
    check_events "$tag"
    assert_eq "$ids" "$(key_order "$tag" m)" "order of key m (statement order, then commit order)"
    assert_eq 1 "$(jq -r --arg t "outbox.event.${tag}_mix" 'select(.topic == $t and (.headers.event_type | test("^[RM][0-9]$"))) | .headers.commit_lsn' "$T/dump.jsonl" | sort -u | wc -l)" \
        "one commit_lsn for the rows and messages of one transaction"

    step "$plugin: non-transactional, other prefixes, malformed content, rollback"
    good='{"v":1,"event_id":"00000000-0000-4000-8000-00000000000a","aggregate_type":"'"${tag}"'_nt","aggregate_id":"x","event_type":"NT"}'
    psql_q "SELECT pg_logical_emit_message(false, 'outbox', '$good')" >/dev/null
    psql_q "SELECT pg_logical_emit_message(true, 'other', '$good')" >/dev/null
    psql_q <<SQL >/dev/null
BEGIN;
SELECT pg_logical_emit_message(true, 'outbox', 'not json ${tag}');
SELECT pg_logical_emit_message(true, 'outbox', '{"v":2,"event_id":"${tag}-v2"}');
SELECT public.m_json('${tag}_after', 'a', 'AfterBad', '{"ok": true}');
COMMIT;
BEGIN;
SELECT public.m_json('${tag}_rb', 'rb', 'RolledBack', '{}');
SELECT public.r_row('${tag}_rb', 'rb', 'RolledBackRow', '{}');
ROLLBACK;
SQL
    wait_caught_up 60
    check_events "$tag"
    assert_eq 0 "$(jq -r --arg p "outbox.event.${tag}_" 'select((.topic | startswith($p)) and (.topic | test("_(nt|rb)$")))' "$T/dump.jsonl" | wc -l)" \
        "non-transactional, other-prefix and rolled-back messages produced"
    assert_eq 1 "$(metric_value 'outboxd_messages_ignored_total{reason="non_transactional"}')" \
        "outboxd_messages_ignored_total{reason=\"non_transactional\"}"
    assert_eq 1 "$(grep -c 'non-transactional message with prefix "outbox"' "$T/outboxd.log")" \
        "log lines about the non-transactional message (logged once)"
    dlq=$(jq -c --arg a "not json ${tag}" --arg b '{"v":2,"event_id":"'"${tag}"'-v2"}' \
        'select(.topic == "outbox.dlq" and (.value == $a or .value == $b)) | [.value, .headers.dlq_error, .headers.dlq_reason]' \
        "$T/dump.jsonl")
    info "dead letters: $dlq"
    assert_eq 2 "$(grep -c BAD_MESSAGE <<<"$dlq")" "malformed messages dead-lettered as BAD_MESSAGE"
    grep -q 'content format version 1' <<<"$dlq" || fail "the v2 dead letter does not say which version is read: $dlq"
    [[ "$(metric_value 'outboxd_heartbeats_received_total')" -gt 0 ]] ||
        fail "no heartbeat came back while outbox messages are read"

    step "$plugin: messages written while outboxd is stopped arrive after the restart, once"
    outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM"
    psql_q <<SQL >/dev/null
BEGIN;
SELECT public.m_json('${tag}_down', 'd', 'WhileDown', jsonb_build_object('i', i)) FROM generate_series(1, 20) i;
SELECT public.r_row('${tag}_down', 'd', 'RowWhileDown', '{}');
COMMIT;
SELECT public.m_bytes('${tag}_down', 'd', 'WhileDownBytes', '\\xdeadbeef');
SQL
    outboxd_start --set outbox.message_prefix=outbox --set errors.policy=dlq \
        --set "offsets.file=$T/$plugin.offset" --set postgres.heartbeat_interval_ms=200 \
        --set outbox.timestamp=commit
    wait_caught_up 60
    check_events "$tag"
    # public.emitted's row of each event was written in its transaction.
    psql_q "SELECT event_id || ' ' || floor(extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000)::bigint
            FROM public.emitted WHERE aggregate_type = '${tag}_down'" | sort >"$T/ts.want"
    jq -r --arg t "outbox.event.${tag}_down" 'select(.topic == $t) | "\(.headers.event_id) \(.timestamp)"' \
        "$T/dump.jsonl" | sort >"$T/ts.got"
    diff "$T/ts.want" "$T/ts.got" >&2 ||
        fail "timestamp = commit: record timestamps differ from the commit times (< commit, > record)"
    info "timestamp = commit: $(wc -l <"$T/ts.got") records carry their transaction's commit time"
    outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM"

    step "$plugin: outboxd check names the message source; verify says messages have no row"
    set_args=(--set outbox.message_prefix=outbox --set "offsets.file=$T/$plugin.offset")
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "${set_args[@]}" >"$T/check.out" 2>&1 || true
    grep -E 'outbox messages' "$T/check.out" >&2 || { cat "$T/check.out" >&2; fail "check has no outbox messages line"; }
    grep -qE '^ok +outbox messages.*prefix "outbox".*outbox_emit\(\) installed' "$T/check.out" ||
        fail "check's outbox messages line is not ok"
    grep -q 'gap repair.*message_prefix.*repair cannot send them again' "$T/check.out" ||
        fail "check's gap repair line does not say messages cannot be repaired"
    if [[ $plugin == pgoutput ]]; then
        "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" "${set_args[@]}" >"$T/verify.out" 2>"$T/verify.err" ||
            { cat "$T/verify.out" "$T/verify.err" >&2; fail "verify failed with messages as events"; }
        cat "$T/verify.out" >&2
        grep -q 'events of outbox_emit() messages have no row' "$T/verify.out" ||
            fail "verify does not say that message events have no row"
        "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "${set_args[@]}" --set source.mode=polling \
            >"$T/polling.out" 2>&1 && fail "check accepted message_prefix in polling mode"
        grep -q 'message_prefix needs \[source\] mode = logical' "$T/polling.out" ||
            { cat "$T/polling.out" >&2; fail "polling mode's refusal of message_prefix is not clear"; }
    fi
    cp "$T/outboxd.log" "$T/outboxd.$plugin.log"
    : >"$T/outboxd.log"
done
# Two sections, each with its own prefix (pgoutput only: the routing is the
# plugin-independent changes.c; both plugins deliver messages above).
step "two sections with their own message_prefix: each message goes with its section"
psql_q "CREATE TABLE public.outbox_b (LIKE public.outbox_events INCLUDING ALL);
ALTER PUBLICATION outboxd_pub ADD TABLE public.outbox_b;" >/dev/null
export OUTBOXD_TEST_PLUGIN=pgoutput OUTBOXD_SLOT=emit_pgoutput
two=(--set outbox.a.table=public.outbox_events --set outbox.a.message_prefix=outbox
    --set outbox.b.table=public.outbox_b --set outbox.b.message_prefix=billing
    --set 'outbox.b.topic=billing.${aggregate_type}' --set "offsets.file=$T/pgoutput.offset")
outboxd_start "${two[@]}" --set errors.policy=dlq
psql_q <<'SQL' >/dev/null
BEGIN;
SELECT public.outbox_emit('two_a', 'k', 'A1', '{"i": 1}'::jsonb);
SELECT public.outbox_emit('two_b', 'k', 'B2', '{"i": 2}'::jsonb, prefix => 'billing');
INSERT INTO public.outbox_b (event_id, aggregate_type, aggregate_id, event_type, payload)
VALUES (gen_random_uuid(), 'two_b', 'k', 'B3', '{"i": 3}');
SELECT public.outbox_emit('two_c', 'k', 'C4', '{"i": 4}'::jsonb, prefix => 'shipping');
SELECT public.outbox_emit('two_a', 'k', 'A5', '{"i": 5}'::jsonb);
COMMIT;
SQL
wait_caught_up 60
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM"
kdump_all >"$T/dump.jsonl" 2>"$T/kdump.err" || { cat "$T/kdump.err" >&2; fail "kdump failed"; }
assert_eq "A1 A5" "$(jq -r 'select(.topic == "outbox.event.two_a") | .headers.event_type' "$T/dump.jsonl" | xargs)" \
    "events of prefix outbox on section a's topic"
assert_eq "B2 B3" "$(jq -r 'select(.topic == "billing.two_b") | .headers.event_type' "$T/dump.jsonl" | xargs)" \
    "section b's message and row on its topic template, in statement order"
assert_eq 0 "$(jq -r 'select((.topic | test("two_c$")) or (.topic == "outbox.event.two_b"))' "$T/dump.jsonl" | wc -l)" \
    "events of a prefix no section has, or on the other section's topic"
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "${two[@]}" >"$T/check.out" 2>&1 || true
grep -E 'outbox messages' "$T/check.out" >&2 || true
grep -qE '^ok +outbox messages \[outbox\.a\]: .*prefix "outbox"' "$T/check.out" &&
    grep -qE '^ok +outbox messages \[outbox\.b\]: .*prefix "billing"' "$T/check.out" ||
    { cat "$T/check.out" >&2; fail "check has no outbox messages line per section"; }
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" "${two[@]}" >"$T/verify.out" 2>"$T/verify.err" ||
    { cat "$T/verify.out" "$T/verify.err" >&2; fail "verify failed with two sections' messages"; }
grep -q '\[outbox\.b\] message_prefix = billing: events of outbox_emit() messages have no row' \
    "$T/verify.out" || { cat "$T/verify.out" >&2; fail "verify's note does not name section b"; }
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "${two[@]}" \
    --set outbox.b.message_prefix=outbox >"$T/dup.out" 2>&1 && fail "check accepted one prefix in two sections"
grep -q '\[outbox\.a\] and \[outbox\.b\] both have message_prefix = outbox' "$T/dup.out" ||
    { cat "$T/dup.out" >&2; fail "one prefix in two sections is not refused clearly"; }
e2e_pass
