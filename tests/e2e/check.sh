#!/usr/bin/env bash
# `outboxd check`: a healthy set-up passes every check (exit 0, every line
# "ok"), for pgoutput and for wal2json; then one thing at a time is broken
# and the FAIL line (with its fix) and exit 1 are asserted:
#  - an unknown config key (with the "did you mean" suggestion), an unknown
#    librdkafka property, message.max.bytes above the producer queue's
#    byte bound (and the same with the queue raised: ok);
#  - a wrong password (role with a password, scram-sha-256 for 127.0.0.1;
#    the password never appears in the output), a role without REPLICATION;
#  - a missing column (column.payload = nope);
#  - a publication that is missing, without the table, or publish = 'update';
#  - wal2json not allowed (servers with output_plugin_libraries) and not
#    installed (a library directory without it);
#  - an existing slot of the other plugin, an invalidated slot;
#  - the broker down (unreachable within the timeout), with at most one
#    line of librdkafka's complaints on stderr;
#  - wal_level = replica (server restarted with it).
# A topic that does not exist yet is a warning (exit 0), and so is an
# sslmode that does not authenticate a server on another machine (a warn
# line, also logged by the daemon at start). The daemon runs the same start-up checks:
# a missing column stops it at once, same message.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init check
pg_start
broker_start

SECRET=Ch3ckS3cret

# The daemon delivers a few events first: their topics then exist, the
# slot exists and the offset file holds a position.
outboxd_start
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        VALUES (gen_random_uuid(), 'Order', 'o-1', 1, 'Created', '{}'),
               (gen_random_uuid(), 'Customer', 'c-1', 1, 'Created', '{}')"
wait_caught_up 60
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
cp "$T/outboxd.ini" "$T/check.ini"

# run_check RC NAME [outboxd check args]: runs `outboxd check -c check.ini`,
# which must exit RC; stdout in $T/c.NAME.out, stderr in $T/c.NAME.err.
run_check() {
    local want=$1 name=$2 rc=0
    shift 2
    step "outboxd check $* (expect exit $want)"
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/check.ini" "$@" \
        >"$T/c.$name.out" 2>"$T/c.$name.err" || rc=$?
    sed 's/^/        | /' "$T/c.$name.out" >&2
    if [[ $rc -ne $want ]]; then
        tail -n 20 "$T/c.$name.err" >&2
        fail "check $name: exit $rc, expected $want"
    fi
    if grep -F -- "$SECRET" "$T/c.$name.out" "$T/c.$name.err" >&2; then
        fail "check $name: the password is in the output"
    fi
}

# expect_line NAME REGEX: a line of run NAME matches REGEX (grep -E).
expect_line() {
    grep -E -- "$2" "$T/c.$1.out" >/dev/null ||
        fail "check $1: no line matches /$2/"
    info "ok: $1: /$2/"
}

# one_fail NAME: run NAME has exactly one FAIL line (one thing broken).
one_fail() {
    local n
    n=$(grep -c '^FAIL ' "$T/c.$1.out" || true)
    [[ $n -eq 1 ]] || fail "check $1: $n FAIL lines, expected 1"
}

# all_ok NAME: every line of run NAME is an ok line.
all_ok() {
    local other
    other=$(grep -v '^ok   ' "$T/c.$1.out" || true)
    [[ -z "$other" ]] || fail "check $1: lines that are not ok: $other"
    [[ $(wc -l <"$T/c.$1.out") -ge 14 ]] || fail "check $1: too few lines"
    info "ok: $1: all $(wc -l <"$T/c.$1.out") lines ok"
}

# -------------------------------------------------------------- healthy

run_check 0 healthy
all_ok healthy
expect_line healthy '^ok   configuration$'
expect_line healthy '^ok   postgres connection: PostgreSQL 15'
expect_line healthy '^ok   wal_level = logical$'
expect_line healthy '^ok   free replication slot and WAL sender: '
expect_line healthy '^ok   role "postgres": superuser'
expect_line healthy '^ok   outbox table public.outbox_events: '
expect_line healthy '^ok   publication "outboxd_pub": publishes inserts of public.outbox_events'
expect_line healthy '^ok   plugin pgoutput allowed'
expect_line healthy '^ok   replication connection$'
expect_line healthy '^ok   plugin pgoutput installed'
expect_line healthy '^ok   offset file .*: [0-9A-F]+/[0-9A-F]+ on system [0-9]+/database postgres/slot outboxd \(timeline 1, plugin pgoutput\); slot confirmed [0-9A-F]+/[0-9A-F]+ \((the same|file ahead by [0-9]+ [a-zA-Z]+: normal after a crash)\)$'
expect_line healthy '^ok   slot "outboxd": exists \(plugin pgoutput\)$'
expect_line healthy '^ok   slot "outboxd" not invalidated: wal_status = reserved$'
expect_line healthy '^ok   kafka broker: 1 broker'
expect_line healthy '^ok   topics: 2 topics exist: outbox.event.(Order|Customer), outbox.event.(Order|Customer)$'
assert_sql "SELECT count(*) = 1 FROM pg_replication_slots" "the temporary slot is gone"

run_check 0 healthy_wal2json --set postgres.plugin=wal2json --set postgres.slot=w2j \
    --set "offsets.file=$T/w2j.offset"
all_ok healthy_wal2json
expect_line healthy_wal2json '^ok   publication: not used with plugin wal2json$'
expect_line healthy_wal2json '^ok   plugin wal2json installed: a temporary slot was created'
expect_line healthy_wal2json '^ok   slot "w2j": will be created at start'
expect_line healthy_wal2json '^ok   offset file .*: not there yet'
assert_sql "SELECT count(*) = 1 FROM pg_replication_slots" "no slot was left behind"

# [delivery] mode = exactly_once: the progress topic (a real broker only:
# the mock cluster answers neither DescribeConfigs nor a validate-only
# CreateTopics as a broker does).
if [[ "${E2E_KAFKA:-mock}" == real ]]; then
    step "exactly_once: the progress topic"
    run_check 0 eos_absent --set delivery.mode=exactly_once
    all_ok eos_absent
    expect_line eos_absent '^ok   progress topic: outboxd.progress does not exist yet and will be created; '
    kcat -L -b "$KAFKA_BOOTSTRAP" -t outboxd.progress 2>/dev/null | grep 'partition 0' >/dev/null &&
        fail "check created outboxd.progress (validate_only must create nothing)"
    # A topic auto-created by a first message has the broker's default
    # cleanup.policy, delete: refused.
    echo x | kcat -P -b "$KAFKA_BOOTSTRAP" -t plain.progress 2>/dev/null ||
        fail "kcat could not write plain.progress"
    run_check 1 eos_plain --set delivery.mode=exactly_once --set delivery.progress_topic=plain.progress
    one_fail eos_plain
    expect_line eos_plain '^FAIL progress topic: plain.progress has cleanup.policy=delete: retention would delete the newest committed position of an idle relay; set cleanup.policy=compact on it'
    run_check 0 eos_alo
    grep -q 'progress topic' "$T/c.eos_alo.out" && fail "at_least_once printed a progress topic line"
    info "ok: no progress topic line in at_least_once"
fi

step "a topic that does not exist yet: a warning"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
        VALUES (gen_random_uuid(), 'Fresh', 'f-1', 'Created', '{}')"
run_check 0 new_topic
expect_line new_topic '^warn topics: 1 of 3 topics does not exist yet: outbox.event.Fresh; they will be auto-created if the broker allows it'
psql_q "DELETE FROM public.outbox_events WHERE aggregate_type = 'Fresh'"

# -------------------------------------------------------------- configuration

run_check 2 typo --set postgres.slto=x
expect_line typo '^FAIL configuration: unknown key "slto" in section \[postgres\]; did you mean "slot"\?$'
expect_line typo '^skip postgres connection: the configuration could not be loaded$'
grep -q '^ok' "$T/c.typo.out" && fail "check typo: an ok line after a failed configuration"

printf '[outbox]\ncolumn.paylod = payload\n' >>"$T/check.ini"
run_check 2 typo_file
expect_line typo_file "^FAIL configuration: $T/check.ini:[0-9]+: unknown key \"column.paylod\" in section \[outbox\]; did you mean \"column.payload\"\?$"
cp "$T/outboxd.ini" "$T/check.ini"

run_check 2 kafka_property --set kafka.bootstrap.server=x
one_fail kafka_property
expect_line kafka_property '^FAIL configuration: \[kafka\] bootstrap.server: No such configuration property: "bootstrap.server"; correct or remove it'
expect_line kafka_property '^ok   postgres connection'
expect_line kafka_property '^skip kafka broker: the \[kafka\] configuration is not valid$'
expect_line kafka_property '^skip topics: the \[kafka\] configuration is not valid$'

# issue 15, item 5: an event between the two bounds would never leave
run_check 2 message_above_queue --set kafka.message.max.bytes=33554432
expect_line message_above_queue '^FAIL configuration: \[kafka\] message.max.bytes = 33554432 is larger than queue.buffering.max.kbytes = 16384 \(16777216 bytes\)'
run_check 0 message_within_queue --set kafka.message.max.bytes=33554432 --set kafka.queue.buffering.max.kbytes=32768
expect_line message_within_queue '^ok   configuration$'

# -------------------------------------------------------------- the role

step "role outboxd (sql/role.sql) with a password, scram-sha-256 for it on 127.0.0.1"
pg_role_outboxd "$SECRET"
[[ -z "$PG_CTL_OPTS" ]] || psql_q "GRANT pg_read_all_settings TO outboxd"
AS_ROLE="host=127.0.0.1 port=$PGPORT user=outboxd dbname=postgres"

run_check 1 wrong_password --set "postgres.conninfo=$AS_ROLE password=${SECRET}x"
one_fail wrong_password
expect_line wrong_password '^FAIL postgres connection: .*password authentication failed for user "outboxd"; correct the password'
expect_line wrong_password '^skip wal_level = logical: no connection to postgres$'
expect_line wrong_password '^ok   kafka broker'

run_check 1 wrong_password_uri --set "postgres.conninfo=postgres://outboxd:${SECRET}x@127.0.0.1:$PGPORT/postgres"
expect_line wrong_password_uri '^FAIL postgres connection: .*password authentication failed'

run_check 2 bad_uri --set "postgres.conninfo=postgres://outboxd:${SECRET}%zz@127.0.0.1:$PGPORT/postgres"
# caught when the configuration is validated, before any connection
expect_line bad_uri '^FAIL configuration: \[postgres\] conninfo cannot be parsed \(not shown: it may hold a password\)'

run_check 0 as_role --set "postgres.conninfo=$AS_ROLE password=$SECRET"
all_ok as_role
expect_line as_role '^ok   role "outboxd": REPLICATION, SELECT on public.outbox_events$'

psql_q "ALTER ROLE outboxd NOREPLICATION"
run_check 1 no_replication --set "postgres.conninfo=$AS_ROLE password=$SECRET"
one_fail no_replication
expect_line no_replication '^FAIL role "outboxd": the role has neither REPLICATION nor SUPERUSER, which a replication connection needs; run ALTER ROLE outboxd REPLICATION'
expect_line no_replication '^skip replication connection: the role lacks REPLICATION$'
psql_q "ALTER ROLE outboxd REPLICATION"

psql_q "REVOKE SELECT ON public.outbox_events FROM outboxd"
run_check 1 no_select --set "postgres.conninfo=$AS_ROLE password=$SECRET"
one_fail no_select
expect_line no_select '^FAIL role "outboxd": the role may not SELECT from public.outbox_events; run GRANT USAGE ON SCHEMA public TO outboxd; GRANT SELECT ON public.outbox_events TO outboxd'
expect_line no_select '^skip topics: the role may not SELECT'
psql_q "GRANT SELECT ON public.outbox_events TO outboxd"

# heartbeats need EXECUTE on pg_logical_emit_message (role.sql grants it)
run_check 0 heartbeat --set "postgres.conninfo=$AS_ROLE password=$SECRET" --set postgres.heartbeat_interval_ms=10000
expect_line heartbeat '^ok   role "outboxd": REPLICATION, SELECT on public.outbox_events, EXECUTE on pg_logical_emit_message \(heartbeat\)$'
psql_q "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_logical_emit_message(boolean, text, text) FROM outboxd, PUBLIC"
run_check 1 no_heartbeat_grant --set "postgres.conninfo=$AS_ROLE password=$SECRET" --set postgres.heartbeat_interval_ms=10000
one_fail no_heartbeat_grant
expect_line no_heartbeat_grant '^FAIL role "outboxd": \[postgres\] heartbeat_interval_ms is set, but the role may not EXECUTE pg_logical_emit_message; run GRANT EXECUTE ON FUNCTION pg_catalog.pg_logical_emit_message\(boolean, text, text\) TO outboxd'
run_check 0 no_heartbeat_no_grant_needed --set "postgres.conninfo=$AS_ROLE password=$SECRET"
psql_q "GRANT EXECUTE ON FUNCTION pg_catalog.pg_logical_emit_message(boolean, text, text) TO PUBLIC"

# -------------------------------------------------------------- the table

run_check 1 no_column --set outbox.column.payload=nope
one_fail no_column
expect_line no_column '^FAIL outbox table public.outbox_events: column "nope" \(\[outbox\] column.payload\) is missing; add the column, or set \[outbox\] column.payload'
expect_line no_column '^skip topics: the outbox table is missing or incomplete$'

run_check 1 no_table --set outbox.table=public.nothere
one_fail no_table
expect_line no_table '^FAIL outbox table public.nothere: the table does not exist in database "postgres"; create it'

run_check 1 template_column --set 'outbox.topic=outbox.${tenant}'
one_fail template_column
expect_line template_column '^FAIL outbox table public.outbox_events: \[outbox\] topic "outbox.\$\{tenant\}" uses \$\{tenant\}, which is not a column of the table'

run_check 1 bad_type --set outbox.column.payload=created_at
one_fail bad_type
expect_line bad_type '^FAIL outbox table public.outbox_events: column "created_at" \(payload\) is timestamp with time zone, not json, jsonb, text or bytea'

step "the daemon runs the same check at start"
expect_daemon_exit() {
    local want=$1 pattern=$2
    shift 2
    outboxd_start --no-wait "$@"
    outboxd_wait_exit 30
    assert_eq "$want" "$OUTBOXD_RC" "outboxd exit status"
    tail -n 3 "$T/outboxd.log" | grep -E -- "$pattern" >/dev/null ||
        fail "outboxd's log does not match /$pattern/: $(tail -n 3 "$T/outboxd.log")"
    info "log: $(tail -n 2 "$T/outboxd.log" | head -n 1 | cut -c1-300)"
}
expect_daemon_exit 1 'ERROR: outbox table public.outbox_events: column "nope" \(\[outbox\] column.payload\) is missing' \
    --set outbox.column.payload=nope

# -------------------------------------------------------------- sslmode

# issue 53, item 8: without sslmode libpq uses prefer, which never checks
# the server's certificate (and falls back to plain text): a warning when
# the server is on another machine (here a name, db.example, whose
# hostaddr is the loopback: only the name counts), a note on the ok line
# when it is on this host; the daemon logs the warning at start.
expect_line healthy '^ok   postgres connection: PostgreSQL .*, sslmode prefer \(the server is on this host\)$'
remote_conninfo="${PG_CONNINFO/host=127.0.0.1/host=db.example hostaddr=127.0.0.1}"
tls_fix='set sslmode=verify-full and sslrootcert=FILE \(the CA that signed the server.s certificate\) in \[postgres\] conninfo; verify-ca if the certificate does not name the host$'
# (with a missing column: the topic checks, 5 s of a full run, are skipped)
run_check 1 tls_remote --set "postgres.conninfo=$remote_conninfo" --set outbox.column.payload=nope
expect_line tls_remote "^warn postgres connection: sslmode is prefer \(libpq's default\), which does not authenticate the server db.example:$PGPORT: a machine in the network path can pose as it \(this connection is not encrypted\); $tls_fix"
PGSSLMODE=disable run_check 1 tls_env --set "postgres.conninfo=$remote_conninfo" --set outbox.column.payload=nope
expect_line tls_env "^warn postgres connection: sslmode is disable, which does not authenticate the server db.example:$PGPORT: "
grep -q '^warn' "$T/c.healthy.out" && fail "check healthy: a warning on a loopback connection"
expect_daemon_exit 1 'ERROR: outbox table public.outbox_events: column "nope"' \
    --set outbox.column.payload=nope --set "postgres.conninfo=$remote_conninfo"
outboxd_log_last_start | grep -E "WARN: postgres connection: sslmode is prefer \(libpq's default\), which does not authenticate the server db.example:$PGPORT" >/dev/null ||
    fail "the daemon did not log the sslmode warning at start"
info "ok: the daemon logged the sslmode warning"

# -------------------------------------------------------------- publication

run_check 1 no_publication --set postgres.publication=nothere
one_fail no_publication
expect_line no_publication '^FAIL publication "nothere": publication "nothere" does not exist in this database; create it with CREATE PUBLICATION nothere FOR TABLE public.outbox_events'

psql_q "CREATE PUBLICATION empty_pub"
run_check 1 pub_without_table --set postgres.publication=empty_pub
one_fail pub_without_table
expect_line pub_without_table '^FAIL publication "empty_pub": publication "empty_pub" does not include public.outbox_events; run ALTER PUBLICATION empty_pub ADD TABLE public.outbox_events$'

psql_q "CREATE PUBLICATION update_pub FOR TABLE public.outbox_events WITH (publish = 'update')"
run_check 1 pub_update --set postgres.publication=update_pub
one_fail pub_update
expect_line pub_update "^FAIL publication \"update_pub\": publication \"update_pub\" does not publish inserts \(publish = 'update'\); run ALTER PUBLICATION update_pub SET \(publish = 'insert'\)$"

psql_q "CREATE PUBLICATION cols_pub FOR TABLE public.outbox_events (event_id, aggregate_type, aggregate_id, event_type)"
run_check 1 pub_columns --set postgres.publication=cols_pub
expect_line pub_columns '^FAIL publication "cols_pub": publication "cols_pub" has a column list on public.outbox_events without "payload"; run ALTER PUBLICATION cols_pub SET TABLE public.outbox_events \(without a column list\)$'
expect_line pub_columns '^warn publication "cols_pub": publication "cols_pub" has a column list on public.outbox_events without "aggregate_version"; no event gets an aggregate_version header'

# -------------------------------------------------------------- plugin

if [[ -n "$PG_CTL_OPTS" ]]; then
    run_check 1 w2j_not_allowed --set postgres.plugin=wal2json --set postgres.slot=w2j \
        --set "offsets.file=$T/w2j.offset" \
        --set "postgres.conninfo=$PG_CONNINFO options='-c output_plugin_libraries=pgoutput'"
    one_fail w2j_not_allowed
    expect_line w2j_not_allowed '^FAIL plugin wal2json allowed: the server.s output_plugin_libraries \("pgoutput"\) does not list wal2json; run ALTER SYSTEM SET output_plugin_libraries = pgoutput, wal2json'
    expect_line w2j_not_allowed '^skip plugin wal2json installed: the plugin is not allowed$'
else
    info "this server has no output_plugin_libraries setting: nothing to check there"
fi

step "a server whose library directory has no wal2json"
pg_libdir_without_wal2json
psql_q "ALTER SYSTEM SET dynamic_library_path = '$T/libdir'"
pg_reload
run_check 1 w2j_missing --set postgres.plugin=wal2json --set postgres.slot=w2j \
    --set "offsets.file=$T/w2j.offset"
one_fail w2j_missing
expect_line w2j_missing '^FAIL plugin wal2json installed: the output plugin wal2json is not installed on the server \(.*could not access file "wal2json".*\); install it on the database server \(Debian: apt-get install postgresql-15-wal2json\)$'
assert_sql "SELECT count(*) = 1 FROM pg_replication_slots" "no slot was left behind"
psql_q "ALTER SYSTEM RESET dynamic_library_path"
pg_reload

# -------------------------------------------------------------- slot

run_check 1 other_plugin --set postgres.plugin=wal2json
one_fail other_plugin
expect_line other_plugin '^FAIL slot "outboxd": replication slot "outboxd" uses plugin pgoutput, but \[postgres\] plugin is wal2json; set plugin = pgoutput or use another slot$'

run_check 1 no_slot_no_create --set postgres.slot=other --set postgres.create_slot=false \
    --set "offsets.file=$T/other.offset"
one_fail no_slot_no_create
expect_line no_slot_no_create "^FAIL slot \"other\": the slot does not exist and \[postgres\] create_slot is false; create it with SELECT pg_create_logical_replication_slot\('other', 'pgoutput'\)"

run_check 1 dropped_slot --set postgres.slot=other
one_fail dropped_slot
expect_line dropped_slot '^FAIL slot "other": replication slot "other" does not exist on this server \(system [0-9]+, database postgres\), but the offset file .* says outboxd streamed up to [0-9A-F]+/[0-9A-F]+ on system [0-9]+/database postgres/slot outboxd .*A failover .* or a mistyped \[postgres\] slot'

# (the broker before the slot is invalidated: one FAIL at a time)
broker_cmd "down 1"
run_check 1 broker_down
one_fail broker_down
expect_line broker_down '^FAIL kafka broker: no metadata from 127.0.0.1:[0-9]+ within 10000 ms: .*; check \[kafka\] bootstrap.servers'
expect_line broker_down '^skip topics: the broker did not answer$'
# stdout is the report only; librdkafka's complaints about the broker are
# one cause, so at most one line on stderr (before issue 56: 196 lines of
# _ALL_BROKERS_DOWN, _TRANSPORT and FAIL within the 10 s).
noise=$(grep -vcE '^(ok  |warn|FAIL|skip) ' "$T/c.broker_down.out" || true)
assert_eq 0 "$noise" "check broker_down: lines on stdout that are not the report's"
errs=$(wc -l <"$T/c.broker_down.err")
sed 's/^/        ! /' "$T/c.broker_down.err" >&2
((errs <= 1)) || fail "check broker_down: $errs lines on stderr for one unreachable broker (at most 1)"
info "ok: broker_down: $errs line(s) on stderr"
broker_cmd "up 1"

step "an invalidated slot (max_slot_wal_keep_size exceeded)"
psql_q "SELECT pg_create_logical_replication_slot('lost_slot', 'pgoutput')" >/dev/null
psql_q "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'"
pg_reload
create_other_table
for i in 1 2 3 4; do
    psql_q "INSERT INTO public.other (note) SELECT repeat('x', 1000) FROM generate_series(1, 2000)"
    psql_q "SELECT pg_switch_wal()" >/dev/null
done
psql_q "CHECKPOINT"
assert_sql "SELECT wal_status = 'lost' FROM pg_replication_slots WHERE slot_name = 'lost_slot'" \
    "slot lost_slot is invalidated"
run_check 1 lost_slot --set postgres.slot=lost_slot --set "offsets.file=$T/lost.offset"
expect_line lost_slot "^FAIL slot \"lost_slot\" not invalidated: the slot is invalidated \(wal_status = lost, reason unknown\): the server removed WAL it still needed \(before PostgreSQL 17 the server does not say why.*; stop outboxd and run outboxd repair -c .*: it re-publishes the rows committed since the last ACKed transaction and creates slot \"lost_slot\" again \(README \"Gap repair\"\); so that it does not happen again: raise max_slot_wal_keep_size"
psql_q "SELECT pg_drop_replication_slot('lost_slot')" >/dev/null
psql_q "ALTER SYSTEM RESET max_slot_wal_keep_size"
pg_reload

# -------------------------------------------------------------- wal_level

step "wal_level = replica (the logical slots must go first)"
psql_q "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots" >/dev/null
psql_q "ALTER SYSTEM SET wal_level = replica"
pg_restart
assert_sql "SELECT current_setting('wal_level') = 'replica'" "wal_level is replica"
rm -f "$T/outboxd.offset"
run_check 1 wal_level
one_fail wal_level
expect_line wal_level '^FAIL wal_level = logical: wal_level is "replica"; set wal_level = logical in postgresql.conf \(or ALTER SYSTEM SET wal_level = logical\) and restart the server$'
expect_line wal_level '^skip plugin pgoutput installed: wal_level is not logical$'
expect_daemon_exit 1 'ERROR: wal_level = logical: wal_level is "replica"'

e2e_pass
