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
#    package (the server is pointed at a library directory without it).
# In every case the slots stay where they were.
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
check_delivery --exactly-once
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
e2e_pass
