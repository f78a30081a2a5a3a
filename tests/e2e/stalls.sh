#!/usr/bin/env bash
# Silent stalls (issue 15, item 4):
#  1. Many distinct topics: 3,000 events, each to a topic of its own (the
#     default template maps aggregate_type to the topic), are all ACKed
#     without a stall: the ACKed count rises in every STALL_S (30 s)
#     window (ACKs come in bursts: a new topic's events wait for its
#     metadata, and with a busy CPU the first burst came after 10 s), all
#     within MANY_TIMEOUT_S (90 s); outboxd's peak RSS
#     (VmHWM) stays under MANY_RSS_MB (120; 63 MB here), and /readyz stays
#     ready meanwhile. How fast is the benchmark's question
#     (tests/bench/many_topics.sh: 9-14 s here for 3,000 topics with the
#     machine to itself; with one produce request in flight per broker each
#     new topic costs a round trip, so a busy machine slows it: CI once saw
#     1,000 in 20 s, which a 20 s bound here failed). (Before the fix: a
#     metadata lookup per new topic on the event loop and a statistics tree
#     of every topic: 32-33 s and 309-342 MB at 3,000 topics, 4.4 GB at
#     10,000: the memory bound catches that.)
#  2. SIGTERM in the middle of another 4,000 new topics with the broker
#     down is obeyed within the documented bound: 10 s of drain
#     (PRODUCER_SHUTDOWN_FLUSH_MS) plus 2 s (10.1 s here, 13.5 s before),
#     exit 0, and nothing un-ACKed is confirmed; a restart then delivers
#     everything.
#  3. A stalled event loop makes /readyz say 503 (the readiness verdict is
#     the loop's own, published every 500 ms, so it used to stay "ready"):
#     outboxd's stderr goes through a pipe whose reader is stopped, and
#     dead-lettered events fill it, so the loop blocks writing its log.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init stalls
MANY=${MANY:-3000}
MANY_RSS_MB=${MANY_RSS_MB:-120}
MANY_TIMEOUT_S=${MANY_TIMEOUT_S:-90}
STALL_S=${STALL_S:-30}
# Release figures. Under AddressSanitizer beside the rest of CI a new
# client's 1,000 topics take about a minute (step 2 below), and in
# rehearsal U of stop 48 step 1's third client ACKed nothing for 30 s: both
# bounds are four times as long there, as step 2's is.
if e2e_sanitized; then
    STALL_S=$((4 * STALL_S)) MANY_TIMEOUT_S=$((4 * MANY_TIMEOUT_S))
fi
pg_start
broker_start
cols="event_id, aggregate_type, aggregate_id, event_type, payload"
rss_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$OUTBOXD_PID/status"; }
ready_status() { http_get /readyz >/dev/null; echo "$HTTP_STATUS"; }
# wait_ready STATUS TIMEOUT_S: polls /readyz until it answers STATUS; leaves
# the last answer in HTTP_STATUS and $T/http.body.
wait_ready() {
    local start=$SECONDS
    while :; do
        http_get /readyz >/dev/null
        [[ "$HTTP_STATUS" == "$1" ]] && return 0
        ((SECONDS - start < $2)) || return 0
        sleep 0.2
    done
}
acked_total() { http_get /metrics | awk '/^outboxd_events_acked_total/ { s += $2 } END { print s + 0 }'; }

step "1. $MANY events, one new topic each"
outboxd_start --set log.level=info
wait_ready 200 10
assert_eq 200 "$HTTP_STATUS" "/readyz before the load"
start=$SECONDS
psql_q "INSERT INTO public.outbox_events ($cols) SELECT gen_random_uuid(), 'many' || g, 'k' || g, 'Many', '{}' FROM generate_series(1, $MANY) AS g" >/dev/null
end=$(current_lsn)
not_ready=0 last_acked=0 last_rise=$SECONDS
until lsn_ge "$(slot_confirmed_lsn)" "$end"; do
    outboxd_assert_running
    [[ "$(ready_status)" == 200 ]] || not_ready=$((not_ready + 1))
    acked=$(acked_total)
    if ((acked > last_acked)); then
        last_acked=$acked last_rise=$SECONDS
    fi
    ((SECONDS - last_rise < STALL_S)) ||
        fail "stalled: the ACKed count stayed at $acked of $MANY for $STALL_S s, VmHWM $(($(rss_kb VmHWM) / 1024)) MB"
    ((SECONDS - start < MANY_TIMEOUT_S)) ||
        fail "not every event ACKed within $MANY_TIMEOUT_S s: $acked of $MANY, VmHWM $(($(rss_kb VmHWM) / 1024)) MB"
    sleep 0.5
done
info "$MANY topics drained in $((SECONDS - start)) s"
for _ in $(seq 1 60); do [[ "$(acked_total)" == "$MANY" ]] && break; sleep 0.5; done # published every 500 ms
assert_eq "$MANY" "$(acked_total)" "events ACKed"
hwm=$(($(rss_kb VmHWM) / 1024))
info "outboxd peak RSS (VmHWM): $hwm MB"
if e2e_sanitized; then
    # AddressSanitizer's shadow memory and quarantine triple the RSS (215 MB
    # seen): the bound is a Release figure, checked by e2e.stalls of the
    # Release build in the same ctest run; everything else here still runs.
    info "AddressSanitizer build: peak RSS $hwm MB not held against the Release bound of $MANY_RSS_MB MB"
else
    ((hwm < MANY_RSS_MB)) || fail "peak RSS $hwm MB with $MANY topics (bound $MANY_RSS_MB MB)"
fi
((not_ready == 0)) || fail "/readyz said not ready $not_ready times while the topics drained"
check_delivery --exactly-once
assert_eq "$MANY" "$(jq -r '.topic' "$T/check.dump.jsonl" | sort -u | grep -c '^outbox\.event\.many')" \
    "distinct topics in the broker"

step "2. SIGTERM while 4000 new topics wait for a broker that is down"
broker_cmd "down 1"
psql_q "INSERT INTO public.outbox_events ($cols) SELECT gen_random_uuid(), 'down' || g, 'k' || g, 'Down', '{}' FROM generate_series(1, 4000) AS g" >/dev/null
end=$(current_lsn) # just after the transaction's commit
sleep 3
outboxd_assert_running
t0=$(date +%s%N)
outboxd_stop 40 || fail "outboxd exited with $OUTBOXD_RC after SIGTERM"
ms=$((($(date +%s%N) - t0) / 1000000))
info "SIGTERM obeyed in $ms ms"
if e2e_sanitized; then
    # A Release bound, checked by e2e.stalls of the Release build in the
    # same ctest run (under ASan beside the rest of CI: 20.4 s once).
    info "AddressSanitizer build: $ms ms not held against the Release bound of 12 s"
else
    ((ms <= 12000)) || fail "SIGTERM took $ms ms (bound: 10 s of drain + 2 s)"
fi
confirmed=$(slot_confirmed_lsn)
lsn_ge "$confirmed" "$end" && fail "the slot was confirmed to $confirmed, past events the broker never ACKed (commit before $end)"
broker_cmd "up 1"
outboxd_start --set log.level=info
# All 4,000 topics are new and arrive at once: a new client every 1,000
# topics (PRODUCER_MAX_TOPICS), each waiting for its topics' metadata.
# 18 s on the Release build beside a full CI run; the AddressSanitizer
# build in the same run took more than 90 s (about 1,000 topics a minute,
# librdkafka 2.14.2), so it gets RESTART_TIMEOUT_S x 4.
RESTART_TIMEOUT_S=${RESTART_TIMEOUT_S:-90}
if e2e_sanitized; then wait_caught_up $((4 * RESTART_TIMEOUT_S)); else wait_caught_up "$RESTART_TIMEOUT_S"; fi
# (a dump of 7,000 topics takes minutes: the new instance's counters say
# it; /metrics is published every 500 ms, so give it a moment)
for _ in $(seq 1 60); do [[ "$(acked_total)" == 4000 ]] && break; sleep 0.5; done
assert_eq 4000 "$(acked_total)" "events ACKed after the restart (all 4,000 sent again)"

step "3. /readyz during a stalled event loop"
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
mkfifo "$T/stderr.fifo"
cat "$T/stderr.fifo" >>"$T/outboxd.log" &
reader=$!
E2E_BG_PIDS+=("$reader")
printf '#!/bin/sh\nexec "$@" 2>"%s"\n' "$T/stderr.fifo" >"$T/wrap.sh"
chmod +x "$T/wrap.sh"
OUTBOXD_WRAPPER="$T/wrap.sh" outboxd_start --set errors.policy=dlq --set log.level=info
wait_ready 200 10
assert_eq 200 "$HTTP_STATUS" "/readyz before the stall"
kill -STOP "$reader"
# An empty aggregate_id: a poison event, dead-lettered with a WARN line each
# (~300 bytes): 2,000 of them fill the 64 kB pipe many times over.
psql_q "INSERT INTO public.outbox_events ($cols) SELECT gen_random_uuid(), 'stall', '', 'Stall', '{}' FROM generate_series(1, 2000) AS g" >/dev/null
wait_ready 503 20
got=$HTTP_STATUS body=$(cat "$T/http.body")
kill -CONT "$reader"
assert_eq 503 "$got" "/readyz while the loop is blocked on its log"
[[ "$body" == "not ready: event loop stalled: last turn "* ]] || fail "/readyz body: $body"
info "/readyz said: $body"
wait_ready 200 10
assert_eq 200 "$HTTP_STATUS" "/readyz once the loop turns again"
wait_caught_up 60
assert_eq 2000 "$("$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" -b "$KAFKA_BOOTSTRAP" -t outbox.dlq --timeout-ms 30000 | wc -l)" \
    "events in the dead-letter topic"
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
e2e_pass
