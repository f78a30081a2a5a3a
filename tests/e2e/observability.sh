#!/usr/bin/env bash
# The operator's view: /metrics (valid for promtool, values that follow
# what happens: events produced and ACKed per topic, bytes, in-flight
# counts, positions, slot lag, commit-to-ACK histogram, replication lag,
# reconnects), /healthz, /readyz (503 with the
# reason while the broker is down, 200 again after), JSON logs (one object
# per line, UTC timestamps, slot/lsn fields, no password), and the HTTP
# server switched off with an empty [http] listen.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init observability
command -v promtool >/dev/null || fail "promtool is not installed (Debian package prometheus)"
command -v curl >/dev/null || fail "curl is not installed"
pg_start
broker_start
# trust authentication ignores the password: it is there to be kept secret
PG_CONNINFO="$PG_CONNINFO password=sekret-pw-4711"
OUTBOXD_LOG_FORMAT=json outboxd_start --set postgres.monitor_interval_ms=500

# scrape: /metrics into $T/metrics.txt, checked by promtool.
scrape() {
    http_get /metrics >"$T/metrics.txt"
    [[ "$HTTP_STATUS" == 200 ]] || fail "/metrics answered $HTTP_STATUS"
    promtool check metrics <"$T/metrics.txt" >"$T/promtool.out" 2>&1 ||
        { cat "$T/promtool.out" >&2; fail "promtool check metrics rejected /metrics"; }
}
# m NAME{LABELS}: a sample of the last scrape ("" when absent).
m() { awk -v k="$1" '$1 == k { print $2; exit }' "$T/metrics.txt"; }
# msum NAME: the sum of a family's samples in the last scrape.
msum() { awk -v n="$1" 'index($1, n "{") == 1 || $1 == n { s += $2 } END { print s + 0 }' "$T/metrics.txt"; }
# wait_metric DESCRIPTION TIMEOUT_S 'CONDITION': scrapes until CONDITION
# (shell code, evaluated after each scrape) holds.
wait_metric() {
    local what=$1 timeout=$2 cond=$3 start=$SECONDS
    while :; do
        scrape
        eval "$cond" && { info "ok: $what"; return 0; }
        ((SECONDS - start < timeout)) || fail "$what: not after ${timeout}s; last scrape in $T/metrics.txt"
        sleep 0.3
    done
}
ready_is() { http_get /readyz >"$T/readyz.txt"; [[ "$HTTP_STATUS" == "$1" ]]; }

step "health and readiness once streaming"
http_get /healthz >/dev/null
assert_eq 200 "$HTTP_STATUS" "/healthz status"
[[ "$(cat "$T/http.body")" == "ok: event loop turned "* ]] || fail "/healthz body: $(cat "$T/http.body")"
for _ in $(seq 1 150); do ready_is 200 && break; sleep 0.2; done
assert_eq 200 "$HTTP_STATUS" "/readyz status"
assert_eq "ready" "$(cat "$T/readyz.txt")" "/readyz body"
http_get /nowhere >/dev/null
assert_eq 404 "$HTTP_STATUS" "unknown path"

step "30 events in 11 transactions over two topics"
psql_q <<'SQL'
BEGIN;
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
SELECT gen_random_uuid(), 'Order', 'order-' || i, 1, 'OrderCreated', jsonb_build_object('i', i) FROM generate_series(1, 20) AS i;
COMMIT;
SQL
for i in $(seq 1 10); do
    psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
            VALUES (gen_random_uuid(), 'Customer', 'cust-$i', 1, 'CustomerCreated', '{\"n\": $i}')"
done
wait_caught_up 60
check_delivery --exactly-once
wait_metric "30 events ACKed" 30 '[[ "$(msum outboxd_events_acked_total)" == 30 ]]'
assert_eq 20 "$(m 'outboxd_events_acked_total{topic="outbox.event.Order"}')" "ACKed on outbox.event.Order"
assert_eq 10 "$(m 'outboxd_events_acked_total{topic="outbox.event.Customer"}')" "ACKed on outbox.event.Customer"
assert_eq 20 "$(m 'outboxd_events_produced_total{topic="outbox.event.Order"}')" "produced on outbox.event.Order"
assert_eq 10 "$(m 'outboxd_events_produced_total{topic="outbox.event.Customer"}')" "produced on outbox.event.Customer"
assert_eq "$(psql_q "SELECT sum(octet_length(aggregate_id) + coalesce(octet_length(payload::text), 0)) FROM public.outbox_events")" \
    "$(m outboxd_produced_bytes_total)" "key and value bytes produced"
assert_eq 0 "$(m outboxd_inflight_events)" "events in flight"
assert_eq 0 "$(m outboxd_inflight_transactions)" "transactions in flight"
assert_eq 0 "$(msum outboxd_events_failed_total)" "failed events"
# Labelled counters start at 0 for every reason and cause outboxd knows,
# so that the first one counted is an increase an alert sees.
for k in 'outboxd_events_dead_lettered_total{reason="NULL_AGGREGATE_ID"}' \
    'outboxd_events_dead_lettered_total{reason="BAD_TOPIC"}' \
    'outboxd_events_dead_lettered_total{reason="MSG_SIZE_TOO_LARGE"}' \
    'outboxd_events_failed_total{reason="NULL_EVENT_ID"}' \
    'outboxd_events_failed_total{reason="_MSG_TIMED_OUT"}' \
    'outboxd_events_failed_total{reason="NOT_IN_PUBLICATION"}' \
    'outboxd_reconnects_total{cause="connect_failed"}' \
    'outboxd_reconnects_total{cause="stream_lost"}'; do
    assert_eq 0 "$(m "$k")" "$k before any was counted"
done
assert_eq 1 "$(m outboxd_ready)" "outboxd_ready"
assert_eq 1 "$(m outboxd_streaming)" "outboxd_streaming"
assert_eq 1 "$(m 'outboxd_build_info{version="0.1.0",plugin="pgoutput",slot="outboxd"}')" "build info"
confirmed=$(psql_q "SELECT pg_wal_lsn_diff(confirmed_flush_lsn, '0/0')::bigint FROM pg_replication_slots WHERE slot_name = 'outboxd'")
wait_metric "outboxd_confirmed_lsn >= the slot's confirmed_flush_lsn ($confirmed)" 30 \
    '(( $(m outboxd_confirmed_lsn) >= confirmed ))'
(( $(m outboxd_acked_lsn) >= $(m outboxd_confirmed_lsn) )) || fail "acked_lsn behind confirmed_lsn"
(( $(m outboxd_received_lsn) >= $(m outboxd_acked_lsn) )) || fail "received_lsn behind acked_lsn"
h=outboxd_commit_to_ack_seconds
assert_eq 30 "$(m "${h}_count{source=\"event\"}")" "commit-to-ACK samples (one per ACKed event)"
assert_eq 30 "$(m "${h}_bucket{source=\"event\",le=\"+Inf\"}")" "commit-to-ACK +Inf bucket"
awk -v h="${h}_bucket{source=\"event\"" 'index($1, h) == 1 { if ($2 < prev) bad = 1; prev = $2; n++ }
    END { exit !(n == 17 && !bad) }' "$T/metrics.txt" || fail "commit-to-ACK buckets missing or decreasing"
awk -v h="${h}_sum{source=\"event\"}" '$1 == h { exit !($2 > 0 && $2 < 30 * 60) } END { }' "$T/metrics.txt" ||
    fail "commit-to-ACK sum $(m "${h}_sum{source=\"event\"}") is not between 0 and 60 s per event"
lag=$(m outboxd_replication_lag_seconds)
[[ -n "$lag" ]] || fail "no outboxd_replication_lag_seconds after events were ACKed"
awk -v l="$lag" 'BEGIN { exit !(l >= 0 && l < 60) }' || fail "replication lag $lag s"
info "ok: replication lag ${lag}s; commit-to-ACK histogram with 30 samples"
# The stages: one sample per event for the three up to the ACK, one per
# transaction (11) once a status has confirmed it.
sh=outboxd_stage_latency_seconds
for stage in commit-to-receive receive-to-produce produce-to-ack; do
    assert_eq 30 "$(m "${sh}_count{stage=\"$stage\"}")" "$stage samples (one per event)"
done
wait_metric "ack-to-confirm: the 11 transactions confirmed" 30 \
    '[[ "$(m "${sh}_count{stage=\"ack-to-confirm\"}")" == 11 ]]'
awk -v h="${sh}_bucket{stage=\"ack-to-confirm\"" 'index($1, h) == 1 { if ($2 < prev) bad = 1; prev = $2; n++ }
    END { exit !(n == 17 && !bad) }' "$T/metrics.txt" || fail "ack-to-confirm buckets missing or decreasing"
wait_metric "slot lag 0 bytes and wal_status reserved once idle" 20 \
    '[[ "$(m outboxd_slot_lag_bytes)" == 0 && "$(m "outboxd_slot_wal_status{status=\"reserved\"}")" == 1 ]]'
# rules_have_samples GLOB: every metric deploy/prometheus/outboxd-alerts.yml
# uses that matches GLOB has a sample in the last scrape (a "# TYPE" line
# alone gives an alert nothing to evaluate).
rules_have_samples() {
    local glob=$1 n=0
    for name in $(grep -o 'outboxd_[a-z_]*' "$E2E_SRC_DIR/deploy/prometheus/outboxd-alerts.yml" | sort -u); do
        # shellcheck disable=SC2053
        [[ "$name" == $glob ]] || continue
        awk -v n="$name" '$1 == n || index($1, n "{") == 1 { f = 1 } END { exit !f }' "$T/metrics.txt" ||
            fail "deploy/prometheus/outboxd-alerts.yml uses $name, which has no sample in /metrics"
        n=$((n + 1))
    done
    info "ok: the $n metrics of the alert rules matching $glob have samples"
}
rules_have_samples 'outboxd_[!p]*'

step "the broker down: not ready, events wait in flight, the slot lags"
broker_cmd "down 1"
for _ in $(seq 1 100); do ready_is 503 && break; sleep 0.2; done
assert_eq 503 "$HTTP_STATUS" "/readyz status with the broker down"
assert_eq "not ready: no Kafka broker reachable" "$(cat "$T/readyz.txt")" "/readyz reason"
http_get /healthz >/dev/null
assert_eq 200 "$HTTP_STATUS" "/healthz with the broker down (the loop still turns)"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        SELECT gen_random_uuid(), 'Order', 'order-down-' || i, 1, 'Waiting', '{}' FROM generate_series(1, 5) AS i"
wait_metric "5 events in flight in 1 transaction, queued in librdkafka" 20 \
    '[[ "$(m outboxd_inflight_events)" == 5 && "$(m outboxd_inflight_transactions)" == 1 && "$(m outboxd_kafka_queue_messages)" -ge 5 ]]'
wait_metric "slot lag > 0 while the events wait" 20 '(( $(m outboxd_slot_lag_bytes) > 0 ))'
assert_eq 0 "$(m outboxd_ready)" "outboxd_ready with the broker down"
assert_eq 30 "$(msum outboxd_events_acked_total)" "ACKed while the broker is down"
sleep 2 # the 5 events wait at least 2 s: see the latency histogram below

step "the broker up again: ready, everything ACKed"
broker_cmd "up 1"
for _ in $(seq 1 150); do ready_is 200 && break; sleep 0.2; done
assert_eq 200 "$HTTP_STATUS" "/readyz status after the broker came back"
wait_caught_up 60
wait_metric "35 events ACKed, none in flight" 20 \
    '[[ "$(msum outboxd_events_acked_total)" == 35 && "$(m outboxd_inflight_events)" == 0 ]]'
assert_eq 35 "$(m "${h}_count{source=\"event\"}")" "commit-to-ACK samples after the outage"
awk -v h="${h}_bucket{source=\"event\",le=\"1\"}" '$1 == h { exit !($2 <= 30) }' "$T/metrics.txt" ||
    fail "events that waited out the outage (> 2 s) are counted under le=1"
info "ok: the 5 events that waited out the outage are above le=1"
wait_metric "slot lag back to 0" 20 '[[ "$(m outboxd_slot_lag_bytes)" == 0 ]]'

step "a lost replication connection is counted, and streaming resumes"
assert_eq 0 "$(m 'outboxd_reconnects_total{cause="stream_lost"}')" "reconnects before"
psql_q "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'outboxd'" >/dev/null
wait_metric "one reconnect after the stream was lost, streaming again" 30 \
    '[[ "$(m "outboxd_reconnects_total{cause=\"stream_lost\"}")" == 1 && "$(m outboxd_streaming)" == 1 ]]'
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        VALUES (gen_random_uuid(), 'Order', 'order-after', 1, 'After', '{}')"
wait_caught_up 60
wait_metric "36 events ACKed" 20 '[[ "$(msum outboxd_events_acked_total)" == 36 ]]'
check_delivery

step "graceful stop; the JSON log"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
grep -v '^===== e2e:' "$T/outboxd.log" >"$T/log.jsonl"
lines=$(wc -l <"$T/log.jsonl")
((lines > 5)) || fail "only $lines log lines"
jq -s 'length' "$T/log.jsonl" >/dev/null || fail "the log is not one JSON object per line"
bad=$(jq -c 'select((type != "object") or (.ts | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$") | not)
                 or ((.level | IN("error", "warn", "info", "debug")) | not)
                 or (.msg | type) != "string" or (.pid | type) != "number" or .slot != "outboxd")' "$T/log.jsonl" | head -3)
[[ -z "$bad" ]] || fail "log lines without ts/level/msg/pid/slot: $bad"
info "ok: $lines JSON lines, each with ts (UTC), level, pid, msg, slot"
start_line=$(jq -c 'select(.msg | startswith("streaming slot"))' "$T/log.jsonl" | head -1)
[[ -n "$start_line" ]] || fail "no 'streaming slot' line"
[[ "$(jq -r .lsn <<<"$start_line")" =~ ^[0-9A-F]+/[0-9A-F]+$ ]] || fail "'streaming slot' line without an lsn field: $start_line"
jq -r 'select(.msg | startswith("reconnecting from")) | .lsn | test("^[0-9A-F]+/[0-9A-F]+$")' "$T/log.jsonl" | grep -x true >/dev/null ||
    fail "no 'reconnecting from' line with an lsn field"
info "ok: lsn fields on the streaming and reconnecting lines"
# At stop: a line per stage and per Kafka broker (tests/bench reads them).
# (The messages read whole first: with pipefail, `jq | grep -q` fails when
# grep exits at its match and jq, still writing, dies of SIGPIPE.)
msgs=$(jq -r .msg "$T/log.jsonl")
for stage in commit-to-receive receive-to-produce produce-to-ack; do
    grep -Eq "^stage $stage over [0-9]+ events: p50 [0-9]+ us, p99 [0-9]+ us, max [0-9]+ us$" <<<"$msgs" ||
        fail "no 'stage $stage over N events' line at stop"
done
grep -Eq '^stage ack-to-confirm over [0-9]+ transactions: p50 [0-9]+ us, p99 [0-9]+ us, max [0-9]+ us$' <<<"$msgs" ||
    fail "no 'stage ack-to-confirm over N transactions' line at stop"
us='(([0-9]+)|n/a) us'
grep -Eq "^kafka broker [^ ]+ over [1-9][0-9]* windows: rtt avg $us p99 $us; int_latency avg $us p99 $us; outbuf_latency avg $us p99 $us; produce requests [1-9][0-9]*, bytes per request [0-9]+; thread wake-ups [1-9][0-9]*$" <<<"$msgs" ||
    fail "no 'kafka broker NAME over W windows' line with produce requests at stop"
info "ok: the stage and kafka broker lines at stop"
if grep -q 'sekret-pw-4711' "$T/outboxd.log" "$T/metrics.txt"; then
    fail "the password appears in the log or the metrics"
fi
info "ok: the password is in neither the log nor /metrics"

step "[http] listen empty: no HTTP server"
servers=$(grep -c 'http: serving' "$T/outboxd.log")
old_port=$(outboxd_http_port)
outboxd_start --set http.listen=
assert_eq "$servers" "$(grep -c 'http: serving' "$T/outboxd.log")" "HTTP servers started (none more)"
pid_ports=$(ss -ltnpH 2>/dev/null | grep "pid=$OUTBOXD_PID," || true)
[[ -z "$pid_ports" ]] || fail "outboxd listens with [http] listen empty: $pid_ports"
info "ok: outboxd (pid $OUTBOXD_PID) listens on no TCP port (the previous one was $old_port)"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
step "polling mode: the same endpoints, row outcomes instead of positions"
source "$E2E_LIB_DIR/polling_lib.sh"
polling_schema
relay_start obs
HTTP_LOG=$T/relay.obs.log
wait_log obs 'http: serving /metrics' 30
for _ in $(seq 1 100); do ready_is 200 && break; sleep 0.2; done
assert_eq 200 "$HTTP_STATUS" "/readyz in polling mode"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        SELECT gen_random_uuid(), 'Poll', 'poll-' || i, 1, 'Polled', '{}' FROM generate_series(1, 7) AS i"
wait_metric "7 rows sent in polling mode" 30 \
    '[[ "$(m "outboxd_polling_rows_total{outcome=\"sent\"}")" == 7 ]]'
assert_eq 7 "$(m 'outboxd_events_acked_total{topic="outbox.event.Poll"}')" "ACKed in polling mode"
assert_eq 7 "$(m 'outboxd_polling_rows_total{outcome="claimed"}')" "rows claimed"
assert_eq 1 "$(m outboxd_polling_connected)" "connected"
assert_eq "" "$(m outboxd_received_lsn)" "no LSN gauges in polling mode"
assert_eq 0 "$(m 'outboxd_events_failed_total{reason="_MSG_TIMED_OUT"}')" "failed (timed out) in polling mode"
assert_eq 0 "$(m 'outboxd_events_failed_total{reason="MSG_SIZE_TOO_LARGE"}')" "failed (too large) in polling mode"
broker_cmd "down 1"
for _ in $(seq 1 100); do ready_is 503 && break; sleep 0.2; done
assert_eq "not ready: no Kafka broker reachable" "$(cat "$T/readyz.txt")" "/readyz in polling mode, broker down"
broker_cmd "up 1"
for _ in $(seq 1 150); do ready_is 200 && break; sleep 0.2; done
assert_eq 200 "$HTTP_STATUS" "/readyz in polling mode, broker back"
relay_stop obs
unset HTTP_LOG

e2e_pass
