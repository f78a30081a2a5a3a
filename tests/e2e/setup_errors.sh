#!/usr/bin/env bash
# Server-side set-up mistakes end before streaming, with the exit code the
# interface promises and a message that names the problem and the fix:
#  - message.max.bytes above queue.buffering.max.kbytes * 1024: exit 2;
#  - [postgres] failover = on below PostgreSQL 17: exit 2, no slot created;
#  - an existing slot made with another plugin than configured: exit 2;
#  - the publication missing (pgoutput): exit 1;
#  - the slot missing with create_slot = false: exit 1;
#  - wal2json not allowed by output_plugin_libraries (on servers that have
#    that setting): exit 1, names the ALTER SYSTEM fix;
#  - the wal2json plugin not installed on the server: exit 1, names the
#    package (the server is pointed at a library directory without it);
#  - wal2json with a partitioned outbox table: outboxd check FAILs, the
#    daemon exits 2, the slot is not confirmed past the table's events; a
#    table replaced by a partitioned one is refused at the next connection
#    (exit 2);
#  - pgoutput with a partitioned outbox table and a publication without
#    publish_via_partition_root: check and the daemon (exit 1) name that
#    setting, not ADD TABLE; with it the table streams, and the setting
#    turned off while outboxd runs stops it (exit 1) naming the setting,
#    the slot not confirmed past the insert after the change;
# In every case the slots stay where they were. And wal2json streams a
# table whose names need quoting (schema "Sales EU", table "Outbox Events,
# v2"): 50 of 50 events delivered.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init setup_errors
pg_start
broker_start

# expect_exit CODE PATTERN [outboxd args]: runs outboxd in the foreground
# until it exits; its status must be CODE and its log must match PATTERN.
expect_exit() {
    local code=$1 pattern=$2
    shift 2
    step "expect exit $code matching /$pattern/: $*"
    outboxd_start --no-wait "$@"
    outboxd_wait_exit 30
    assert_eq "$code" "$OUTBOXD_RC" "exit status"
    tail -n 3 "$T/outboxd.log" | grep -E "$pattern" >/dev/null ||
        fail "log does not match /$pattern/: $(tail -n 3 "$T/outboxd.log")"
    info "log: $(tail -n 1 "$T/outboxd.log" | cut -c1-300)"
}

# issue 15, item 5: message.max.bytes above the queue's byte bound: an event
# between the two would pass the size check and then wait for ever
expect_exit 2 'message.max.bytes = 20000000 is larger than queue.buffering.max.kbytes = 16384' \
    --set kafka.message.max.bytes=20000000

# [postgres] failover = on needs failover slots (PostgreSQL 17): below 17
# it is exit 2 naming the server's version, before any slot is created
major=$(psql_q "SELECT current_setting('server_version_num')::int / 10000")
if ((major < 17)); then
    OUTBOXD_TEST_PLUGIN=pgoutput OUTBOXD_SLOT=failover_on \
        expect_exit 2 "failover = on, but the server is PostgreSQL $major: failover slots need PostgreSQL 17 or later" \
        --set postgres.failover=on
    assert_sql "SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name = 'failover_on'" \
        "no slot was created"
fi

psql_q "SELECT pg_create_logical_replication_slot('made_by_pgoutput', 'pgoutput')" >/dev/null
before=$(psql_q "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'made_by_pgoutput'")
OUTBOXD_TEST_PLUGIN=wal2json OUTBOXD_SLOT=made_by_pgoutput \
    expect_exit 2 'uses plugin pgoutput, but \[postgres\] plugin is wal2json'
assert_eq "$before" \
    "$(psql_q "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'made_by_pgoutput'")" \
    "the slot made by another plugin is untouched"

OUTBOXD_TEST_PLUGIN=pgoutput OUTBOXD_SLOT=not_there \
    expect_exit 1 'replication slot "not_there" does not exist and \[postgres\] create_slot is false' \
    --set postgres.create_slot=false
assert_sql "SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name = 'not_there'" \
    "no slot was created"

psql_q "DROP PUBLICATION outboxd_pub"
OUTBOXD_TEST_PLUGIN=pgoutput OUTBOXD_SLOT=nopub \
    expect_exit 1 'publication "outboxd_pub" does not exist'
psql_q "CREATE PUBLICATION outboxd_pub FOR TABLE public.outbox_events WITH (publish = 'insert')"

if [[ -n "$PG_CTL_OPTS" ]]; then
    # This server has output_plugin_libraries (superuser-settable per
    # session): a session that lists only pgoutput must get the fix named.
    OUTBOXD_TEST_PLUGIN=wal2json OUTBOXD_SLOT=w2j_not_allowed \
        expect_exit 1 "does not list wal2json: run ALTER SYSTEM SET output_plugin_libraries = pgoutput, wal2json" \
        --set "postgres.conninfo=$PG_CONNINFO options='-c output_plugin_libraries=pgoutput,test_decoding'"
    assert_sql "SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name = 'w2j_not_allowed'" \
        "no slot was created"
else
    info "this server has no output_plugin_libraries setting: nothing to check there"
fi

# ------------------------------------------------ partitioned outbox tables
# (issue 53, items 1 and 8) A table PARTITION BY RANGE with one partition:
# wal2json names and filters each change by the partition, so it is refused
# (outboxd check: FAIL; the daemon: exit 2 before START_REPLICATION,
# confirming nothing); pgoutput needs publish_via_partition_root = true,
# and a publication without it is refused naming that, not ADD TABLE.
psql_q "CREATE TABLE public.outbox_part (LIKE public.outbox_events INCLUDING DEFAULTS)
            PARTITION BY RANGE (created_at);
        CREATE TABLE public.outbox_part_all PARTITION OF public.outbox_part
            FOR VALUES FROM (MINVALUE) TO (MAXVALUE);
        CREATE PUBLICATION part_pub FOR TABLE public.outbox_part WITH (publish = 'insert')"
psql_q "SELECT pg_create_logical_replication_slot('w2j_part', 'wal2json')" >/dev/null
slot_before=$(psql_q "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'w2j_part'")
psql_q "INSERT INTO public.outbox_part (event_id, aggregate_type, aggregate_id, event_type, payload)
        SELECT gen_random_uuid(), 'Part', 'p-' || i, 'Created', '{}' FROM generate_series(1, 20) i"
after_inserts=$(current_lsn)
PART=(--set outbox.table=public.outbox_part --set "offsets.file=$T/part.offset")

# run_check RC NAME [outboxd check args]: `outboxd check` on the daemon's
# configuration file ($T/outboxd.ini of the last start: its plugin and slot,
# not its --set), which must exit RC; its output in $T/c.NAME.out.
run_check() {
    local want=$1 name=$2 rc=0
    shift 2
    step "outboxd check $* (expect exit $want)"
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "$@" >"$T/c.$name.out" 2>&1 || rc=$?
    sed 's/^/        | /' "$T/c.$name.out" >&2
    assert_eq "$want" "$rc" "check $name: exit status"
}

# expect_line NAME REGEX: a line of check run NAME matches REGEX (grep -E).
expect_line() {
    grep -E -- "$2" "$T/c.$1.out" >/dev/null || fail "check $1: no line matches /$2/"
    info "ok: $1: /$2/"
}

# expect_logged CODE PATTERN [outboxd args]: expect_exit, with PATTERN
# anywhere in what outboxd logged since its start.
expect_logged() {
    local code=$1 pattern=$2
    shift 2
    step "expect exit $code, logged /$pattern/: $*"
    outboxd_start --no-wait "$@"
    outboxd_wait_exit 30
    assert_eq "$code" "$OUTBOXD_RC" "exit status"
    outboxd_log_last_start | grep -E -- "$pattern" >/dev/null ||
        fail "log does not match /$pattern/: $(outboxd_log_last_start | tail -n 5)"
}

w2j_part_cause='public.outbox_part is a partitioned table, and wal2json names and filters each change by the partition it went to, never by outbox_part: no event would be relayed'
w2j_part_fix='set \[postgres\] plugin = pgoutput with a publication that publishes via the root \(ALTER PUBLICATION outboxd_pub SET \(publish_via_partition_root = true\)\)'
OUTBOXD_TEST_PLUGIN=wal2json OUTBOXD_SLOT=w2j_part \
    expect_logged 2 "ERROR.*$w2j_part_cause.*; $w2j_part_fix" "${PART[@]}"
run_check 1 w2j_part "${PART[@]}" --set postgres.plugin=wal2json --set postgres.slot=w2j_part
expect_line w2j_part "^FAIL outbox table public.outbox_part: $w2j_part_cause.*; $w2j_part_fix"
assert_eq "$slot_before" \
    "$(psql_q "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'w2j_part'")" \
    "wal2json's slot is not confirmed past the partitioned table's events"
assert_sql "SELECT '$slot_before'::pg_lsn < '$after_inserts'::pg_lsn" "the events are after it"
psql_q "SELECT pg_drop_replication_slot('w2j_part')" >/dev/null

step "wal2json: the outbox table replaced by a partitioned one between two connections"
psql_q "CREATE TABLE public.swap_outbox (LIKE public.outbox_events INCLUDING DEFAULTS)"
OUTBOXD_TEST_PLUGIN=wal2json OUTBOXD_SLOT=w2j_swap outboxd_start \
    --set outbox.table=public.swap_outbox --set "offsets.file=$T/swap.offset"
psql_q "BEGIN;
        ALTER TABLE public.swap_outbox RENAME TO swap_old;
        ALTER TABLE public.outbox_part RENAME TO swap_outbox;
        COMMIT;
        SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
            WHERE slot_name = 'w2j_swap'" >/dev/null
outboxd_wait_exit 60
assert_eq 2 "$OUTBOXD_RC" "exit status after the reconnect"
outboxd_log_last_start | grep -E "ERROR: public.swap_outbox is a partitioned table, and wal2json .*Not streaming; fix: set \[postgres\] plugin = pgoutput" >/dev/null ||
    fail "the reconnect did not refuse the partitioned table: $(outboxd_log_last_start | grep -E 'ERROR|WARN' | tail -n 2)"
info "ok: the reconnect refused the partitioned table"
psql_q "ALTER TABLE public.swap_outbox RENAME TO outbox_part; DROP TABLE public.swap_old;
        SELECT pg_drop_replication_slot('w2j_swap')" >/dev/null

# pgoutput, publication without publish_via_partition_root: the cause named
pgo_part_cause='public.outbox_part is a partitioned table and publication "part_pub" has publish_via_partition_root = false, so pgoutput would send each insert as its partition.s, never as outbox_part.s'
pgo_part_fix='run ALTER PUBLICATION part_pub SET \(publish_via_partition_root = true\)'
OUTBOXD_TEST_PLUGIN=pgoutput OUTBOXD_SLOT=pgo_part \
    expect_logged 1 "ERROR.*$pgo_part_cause; $pgo_part_fix" "${PART[@]}" \
    --set postgres.publication=part_pub
run_check 1 pgo_part "${PART[@]}" --set postgres.publication=part_pub
expect_line pgo_part "^FAIL publication \"part_pub\": $pgo_part_cause; $pgo_part_fix\$"
grep -q 'ADD TABLE' "$T/c.pgo_part.out" && fail "check pgo_part: names ADD TABLE"
psql_q "ALTER PUBLICATION part_pub SET (publish_via_partition_root = true)"
run_check 0 pgo_part_root "${PART[@]}" --set postgres.publication=part_pub
expect_line pgo_part_root '^ok   publication "part_pub": publishes inserts of public.outbox_part$'
step "pgoutput via the root streams; the setting turned off while it runs stops it"
OUTBOXD_TEST_PLUGIN=pgoutput OUTBOXD_SLOT=pgo_part outboxd_start "${PART[@]}" \
    --set postgres.publication=part_pub
psql_q "INSERT INTO public.outbox_part (event_id, aggregate_type, aggregate_id, event_type, payload)
        SELECT gen_random_uuid(), 'Part', 'pr-' || i, 'Created', '{}' FROM generate_series(1, 3) i"
OUTBOXD_SLOT=pgo_part wait_caught_up 60
assert_eq 3 "$(kdump_all | jq -r 'select(.key | startswith("pr-")) | .headers.event_id' | sort -u | wc -l)" \
    "events of the partitioned table in Kafka"
psql_q "ALTER PUBLICATION part_pub SET (publish_via_partition_root = false)"
psql_q "INSERT INTO public.outbox_part (event_id, aggregate_type, aggregate_id, event_type, payload)
        VALUES (gen_random_uuid(), 'Part', 'pr-late', 'Created', '{}')"
late=$(current_lsn)
outboxd_wait_exit 60
assert_eq 1 "$OUTBOXD_RC" "exit status"
outboxd_log_last_start | grep -E "ERROR: the outbox table public.outbox_part is no longer published by publication \"part_pub\" \(the table is partitioned and the publication has publish_via_partition_root = false: pgoutput sends its inserts as its partitions'\).*Fix: ALTER PUBLICATION part_pub SET \(publish_via_partition_root = true\);" >/dev/null ||
    fail "no log line names publish_via_partition_root: $(outboxd_log_last_start | grep ERROR | tail -n 2)"
assert_sql "SELECT confirmed_flush_lsn < '$late'::pg_lsn FROM pg_replication_slots WHERE slot_name = 'pgo_part'" \
    "the slot is not confirmed past the event inserted after the change"
psql_q "SELECT pg_drop_replication_slot('pgo_part')" >/dev/null
psql_q "DROP PUBLICATION part_pub"

# ------------------------------------------------ names that need quoting
# (issue 53, item 8) wal2json's add-tables escapes the names for its list
# syntax and START_REPLICATION quotes the value without E'...'.
step "wal2json: schema \"Sales EU\", table \"Outbox Events, v2\""
psql_q "CREATE SCHEMA \"Sales EU\";
        CREATE TABLE \"Sales EU\".\"Outbox Events, v2\" (LIKE public.outbox_events INCLUDING ALL)"
OUTBOXD_TEST_PLUGIN=wal2json OUTBOXD_SLOT=w2j_quoted outboxd_start \
    --set "outbox.table=Sales EU.Outbox Events, v2" --set "offsets.file=$T/quoted.offset"
psql_q "INSERT INTO \"Sales EU\".\"Outbox Events, v2\" (event_id, aggregate_type, aggregate_id, event_type, payload)
        SELECT gen_random_uuid(), 'Quoted', 'q-' || i, 'Created', '{}' FROM generate_series(1, 50) i"
OUTBOXD_SLOT=w2j_quoted wait_caught_up 60
assert_eq 50 "$(kdump_all | jq -r 'select(.key | startswith("q-")) | .headers.event_id' | sort -u | wc -l)" \
    "events of the quoted table in Kafka"
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
psql_q "SELECT pg_drop_replication_slot('w2j_quoted')" >/dev/null

step "a server whose library directory has no wal2json"
pg_libdir_without_wal2json
psql_q "ALTER SYSTEM SET dynamic_library_path = '$T/libdir'"
pg_reload
OUTBOXD_TEST_PLUGIN=wal2json OUTBOXD_SLOT=w2j_missing \
    expect_exit 1 'output plugin wal2json is not installed on the server \(Debian: apt-get install postgresql-15-wal2json\)'
assert_sql "SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name = 'w2j_missing'" \
    "no slot was left behind"
step "the same server still streams with pgoutput"
OUTBOXD_TEST_PLUGIN=pgoutput OUTBOXD_SLOT=outboxd outboxd_start
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
        VALUES (gen_random_uuid(), 'Order', 'o-1', 'Created', '{}')"
wait_caught_up 60
# the quoted table's 50 events are in Kafka too, not rows of outbox_events
kdump_all | jq -c 'select(.key | test("^(q|pr)-") | not)' >"$T/outbox_events.jsonl"
check_delivery --exactly-once --dump "$T/outbox_events.jsonl"
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
e2e_pass
