#!/usr/bin/env bash
# What outboxd logs while its broker is unreachable under load (issue 56):
# the first failure at once with its cause, then at most one line per 30 s
# (OUTAGE_EVERY_MS: how long, how many attempts, the last error), and one
# line when the broker is back, with the outage's length; librdkafka's own
# repeated callbacks (_ALL_BROKERS_DOWN, _TRANSPORT, FAIL, "0/1 brokers are
# down") are folded into those, and outboxd_kafka_unreachable_total counts
# every one. Before, the same outage logged 24 lines.
#
# The outage lasts OUTAGE_S seconds (default 120: the issue's 2 minutes,
# four interval lines and the recovery).
# The bound is proportional to it: the lines a folded log may say in that
# time, 1 + OUTAGE_S / 30 + 1, plus OTHER_LINES for what is not about the
# broker. Events keep being committed throughout and all arrive after.
# In the outage the replication connection is ended too (a combined
# outage): the lines about it are bounded the same way.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init outage_log
OUTAGE_S=${OUTAGE_S:-120}
OTHER_LINES=4
pg_start
broker_start
# At info, as an operator runs it (lib.sh's default is debug).
outboxd_start --set log.level=info

cols="event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload"
writer_loop() { # an event every 100 ms until killed
    local i=0
    while :; do
        i=$((i + 1))
        psql_q "INSERT INTO public.outbox_events ($cols) VALUES (gen_random_uuid(), 'Load', 'l-$((i % 8))', $i, 'Tick', '{}')" >/dev/null
        sleep 0.1
    done
}
e2e_bg writer_loop
writer=$E2E_BG_PID
wait_metric_ge 'outboxd_events_produced_total{topic="outbox.event.Load"}' 10 60

step "the broker down for $OUTAGE_S s under load, and the replication connection lost in it"
from=$(($(wc -l <"$T/outboxd.log") + 1))
broker_cmd "down 1"
t0=$SECONDS
# The database side of a combined outage: the walsender ended once the
# broker is known down, with deliveries outstanding. outboxd then waits for
# them before it reconnects, and says so at once and once per 30 s (it said
# it every 10 s: 11 lines over this outage).
for ((i = 0; i < 300; i++)); do
    tail -n "+$from" "$T/outboxd.log" | grep -q ' kafka: ' && break
    sleep 0.1
done
# ... and events produced since, which cannot be ACKed now.
produced=$(metric_value 'outboxd_events_produced_total{topic="outbox.event.Load"}')
wait_metric_ge 'outboxd_events_produced_total{topic="outbox.event.Load"}' $((produced + 5)) 30
got=$(psql_q "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'outboxd' AND active_pid IS NOT NULL")
[[ $got == t ]] || fail "ending the slot's walsender answered '$got'"
# The outage is a condition on its elapsed time; outboxd must keep running.
while ((SECONDS - t0 < OUTAGE_S)); do
    outboxd_assert_running
    sleep 1
done
during=$(tail -n "+$from" "$T/outboxd.log" | grep -cv '^=====' || true)
broker_cmd "up 1"
kill "$writer" 2>/dev/null || true
wait "$writer" 2>/dev/null || true
wait_caught_up 120
# The recovery line comes with the next statistics (1 s).
for ((i = 0; i < 100; i++)); do
    tail -n "+$from" "$T/outboxd.log" | grep -q 'kafka: recovered after' && break
    sleep 0.1
done
tail -n "+$from" "$T/outboxd.log" | sed 's/^/        | /' >&2
lines=$(tail -n "+$from" "$T/outboxd.log" | grep -cv '^=====' || true)
kafka_lines=$(tail -n "+$from" "$T/outboxd.log" | grep -c ' kafka: ' || true)
recover_lines=$(tail -n "+$from" "$T/outboxd.log" | grep -c 'replication connection lost' || true)
((recover_lines >= 1 && recover_lines <= 1 + OUTAGE_S / 30)) ||
    fail "$recover_lines lines about the lost replication connection in $OUTAGE_S s (1, then at most one per 30 s)"
tail -n "+$from" "$T/outboxd.log" | grep -qE 'replication connection lost [0-9]+ (min|s)( [0-9]+ s)? ago: still waiting for [0-9]+ outstanding' ||
    fail "no line says how long the replication connection has been lost"
# The lost replication connection says, besides its waiting lines, that the
# stream ended, where it reconnects from, the folded postgres outage, the
# two streaming lines and the postgres recovery: DB_LINES.
DB_LINES=6
bound=$((1 + OUTAGE_S / 30 + 1 + recover_lines + DB_LINES + OTHER_LINES))
info "$lines lines logged from the outage's start to the recovery ($during during the $OUTAGE_S s), $kafka_lines about Kafka; bound $bound"
((lines <= bound)) || fail "$lines lines logged over a $OUTAGE_S s broker outage (at most $bound)"

first=$(tail -n "+$from" "$T/outboxd.log" | grep -m1 ' kafka: ')
[[ $first =~ " WARN: kafka: ".*(Connection refused|unreachable).*"one line every 30 s" ]] ||
    fail "the outage's first line does not give its cause: $first"
still=$(tail -n "+$from" "$T/outboxd.log" | grep -c 'kafka: 1 of 1 brokers unreachable for [0-9]' || true)
((still >= OUTAGE_S / 30 - 1 && still <= OUTAGE_S / 30)) ||
    fail "$still interval lines in $OUTAGE_S s (one per 30 s expected)"
tail -n "+$from" "$T/outboxd.log" | grep -E 'INFO: kafka: recovered after ([0-9]+ min )?[0-9]+ s of failures \([0-9]+ failed attempts\)' >/dev/null ||
    fail "no recovery line with the outage's length"
# The log folds; /metrics counts every report.
attempts=$(tail -n "+$from" "$T/outboxd.log" | sed -nE 's/.*kafka: recovered after .* \(([0-9]+) failed attempts?\).*/\1/p' | tail -n 1)
counted=$(metric_value outboxd_kafka_unreachable_total)
((${counted:-0} >= ${attempts:-1})) ||
    fail "outboxd_kafka_unreachable_total is ${counted:-absent}, the log folded $attempts reports"
info "ok: outboxd_kafka_unreachable_total $counted (the log's count: $attempts)"
if tail -n "+$from" "$T/outboxd.log" | grep -E '_ALL_BROKERS_DOWN|0/1 brokers are down|kafka: FAIL' >&2; then
    fail "librdkafka's own repeats are in the log"
fi
# The harness's own variables (OUTBOXD_BUILD_DIR, ...) stayed out of
# outboxd's environment (lib.sh's OUTBOXD_ENV): no warning about them.
if grep 'ignoring environment variable' "$T/outboxd.log" >&2; then
    fail "outboxd was given variables of the test harness"
fi
check_delivery
e2e_pass
