#!/usr/bin/env bash
# Schema changes of the outbox mid-stream: ADD COLUMN (with and without a
# default, also inside a transaction between two inserts), DROP COLUMN of an
# extra column; events before and after arrive with the right values.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init alter_table
pg_start
broker_start
outboxd_start

ins() { # aggregate_id version [extra columns] [extra values]
    printf "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload%s) VALUES (gen_random_uuid(), 'Shop', '%s', %s, 'E%s', '{\"v\": %s}'%s);\n" \
        "${3:+, $3}" "$1" "$2" "$2" "$2" "${4:+, $4}"
}

step "events before any change"
{ ins s-1 1; ins s-2 1; } | psql_q
wait_caught_up 60
check_delivery --exactly-once

step "ALTER TABLE ADD COLUMN (nullable), then inserts with and without it"
psql_q "ALTER TABLE public.outbox_events ADD COLUMN tenant text"
{ ins s-1 2; ins s-2 2 tenant "'acme'"; } | psql_q
wait_caught_up 60
check_delivery --exactly-once

step "ADD COLUMN with a default, placed after payload"
psql_q "ALTER TABLE public.outbox_events ADD COLUMN priority int NOT NULL DEFAULT 5"
{ ins s-1 3; ins s-2 3 priority 1; } | psql_q
wait_caught_up 60
check_delivery --exactly-once

step "ADD COLUMN inside a transaction, between inserts"
{
    echo "BEGIN;"
    ins s-1 4
    echo "ALTER TABLE public.outbox_events ADD COLUMN trace_id uuid;"
    ins s-1 5 trace_id "gen_random_uuid()"
    ins s-2 4
    echo "COMMIT;"
} | psql_q
wait_caught_up 60
check_delivery --exactly-once

step "DROP COLUMN of an extra column, then inserts"
psql_q "ALTER TABLE public.outbox_events DROP COLUMN tenant"
{ ins s-1 6; ins s-2 5 priority 9; } | psql_q
wait_caught_up 60
check_delivery --exactly-once

step "DROP and re-ADD columns in one transaction with inserts between"
{
    echo "BEGIN;"
    ins s-1 7
    echo "ALTER TABLE public.outbox_events DROP COLUMN priority;"
    ins s-1 8
    echo "ALTER TABLE public.outbox_events ADD COLUMN priority text DEFAULT 'high';"
    ins s-2 6
    echo "COMMIT;"
} | psql_q
wait_caught_up 60
check_delivery --exactly-once
assert_eq "8 6" "$(jq -r '.key' "$T/check.dump.jsonl" | sort | uniq -c | awk '{print $1}' | xargs)" "events per key (s-1, s-2)"

outboxd_assert_running
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
e2e_pass
