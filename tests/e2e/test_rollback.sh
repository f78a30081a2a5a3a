#!/usr/bin/env bash
# Rolled-back work produces nothing: ROLLBACK, ROLLBACK TO SAVEPOINT, a
# transaction aborted by an error, a large rolled-back transaction. Inserts
# into a table outside the publication are ignored, alone or mixed with
# outbox inserts in one transaction.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init rollback
pg_start
judge_slot
create_other_table
install_expected
broker_start
outboxd_start

cols="event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload"
gone=() # event ids that must never arrive

step "ROLLBACK"
gone+=(00000000-0000-4000-8000-0000000000a1 00000000-0000-4000-8000-0000000000a2)
psql_q <<SQL
BEGIN;
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000a1', 'Item', 'item-1', 1, 'RolledBack', '{}');
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000a2', 'Item', 'item-2', 1, 'RolledBack', '{}');
ROLLBACK;
SQL

step "ROLLBACK TO SAVEPOINT inside a committed transaction"
gone+=(00000000-0000-4000-8000-0000000000b2 00000000-0000-4000-8000-0000000000b3 00000000-0000-4000-8000-0000000000b5)
psql_q <<SQL
BEGIN;
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000b1', 'Item', 'item-1', 1, 'Kept', '{"n": 1}');
SAVEPOINT sp1;
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000b2', 'Item', 'item-1', 2, 'Undone', '{"n": 2}');
SAVEPOINT sp2;
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000b3', 'Item', 'item-1', 3, 'Undone', '{"n": 3}');
ROLLBACK TO SAVEPOINT sp1;
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000b4', 'Item', 'item-1', 2, 'Kept', '{"n": 4}');
SAVEPOINT sp3;
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000b5', 'Item', 'item-1', 3, 'Undone', '{"n": 5}');
ROLLBACK TO sp3;
SAVEPOINT sp4;
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000b6', 'Item', 'item-1', 3, 'KeptReleased', '{"n": 6}');
RELEASE SAVEPOINT sp4;
COMMIT;
SQL

step "a transaction aborted by an error (duplicate key)"
gone+=(00000000-0000-4000-8000-0000000000c1)
psql -XAtq -v ON_ERROR_STOP=0 >/dev/null 2>"$T/aborted.err" <<SQL || true
BEGIN;
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000c1', 'Item', 'item-3', 1, 'Aborted', '{}');
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000b1', 'Item', 'item-3', 2, 'Duplicate', '{}');
COMMIT;
SQL
grep -q 'duplicate key' "$T/aborted.err" || fail "expected a duplicate key error: $(cat "$T/aborted.err")"

step "a large rolled-back transaction (spills to disk in the decoder)"
psql_q <<SQL
BEGIN;
INSERT INTO public.outbox_events ($cols)
SELECT ('00000000-0000-4000-9000-' || lpad(to_hex(i), 12, '0'))::uuid, 'Item', 'bulk-' || (i % 10), i, 'RolledBackBulk', jsonb_build_object('i', i, 'pad', repeat('x', 200))
FROM generate_series(1, 20000) AS i;
ROLLBACK;
SQL

step "inserts into table 'other' (not published), alone and mixed"
psql_q "INSERT INTO public.other (note) SELECT 'alone ' || i FROM generate_series(1, 100) AS i"
psql_q <<SQL
BEGIN;
INSERT INTO public.other (note) VALUES ('before');
INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000d1', 'Item', 'item-4', 1, 'WithOther', '{"mixed": true}');
INSERT INTO public.other (note) VALUES ('after');
UPDATE public.other SET note = note || '!';
DELETE FROM public.other WHERE note LIKE 'alone 1%';
COMMIT;
SQL

step "a committed insert after all that"
psql_q "INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000e1', 'Item', 'item-1', 4, 'Last', '{}')"
wait_caught_up 90
check_delivery --exactly-once
check_delivery --expected --exactly-once

d=$T/check.dump.jsonl
assert_eq "b1 b4 b6 d1 e1" "$(jq -r '.headers.event_id[-2:]' "$d" | sort | xargs)" "the event ids that arrived (by suffix)"
for id in "${gone[@]}"; do
    if grep -q "$id" "$d"; then fail "rolled-back event $id arrived"; fi
done
if jq -e 'select(.headers.event_type == "RolledBackBulk")' "$d" >/dev/null; then fail "events of the rolled-back bulk transaction arrived"; fi
assert_eq "outbox.event.Item" "$(jq -r .topic "$d" | sort -u | xargs)" "topics (nothing for table other)"
assert_eq "Kept Kept KeptReleased Last" "$(jq -r 'select(.key == "item-1") | .headers.event_type' "$d" | xargs)" "item-1's events in order"

outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
e2e_pass
