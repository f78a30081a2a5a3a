#!/usr/bin/env bash
# Polling mode, the relay's connect (non-blocking, driven by its loop): a
# server that accepts the TCP connection but never answers (the postmaster
# stopped with SIGSTOP) fails the connect after connect_timeout (10 s) with
# libpq's wording, and the relay retries with backoff; once the server
# answers again it reconnects (LISTEN) and delivers, and says how long the
# connection was down.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/polling_lib.sh"
e2e_init polling_connect
pg_start
polling_schema
broker_start

relay_start A
wait_log A "polling public.outbox_events as A" 30
ins 1 a-1 1
wait_rows "status = 'SENT'" 1 20

step "a server that never answers: the connect times out after 10 s"
backend=$(psql_q "SELECT pid FROM pg_stat_activity WHERE application_name = 'outboxd-polling'")
[[ -n "$backend" ]] || fail "no outboxd-polling backend in pg_stat_activity"
postmaster=$(head -1 "$T/pgdata/postmaster.pid")
kill -STOP "$postmaster"
(sleep 45; kill -CONT "$postmaster") >/dev/null 2>&1 & # should a step below fail
kill -TERM $backend
started=$SECONDS
wait_log A "cannot connect to postgres: connection to server at .127.0.0.1., port [0-9]+ failed: timeout expired; retrying in [0-9]+ ms" 30
took=$((SECONDS - started))
kill -CONT "$postmaster"
((took >= 9)) || fail "the connect failed after ${took}s, before connect_timeout (10 s)"
relay_running A || fail "relay A stopped"

step "the server answers again: reconnected, delivered"
ins 2 a-2 1
wait_rows "status = 'SENT'" 2 30
[[ $(grep -c "polling public.outbox_events as A" "$T/relay.A.log") -ge 2 ]] ||
    fail "relay A did not reconnect"
# The outage in the log as an operator reads it (issue 56, outage.h): the
# lost connection is its first line (a warning with its cause); the failed
# connects within its first 30 s are debug lines; its end says its length.
grep -q ' WARN: postgres: .*; reconnecting' "$T/relay.A.log" || fail "no warning with the cause"
if grep ' WARN: .*cannot connect to postgres' "$T/relay.A.log" >&2; then
    fail "a failed connect was a warning of its own within the outage's first 30 s"
fi
grep -qE ' INFO: postgres: recovered after [0-9]+ s of failures \([0-9]+ failed attempts?\)' "$T/relay.A.log" ||
    fail "no line saying the connection is back, with the outage's length"
relay_stop A
e2e_pass
