#!/usr/bin/env bash
# outboxd as the least-privileged role sql/role.sql makes (issue 58 item 4):
# LOGIN REPLICATION, SELECT on the outbox, pg_read_all_settings, no
# superuser, no ownership of anything; the publication made beforehand by
# the table's owner, as on a managed server. On each PostgreSQL version the
# suite runs (e2e.least_privilege on Debian's 15, pg16/17/18.least_privilege),
# with the mock broker:
#  1. outboxd check as the role, heartbeats on: every line ok, the role
#     line naming REPLICATION, SELECT and EXECUTE on pg_logical_emit_message
#     (whose signature gained an argument in 17: sql/role.sql and check
#     named the old one, and failed there, until issue 58);
#  2. the daemon as the role creates its slot (a failover slot on 17+),
#     streams, survives a graceful restart and a kill -9 with writers
#     between them; every committed event in Kafka, per-key order against
#     the real commit order (check_delivery with a judge slot); nothing in
#     the server's log says "permission denied";
#  3. Amazon RDS's way, imitated: a role without REPLICATION but a member
#     of a role named rds_replication: check's role line counts it as
#     replication (the server here does not, so only that line is judged).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
OUTBOXD_TEST_PLUGIN=pgoutput
e2e_init least_privilege
pg_start
judge_slot
broker_start
SECRET=lp-$RANDOM$RANDOM
pg_role_outboxd "$SECRET"
assert_sql "SELECT NOT rolsuper AND rolreplication FROM pg_roles WHERE rolname = 'outboxd'" \
    "role outboxd: REPLICATION, not superuser"
assert_sql "SELECT count(*) = 0 FROM pg_class WHERE relowner = 'outboxd'::regrole" \
    "role outboxd owns nothing"
PG_CONNINFO="host=127.0.0.1 port=$PGPORT user=outboxd dbname=postgres password=$SECRET"
major=$(($(psql_q "SHOW server_version_num") / 10000))

# insert_events PREFIX N: N events over 4 aggregates, one transaction each.
insert_events() {
    local i
    for ((i = 1; i <= $2; i++)); do
        echo "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload) VALUES (gen_random_uuid(), 'lp', '$1-$((i % 4))', $i, 'e', '{\"n\": $i}');"
    done | psql_q >/dev/null
}

step "1. outboxd check as role outboxd (PostgreSQL $major)"
outboxd_start --set postgres.heartbeat_interval_ms=1000 # outboxd.ini: the role's conninfo
insert_events a 40
wait_caught_up 30
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" --set postgres.heartbeat_interval_ms=1000 \
    >"$T/check.out" 2>"$T/check.err" || rc=$?
cat "$T/check.out" >&2
assert_eq 0 "$rc" "check's exit status as the role"
grep -E '^ok   role "outboxd": REPLICATION, SELECT on public.outbox_events, EXECUTE on pg_logical_emit_message \(heartbeat\)$' \
    "$T/check.out" >/dev/null || fail "check did not report the role's REPLICATION, SELECT and EXECUTE"
wait_metric_ge outboxd_heartbeats_received_total 1 30
grep -E '^FAIL' "$T/check.out" && fail "check FAILed as the least-privileged role"
assert_sql "SELECT usename = 'outboxd' FROM pg_stat_replication WHERE application_name = 'outboxd'" \
    "the walsender runs as role outboxd"
if ((major >= 17)); then
    assert_sql "SELECT failover FROM pg_replication_slots WHERE slot_name = 'outboxd'" \
        "the slot the role created is a failover slot"
fi

step "2. a graceful restart and a kill -9, writers between"
insert_events b 40
outboxd_stop || true
assert_eq 0 "$OUTBOXD_RC" "exit status of the graceful stop"
insert_events c 40
outboxd_start
insert_events d 40
kill -KILL "$OUTBOXD_PID"
wait "$OUTBOXD_PID" 2>/dev/null || true
OUTBOXD_PID=
_slot_wait_released
insert_events e 40
outboxd_start
wait_caught_up 60
outboxd_stop || true
check_delivery
if grep -i 'permission denied' "$T/postgres.log"; then
    fail "the server logged permission denied for the role"
fi

step "3. a member of rds_replication (RDS and Aurora give replication that way)"
psql_q "CREATE ROLE rds_replication NOLOGIN; CREATE ROLE rdsuser LOGIN PASSWORD '$SECRET' IN ROLE rds_replication; GRANT USAGE ON SCHEMA public TO rdsuser; GRANT SELECT ON public.outbox_events TO rdsuser" >/dev/null
sed "s/^conninfo = .*/conninfo = host=127.0.0.1 port=$PGPORT user=rdsuser dbname=postgres password=$SECRET/" \
    "$T/outboxd.ini" >"$T/rds.ini"
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/rds.ini" >"$T/rds.out" 2>"$T/rds.err" || true
grep -E '^ok   role "rdsuser": REPLICATION \(member of rds_replication\), SELECT on public.outbox_events' \
    "$T/rds.out" >/dev/null || { cat "$T/rds.out" >&2; fail "check did not count rds_replication membership"; }
e2e_pass
