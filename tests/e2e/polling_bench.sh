#!/usr/bin/env bash
# Polling mode throughput (not part of ctest; the figures in sql/README.md, Polling mode figures):
#  1. a backlog of BENCH_EVENTS events over BENCH_KEYS aggregates, on top of
#     BENCH_SENT old SENT rows, drained by 1 relay and then (new backlog) by
#     3 relays;
#  2. BENCH_HOT events of a single aggregate (published one at a time: the
#     per-aggregate order rule), drained by 3 relays.
# Prints events/s for each. Knobs: BENCH_EVENTS (20000), BENCH_KEYS (1000),
# BENCH_SENT (200000), BENCH_HOT (1000), BENCH_BATCH (200).
: "${BENCH_EVENTS:=20000}" "${BENCH_KEYS:=1000}" "${BENCH_SENT:=200000}"
: "${BENCH_HOT:=1000}" "${BENCH_BATCH:=200}"
export E2E_TIMEOUT=${E2E_TIMEOUT:-900}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/polling_lib.sh"
e2e_init polling_bench
pg_start
polling_schema
broker_start
export RELAY_LOG_LEVEL=info
ARGS=(--set polling.batch_size="$BENCH_BATCH" --set polling.retention=0)

psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, sent_at, lease_generation)
        SELECT gen_random_uuid(), 'Old', 'old-' || (g % 5000), g, 'Tick', '{\"old\": true}', 'SENT', now() - interval '1 day', 1
        FROM generate_series(1, $BENCH_SENT) g; VACUUM ANALYZE public.outbox_events"

# backlog TAG KEYS N: N pending events over KEYS aggregates, versions in order.
backlog() {
    psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
            SELECT gen_random_uuid(), 'Bench$1', '$1-' || (g % $2), g, 'Tick', jsonb_build_object('g', g)
            FROM generate_series(1, $3) g ORDER BY g; ANALYZE public.outbox_events"
}

# drain RELAYS WHAT N: starts RELAYS relays, times until nothing is unsent.
drain() {
    local n=$1 what=$2 count=$3 i t0 ms
    t0=$(date +%s%N)
    for ((i = 1; i <= n; i++)); do relay_start "$what$i" "${ARGS[@]}"; done
    wait_rows "status <> 'SENT'" 0 600
    ms=$((($(date +%s%N) - t0) / 1000000))
    for ((i = 1; i <= n; i++)); do relay_stop "$what$i"; done
    echo "$what: $count events, $n relay(s): $ms ms, $((count * 1000 / ms)) events/s" | tee -a "$T/bench" >&2
}

backlog a "$BENCH_KEYS" "$BENCH_EVENTS"
drain 1 spread1_ "$BENCH_EVENTS"
backlog b "$BENCH_KEYS" "$BENCH_EVENTS"
drain 3 spread3_ "$BENCH_EVENTS"
backlog h 1 "$BENCH_HOT"
drain 3 hot3_ "$BENCH_HOT"
info "table: $(psql_q "SELECT count(*) FROM public.outbox_events") rows; batch $BENCH_BATCH"
# The synthetic SENT rows were never published: out of verify's way.
psql_q "DELETE FROM public.outbox_events WHERE aggregate_type = 'Old'"
polling_verify "$T/verify.json"
assert_eq 0 "$(jq '.missing + .order_violations' "$T/verify.json")" "missing + order violations"
cat "$T/bench" >&2
e2e_pass
