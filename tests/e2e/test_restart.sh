#!/usr/bin/env bash
# outboxd stopped (SIGTERM) and killed (SIGKILL) while a load of small
# transactions (every 10th rolled back) runs: after restarts every committed
# event arrived at least once, per-key order held, nothing rolled back
# appeared, and SIGTERM exited 0. After the SIGTERMs alone every event
# arrived exactly once: a stop drains what is in flight and stores how far
# into the open transaction the broker ACKed, and the restart skips that.
# After a SIGKILL the copies sent again are counted, per kill.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init restart
pg_start
judge_slot
broker_start
create_load_procedure
outboxd_start

load_bg() { # TAG: starts the load in the background
    e2e_bg psql_q "CALL public.load(2500, 16, 4, '$1')"
    LOAD_PID=$E2E_BG_PID
}
load_count() { psql_q "SELECT count(*) FROM public.outbox_events"; }

step "load 1: SIGTERM mid-stream, then restart"
load_bg t
sleep 3
info "committed events so far: $(load_count)"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM during load, expected 0"
sleep 1
outboxd_start
sleep 2
info "committed events so far: $(load_count)"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM during load, expected 0"
outboxd_start
wait "$LOAD_PID" || fail "load 1 failed"
info "load 1 done: $(load_count) committed events"
wait_caught_up 120
check_delivery --exactly-once

step "load 2: SIGKILL mid-stream, several times"
load_bg k
for i in 1 2 3; do
    sleep 2
    info "committed events so far: $(load_count)"
    outboxd_kill9
    outboxd_start
done
wait "$LOAD_PID" || fail "load 2 failed"
info "load 2 done: $(load_count) committed events"
wait_caught_up 120
check_delivery
# Load 1 left no duplicate (checked above): these are the kills'.
info "3 kills -9 under load: $(jq -r .headers.event_id "$T/check.dump.jsonl" | sort | uniq -d | wc -l) events delivered more than once"

step "load 3: SIGKILL right after start, while catching up a backlog"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
psql_q "CALL public.load(500, 16, 4, 'b')"
outboxd_start
sleep 0.5
outboxd_kill9
outboxd_start
wait_caught_up 120
check_delivery
if grep -q '"RolledBack"' "$T/check.dump.jsonl"; then fail "an event of a rolled-back transaction arrived"; fi
info "duplicates are allowed after SIGKILL (at-least-once)"

outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
e2e_pass
