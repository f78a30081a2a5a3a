#!/usr/bin/env bash
# An idle outbox: while only table 'other' is written (and while nothing at
# all is), the slot's confirmed_flush_lsn still advances (keepalive
# advance), so PostgreSQL can recycle WAL; no message is produced.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init idle
pg_start
create_other_table
broker_start
outboxd_start

step "one event"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        VALUES (gen_random_uuid(), 'Idle', 'idle-1', 1, 'Started', '{}')"
wait_caught_up 60
c0=$(slot_confirmed_lsn)

step "10s of writes to table 'other' only"
for i in $(seq 1 20); do
    psql_q "INSERT INTO public.other (note) SELECT repeat('x', 100) FROM generate_series(1, 500)"
    sleep 0.5
done
target=$(current_lsn)
info "confirmed was $c0; WAL is now at $target"
wait_for_confirmed_lsn "$target" 30 ||
    fail "confirmed_flush_lsn stuck at $(slot_confirmed_lsn) (< $target) while only unpublished tables were written"

step "a large unpublished transaction, then a fully idle period"
psql_q "INSERT INTO public.other (note) SELECT repeat('y', 200) FROM generate_series(1, 50000)"
target=$(current_lsn)
wait_for_confirmed_lsn "$target" 60 ||
    fail "confirmed_flush_lsn stuck at $(slot_confirmed_lsn) (< $target) after a large unpublished transaction"
sleep 5
wait_caught_up 30

step "the event once, nothing else"
check_delivery --exactly-once
assert_eq 1 "$(dump_count "$T/check.dump.jsonl")" "messages"
assert_sql "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) < 64 * 1024 * 1024 FROM pg_replication_slots WHERE slot_name = 'outboxd'" \
    "the slot does not hold back more than 64 MB of WAL"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
e2e_pass
