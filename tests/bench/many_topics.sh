#!/usr/bin/env bash
# tests/bench/many_topics.sh - what a new topic costs outboxd.
#
# Every outbox row routes to outbox.event.${aggregate_type}; a workload
# with many distinct aggregate types makes many topics. This script, on a
# throw-away PostgreSQL 15 and the mock Kafka cluster (tests/e2e/lib.sh):
#  1. measures the first-event latency of a new topic on an idle outboxd
#     (commit to ACK of one event into a topic never seen, from the latency
#     summary outboxd logs at stop), LAT_SAMPLES times a second apart;
#  2. inserts N events, each into a topic of its own (BATCH rows per
#     transaction), and times until the slot is confirmed past them all
#     (every event ACKed), sampling outboxd's RSS every second;
#  3. checks every event was ACKed (the acked counters of /metrics) and
#     prints one line of figures: seconds, microseconds per new topic, peak
#     RSS (VmHWM of /proc/PID/status), the mock broker's RSS, latency.
#
# Usage: tests/bench/many_topics.sh [N (10000)] [BATCH (1000)]
# Environment: OUTBOXD_BUILD_DIR (default build/), as for the e2e tests;
# BENCH_TIMEOUT (seconds to wait for the drain, default 600);
# BENCH_SET: extra outboxd arguments (e.g. "--set kafka.linger.ms=5").
set -u
N=${1:-10000}
BATCH=${2:-1000}
LAT_SAMPLES=${LAT_SAMPLES:-5}
E2E_TIMEOUT=$((${BENCH_TIMEOUT:-600} + 300))
export E2E_TIMEOUT
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
e2e_init bench_many_topics
pg_start
broker_start
cols="event_id, aggregate_type, aggregate_id, event_type, payload"
# shellcheck disable=SC2086
outboxd_start ${BENCH_SET:-} --set log.level=info
psql_q "INSERT INTO public.outbox_events ($cols) VALUES (gen_random_uuid(), 'warm', 'k', 'Warm', '{}')" >/dev/null
wait_caught_up 60

step "first-event latency of a new topic ($LAT_SAMPLES samples)"
for ((i = 0; i < LAT_SAMPLES; i++)); do
    sleep 1
    psql_q "INSERT INTO public.outbox_events ($cols) VALUES (gen_random_uuid(), 'lat$i', 'k', 'Lat', '{}')" >/dev/null
done
wait_caught_up 30
outboxd_stop 60 || fail "outboxd exited with $OUTBOXD_RC"
# outboxd logs the commit-to-ACK latency of every event it ACKed at stop
lat=$(grep -o 'commit-to-ACK latency over [0-9]* events: p50 [0-9]* us, p99 [0-9]* us, max [0-9]* us' "$T/outboxd.log" | tail -1 |
    awk '{ printf "p50=%.1fms,max=%.1fms", $7 / 1000, $13 / 1000 }')
info "first-event latency of $((LAT_SAMPLES + 1)) new topics (the first right after the start): $lat"
# shellcheck disable=SC2086
outboxd_start ${BENCH_SET:-} --set log.level=info

step "$N events, one new topic each, $BATCH per transaction"
t0=$(date +%s.%N)
for ((s = 1; s <= N; s += BATCH)); do
    e=$((s + BATCH - 1 < N ? s + BATCH - 1 : N))
    psql_q "INSERT INTO public.outbox_events ($cols) SELECT gen_random_uuid(), 'many' || g, 'k', 'Many', '{}' FROM generate_series($s, $e) AS g" >/dev/null
done
end=$(current_lsn)
rss_max=0 broker_rss=0
deadline=$(($(date +%s) + ${BENCH_TIMEOUT:-600}))
while ! lsn_ge "$(slot_confirmed_lsn)" "$end"; do
    outboxd_assert_running
    r=$(awk '/^VmRSS/ { print $2 }' "/proc/$OUTBOXD_PID/status")
    ((r > rss_max)) && rss_max=$r
    (($(date +%s) < deadline)) || {
        acked=$(http_get /metrics | awk '/^outboxd_events_acked_total/ { s += $2 } END { print s }')
        fail "not drained within ${BENCH_TIMEOUT:-600}s: $acked events ACKed, peak RSS $((rss_max / 1024)) MB"
    }
    sleep 1
done
t1=$(date +%s.%N)
sleep 0.7
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$OUTBOXD_PID/status")
rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$OUTBOXD_PID/status")
broker_rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$BROKER_PID/status")
acked=$(http_get /metrics | awk '/^outboxd_events_acked_total/ { s += $2 } END { print s }')
want=$N
assert_eq "$want" "$acked" "events ACKed"
ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
us=$(awk -v a="$t0" -v b="$t1" -v n="$N" 'BEGIN { printf "%.0f", (b - a) * 1e6 / n }')
printf 'many_topics: N=%d drain_s=%s us_per_topic=%s outboxd_VmHWM_MB=%d outboxd_VmRSS_end_MB=%d broker_RSS_MB=%d first_event_ms=%s\n' \
    "$N" "$ms" "$us" $((hwm / 1024)) $((rss / 1024)) $((broker_rss / 1024)) "$lat" | tee -a "${BENCH_OUT:-/dev/null}"
info "$(grep -c "producer replaced" "$T/outboxd.log" || true) producer replacements; last: $(grep "producer replaced" "$T/outboxd.log" | tail -1 || true)"
step "SIGTERM"
t0=$(date +%s.%N)
outboxd_stop 60 || fail "outboxd exited with $OUTBOXD_RC"
info "stopped in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
e2e_pass
