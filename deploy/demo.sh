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
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

"$ROOT/deploy/install-deps.sh"
cmake -S "$ROOT" -B "$ROOT/build" >/dev/null
cmake --build "$ROOT/build" -j"$(nproc)" >/dev/null
echo "demo: built $ROOT/build/outboxd ($("$ROOT/build/outboxd" --version))"

# The end-to-end test library knows how to start each piece.
export OUTBOXD_BUILD_DIR="$ROOT/build"
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
pg_start
broker_start --partitions 3
outboxd_start
info "outboxd's metrics: curl http://127.0.0.1:$(outboxd_http_port)/metrics (also /healthz, /readyz)"

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

step "messages in Kafka (topic, partition, offset, key, headers, value); Ctrl-C to stop"
for topic in outbox.event.order outbox.event.customer; do
    e2e_bg kcat -b "$KAFKA_BOOTSTRAP" -C -t "$topic" -o beginning -u -q \
        -f 'topic=%t partition=%p offset=%o key=%k\n  headers: %h\n  value: %s\n' 2>>"$T/kcat.err"
done

# A new order event every few seconds, so the stream keeps moving.
end=$((SECONDS + ${DEMO_SECONDS:-86400}))
for ((v = 3; SECONDS < end; v++)); do
    sleep 3
    psql_q "$(event order o-17 "$v" OrderUpdated "{\"step\": $v}")"
done
e2e_pass
