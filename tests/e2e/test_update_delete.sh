#!/usr/bin/env bash
# UPDATE, DELETE and TRUNCATE of outbox rows produce nothing; a row
# inserted and then deleted or updated in the same transaction is still
# delivered, with the values it was inserted with. The expectation is the
# trigger-maintained table 'expected', since the outbox no longer holds the
# rows. Done twice: with the publication publishing inserts only (the
# schema's setting) and publishing everything (so outboxd itself must
# ignore the other operations).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init update_delete
pg_start
judge_slot
install_expected
broker_start
outboxd_start

cols="event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload"

round() { # PREFIX (1 hex digit)
    local p=$1
    step "[$p] inserts"
    psql_q <<SQL
INSERT INTO public.outbox_events ($cols) VALUES
  ('00000000-0000-4000-8000-0000000${p}0001', 'Acct', 'acct-$p', 1, 'Opened', '{"balance": 0}'),
  ('00000000-0000-4000-8000-0000000${p}0002', 'Acct', 'acct-$p', 2, 'Deposited', '{"amount": 10}'),
  ('00000000-0000-4000-8000-0000000${p}0003', 'Acct', 'acct-$p', 3, 'Deposited', '{"amount": 20}');
SQL
    wait_caught_up 60
    check_delivery --expected --exactly-once
    local before
    before=$(dump_count "$T/check.dump.jsonl")

    step "[$p] UPDATE and DELETE of delivered rows produce nothing"
    psql_q <<SQL
UPDATE public.outbox_events SET payload = '{"tampered": true}', aggregate_version = 99 WHERE event_id = '00000000-0000-4000-8000-0000000${p}0001';
UPDATE public.outbox_events SET event_type = 'Changed' WHERE aggregate_id = 'acct-$p';
DELETE FROM public.outbox_events WHERE event_id = '00000000-0000-4000-8000-0000000${p}0002';
SQL
    wait_caught_up 60
    check_delivery --expected --exactly-once
    assert_eq "$before" "$(dump_count "$T/check.dump.jsonl")" "messages after UPDATE/DELETE"

    step "[$p] INSERT then DELETE, INSERT then UPDATE, in one transaction"
    psql_q <<SQL
BEGIN;
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000${p}0004', 'Acct', 'acct-$p', 4, 'Withdrawn', '{"amount": 5}');
DELETE FROM public.outbox_events WHERE event_id = '00000000-0000-4000-8000-0000000${p}0004';
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000${p}0005', 'Acct', 'acct-$p', 5, 'Deposited', '{"amount": 7}');
UPDATE public.outbox_events SET payload = '{"amount": 700}', aggregate_version = 500 WHERE event_id = '00000000-0000-4000-8000-0000000${p}0005';
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000${p}0006', 'Acct', 'acct-$p', 6, 'Closed', NULL);
COMMIT;
DELETE FROM public.outbox_events WHERE event_id = '00000000-0000-4000-8000-0000000${p}0006';
SQL
    wait_caught_up 60
    check_delivery --expected --exactly-once
    assert_eq '{"amount": 7}' "$(jq -r 'select(.headers.event_id == "00000000-0000-4000-8000-0000000'"$p"'0005") | .value' "$T/check.dump.jsonl")" \
        "value of a row updated after insert in the same transaction"
    assert_eq 0 "$(psql_q "SELECT count(*) FROM public.outbox_events WHERE aggregate_id = 'acct-$p' AND event_id::text LIKE '%0004'")" \
        "the inserted-then-deleted row is gone from the table"
}

round 1

step "publication now publishes update, delete and truncate as well"
psql_q "ALTER PUBLICATION outboxd_pub SET (publish = 'insert, update, delete, truncate')"
round 2

step "[2] TRUNCATE of the outbox produces nothing"
psql_q "TRUNCATE public.outbox_events"
psql_q "INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-000000030001', 'Acct', 'acct-3', 1, 'AfterTruncate', '{}')"
wait_caught_up 60
check_delivery --expected --exactly-once
outboxd_assert_running

outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
e2e_pass
