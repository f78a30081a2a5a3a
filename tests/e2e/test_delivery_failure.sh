#!/usr/bin/env bash
# A delivery that fails for good stops outboxd with exit 1 and the slot is
# not confirmed past the failed event; after the cause is fixed, a restart
# re-delivers from the stored position and nothing is lost.
#  1. a message larger than message.max.bytes (refused by the producer);
#  2. messages that time out while the broker is down (message.timeout.ms).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init delivery_failure
pg_start
broker_start

cols="event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload"

step "1. a message larger than message.max.bytes"
outboxd_start --set kafka.message.max.bytes=2000
psql_q "INSERT INTO public.outbox_events ($cols) SELECT gen_random_uuid(), 'Doc', 'd-' || i, 1, 'Small', '{}' FROM generate_series(1, 5) AS i"
wait_caught_up 60
before=$(current_lsn)
psql_q "INSERT INTO public.outbox_events ($cols) VALUES ('00000000-0000-4000-8000-0000000000b1', 'Doc', 'd-big', 1, 'Big',
        jsonb_build_object('blob', repeat('x', 5000)))"
outboxd_wait_exit
assert_eq 1 "$OUTBOXD_RC" "exit status after a permanent produce error"
grep -q "event 00000000-0000-4000-8000-0000000000b1 (commit_lsn .*) cannot be published: MSG_SIZE_TOO_LARGE: produce to outbox.event.Doc: .*too large" "$T/outboxd.log" ||
    fail "the log does not name the event and the reason: $(grep ERROR "$T/outboxd.log" | tail -2)"
confirmed=$(slot_confirmed_lsn)
lsn_ge "$before" "$confirmed" || fail "slot confirmed $confirmed, past the failed event (written after $before)"
lsn_ge "$(offset_file_lsn)" "$before" && ! lsn_ge "$before" "$(offset_file_lsn)" &&
    fail "offset file $(offset_file_lsn) is past the failed event"
info "slot stays at $confirmed (failed event written after $before)"

step "restart with the limit lifted: the big event arrives"
outboxd_start
wait_caught_up 60
check_delivery
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"

step "2. deliveries time out while the broker is down"
outboxd_start --set kafka.message.timeout.ms=3000
psql_q "INSERT INTO public.outbox_events ($cols) VALUES (gen_random_uuid(), 'Doc', 'd-1', 2, 'BeforeOutage', '{}')"
wait_caught_up 60
before=$(current_lsn)
broker_cmd "down 1"
psql_q "INSERT INTO public.outbox_events ($cols) SELECT gen_random_uuid(), 'Doc', 'd-' || i, 3, 'DuringOutage', '{}' FROM generate_series(1, 10) AS i"
outboxd_wait_exit
assert_eq 1 "$OUTBOXD_RC" "exit status after deliveries timed out"
grep -q "failed: _MSG_TIMED_OUT: Local: Message timed out; stopping without confirming past it" "$T/outboxd.log" ||
    fail "the log does not say the delivery timed out: $(grep ERROR "$T/outboxd.log" | tail -2)"
confirmed=$(slot_confirmed_lsn)
# The bound is the failed transaction's commit record (the commit_lsn the
# error names): streaming from there sends it again. "$before" is only a
# bound while nothing else moves WAL: a real broker's controlled shutdown
# takes a while, and a keepalive may confirm idle WAL meanwhile.
failed_commit=$(
    grep '_MSG_TIMED_OUT' "$T/outboxd.log" | head -n 1 | sed -n 's/.*(commit_lsn \([0-9A-F]*\/[0-9A-F]*\)).*/\1/p')
[[ -n "$failed_commit" ]] || fail "no commit_lsn in the timed-out delivery's log line"
lsn_ge "$failed_commit" "$before" || fail "the failed transaction ($failed_commit) is before $before"
lsn_ge "$failed_commit" "$confirmed" ||
    fail "slot confirmed $confirmed, past the undelivered transaction (commit_lsn $failed_commit)"
info "slot stays at $confirmed (undelivered transaction's commit at $failed_commit)"
broker_cmd "up 1"
outboxd_start
wait_caught_up 60
check_delivery
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
e2e_pass
