#!/usr/bin/env bash
# demo.sh - installs what outboxd needs (Debian 12), builds it, and runs a
# local demo: a throw-away PostgreSQL 15, the embedded mock Kafka cluster
# (or, with DEMO_KAFKA=real, a real Apache Kafka broker), outboxd, and a few
# sample outbox events printed as they arrive in Kafka. Everything lives in
# one temp directory and is removed on exit (Ctrl-C).
#
#   sudo deploy/demo.sh                  # runs until Ctrl-C (or DEMO_SECONDS=N)
#   sudo DEMO_KAFKA=real deploy/demo.sh  # against a real one-broker Kafka
#                                        # (KRaft, tests/kafka/kafka.sh: its jars
#                                        # come from Maven Central, ~10 s to start)
#   DEMO_BUILD=DIR deploy/demo.sh        # an existing build, nothing installed
#                                        # (tests/e2e/demo.sh)
#
# Ctrl-C ends the demo as it should end: a short summary (what was
# committed, that the rolled-back event never appeared, the slot's
# confirmed position, the metrics), everything removed, exit 0. Only a real
# failure prints the logs (tests/e2e/lib.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [[ -z "${DEMO_BUILD:-}" ]]; then
    "$ROOT/deploy/install-deps.sh"
    cmake -S "$ROOT" -B "$ROOT/build" >/dev/null
    cmake --build "$ROOT/build" -j"$(nproc)" >/dev/null
fi
BUILD=${DEMO_BUILD:-$ROOT/build}
echo "demo: built $BUILD/outboxd ($("$BUILD/outboxd" --version | paste -sd, - | sed 's/,/, /g'))"

# The end-to-end test library knows how to start each piece (it keeps its
# own OUTBOXD_* variables out of outboxd's environment).
export OUTBOXD_BUILD_DIR="$BUILD"
case ${DEMO_KAFKA:-mock} in
mock) ;;
real)
    echo "demo: resolving the Apache Kafka broker's jars (Maven Central, once)"
    "$ROOT/tests/kafka/kafka.sh" resolve >/dev/null
    export E2E_KAFKA=real ;;
*) echo "demo.sh: DEMO_KAFKA must be mock or real, got '$DEMO_KAFKA'" >&2; exit 2 ;;
esac
export E2E_TIMEOUT=$((${DEMO_SECONDS:-86400} + 120))
# shellcheck source=../tests/e2e/lib.sh
source "$ROOT/tests/e2e/lib.sh"
e2e_init demo
# Ctrl-C is how the demo ends, not a failure (lib.sh's own trap says
# "interrupted" and prints every log).
E2E_PASS_WORD="stopped; everything it started is removed"
trap 'echo; echo "demo: stopped before it was ready"; exit 0' INT
# The servers in sessions of their own: the terminal's Ctrl-C is for this
# script, which stops them in order (PostgreSQL's pg_ctl does the same).
E2E_SPAWN=setsid
pg_start
broker_start --partitions 3
outboxd_start
METRICS=http://127.0.0.1:$(outboxd_http_port)/metrics
info "outboxd's metrics: curl $METRICS (also /healthz, /readyz)"

event() { # AGGREGATE_TYPE AGGREGATE_ID VERSION EVENT_TYPE PAYLOAD_JSON
    printf "INSERT INTO outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload) VALUES (gen_random_uuid(), '%s', '%s', %s, '%s', '%s');\n" "$@"
}

step "committing sample events (one transaction is rolled back: it never appears)"
psql_q "BEGIN;
$(event order o-17 1 OrderCreated '{"total": 42.50, "currency": "EUR"}')
$(event order o-17 2 OrderPaid '{"method": "card"}')
COMMIT;"
psql_q "BEGIN;
$(event order o-18 1 OrderCreated '{"total": 9.99}')
ROLLBACK;"
psql_q "$(event customer c-3 1 CustomerRegistered '{"name": "Zoë"}')"
wait_caught_up 30

# One consumer for both topics (a regex subscription): each message is
# printed whole, in the order Kafka hands them over. (Two consumers, one per
# topic, wrote into the same terminal at once, character by character.)
step "messages in Kafka (topic, partition, offset, key, headers, value); Ctrl-C to stop"
# demo_printer BOOTSTRAP DIR: the consumer, printing each message as it
# comes, and counting in DIR/printed the messages printed whole (the summary
# waits for them).
demo_printer() {
    local line n=0
    kcat -b "$1" -G outboxd-demo -X auto.offset.reset=earliest -u -q \
        -f 'topic=%t partition=%p offset=%o key=%k\n  headers: %h\n  value: %s\n' \
        '^outbox\.event\..*' 2>>"$2/kcat.err" |
        while IFS= read -r line; do
            printf '%s\n' "$line"
            if [[ $line == '  value: '* ]]; then
                n=$((n + 1))
                echo "$n" >"$2/printed"
            fi
        done
}
e2e_bg_group "$(declare -f demo_printer); demo_printer '$KAFKA_BOOTSTRAP' '$T'"
printer=$E2E_BG_PID

# summary: what the demo did, when it ends (Ctrl-C, or DEMO_SECONDS).
summary() {
    trap '' INT
    echo
    step "stopping"
    wait_caught_up 30
    local committed inkafka rolled lsn acked
    committed=$(psql_q "SELECT count(*) FROM outbox_events")
    KDUMP_TIMEOUT_MS=10000 kdump_all >"$T/kafka.jsonl"
    inkafka=$(wc -l <"$T/kafka.jsonl")
    rolled=$(jq -r .key "$T/kafka.jsonl" | grep -cx o-18 || true)
    # Every message in Kafka printed above before the summary starts.
    for ((i = 0; i < 100 && $(cat "$T/printed" 2>/dev/null || echo 0) < inkafka; i++)); do
        sleep 0.1
    done
    kill -TERM -- "-$printer" 2>/dev/null || true
    lsn=$(slot_confirmed_lsn)
    acked=$(http_get /metrics | awk '$1 ~ /^outboxd_events_acked_total/ { n += $2 } END { print n + 0 }')
    echo "demo: $committed events committed, $inkafka in Kafka, $acked ACKed to outboxd (outboxd_events_acked_total)"
    if ((rolled == 0)); then
        echo "demo: the rolled-back order o-18 never appeared in Kafka"
    else
        fail "the rolled-back order o-18 appeared in Kafka"
    fi
    echo "demo: slot \"outboxd\" confirmed up to $lsn (the server's WAL: $(current_lsn))"
    echo "demo: the metrics were at $METRICS (and /healthz, /readyz)"
    exit 0
}
trap summary INT TERM

# A new order event every few seconds, so the stream keeps moving.
end=$((SECONDS + ${DEMO_SECONDS:-86400}))
for ((v = 3; SECONDS < end; v++)); do
    sleep 3
    psql_q "$(event order o-17 "$v" OrderUpdated "{\"step\": $v}")"
done
summary
