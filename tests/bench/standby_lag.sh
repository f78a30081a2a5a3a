#!/usr/bin/env bash
# tests/bench/standby_lag.sh - what reading a hot standby adds to
# commit-to-ACK (issue 58): in one run, on PostgreSQL 17 (OUTBOXD_PG_VERSION)
# with a physical standby made by tests/e2e/standby_lib.sh and the mock
# broker, pgbench commits outbox events on the primary at RATE events/s for
# SECONDS, twice: once with outboxd reading a slot on the primary, once
# with it reading a slot on the standby. outboxd logs the commit-to-ACK
# latency of every event at its stop (commit time from the stream against
# the delivery report; src/base/latency.c); the two lines are printed side
# by side. Not a CI test: run it alone, under
# `flock /tmp/outboxd-heavy.lock`, on a quiet machine.
#
#   tests/bench/standby_lag.sh [RATE] [SECONDS]     (5000, 30)
: "${OUTBOXD_PG_VERSION:=17}"
export OUTBOXD_PG_VERSION
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/standby_lib.sh"
OUTBOXD_TEST_PLUGIN=pgoutput
RATE=${1:-5000}
SECS=${2:-30}
E2E_TIMEOUT=$((SECS * 2 + 240))
e2e_init standby_lag
pg_start
broker_start
standby_create standby1 "hot_standby_feedback = on"
standby_start
cat >"$T/one.sql" <<'SQL'
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
VALUES (gen_random_uuid(), 'Lag', 'k' || (random() * 999)::int, 'e', '{"n": 1}');
SQL
PRIMARY_PORT=$P1

# phase NAME PORT: outboxd on the server at PORT (a fresh slot), pgbench
# on the primary, outboxd's latency line after it caught up and stopped.
phase() {
    local name=$1 port=$2 end t0
    step "$name: outboxd reads the slot on 127.0.0.1:$port; $RATE events/s for $SECS s"
    rm -f "$T/outboxd.offset"
    PG_CONNINFO="host=127.0.0.1 port=$port user=postgres dbname=postgres"
    outboxd_start --no-wait
    t0=$SECONDS
    until [[ $(at "$port" "SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE slot_name = 'outboxd'") == t ]]; do
        ((SECONDS - t0 < 60)) || fail "$name: the slot did not stream within 60 s"
        at "$PRIMARY_PORT" "SELECT pg_log_standby_snapshot()" >/dev/null
        sleep 0.2
    done
    # Debian's pgbench 15 (the npm server builds have none) speaks to 16-18
    /usr/lib/postgresql/15/bin/pgbench -h 127.0.0.1 -p "$PRIMARY_PORT" -U postgres -n -c 4 -j 2 \
        -R "$RATE" -T "$SECS" -f "$T/one.sql" postgres >"$T/pgbench.$name.log" 2>&1 ||
        fail "$name: pgbench failed: $(tail -3 "$T/pgbench.$name.log")"
    end=$(at "$PRIMARY_PORT" "SELECT pg_current_wal_lsn()")
    caught() {
        at "$PRIMARY_PORT" "SELECT pg_log_standby_snapshot()" >/dev/null
        [[ $(at "$port" "SELECT confirmed_flush_lsn >= '$end' FROM pg_replication_slots WHERE slot_name = 'outboxd'") == t ]]
    }
    wait_until 120 "$name: the slot confirmed past the load's end $end" caught
    outboxd_stop || true
    LINE[$name]=$(outboxd_log_last_start | grep 'commit-to-ACK latency over' | tail -n 1 | sed 's/.*INFO: //')
    [[ -n "${LINE[$name]}" ]] || fail "$name: outboxd logged no latency line"
    info "$name: ${LINE[$name]}"
    at "$port" "SELECT pg_drop_replication_slot('outboxd')" >/dev/null
}
declare -A LINE
phase primary "$P1"
phase standby "$P2"
step "commit-to-ACK, the same load, one run"
printf '  reading the primary: %s\n  reading the standby: %s\n' "${LINE[primary]}" "${LINE[standby]}" >&2
e2e_pass
