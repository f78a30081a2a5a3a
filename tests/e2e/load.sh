# shellcheck shell=bash
#
# tests/e2e/load.sh - an outbox write load for end-to-end tests; source it
# after lib.sh (it uses $T, psql's PG* environment, info, e2e_bg).
#
#   load_setup KEYS TYPES      schema: agg_versions + load_emit()
#   load_start WRITERS MAX_S   starts WRITERS background writers; each stops
#                              by itself after MAX_S seconds, or earlier
#                              when load_stop is called
#   load_stop                  asks the writers to stop and waits for them
#   load_stats                 totals of the writers' counters
#
# Each writer loops: a transaction of 1..LOAD_MAX_TXN (200) events on random
# aggregates, ROLLBACK instead of COMMIT with probability 1/LOAD_ROLLBACK_EVERY
# (10), then LOAD_PAUSE seconds (0.3) of sleep. Events go to KEYS aggregates
# ("agg-<k>") of TYPES aggregate types ("Load<k % TYPES>", hence TYPES topics).
# aggregate_version is strictly increasing per aggregate in commit order: it
# comes from agg_versions, whose row lock serialises the writers per
# aggregate (a transaction locks its aggregates in ascending order, so
# writers never deadlock). A transaction that fails (server restarting,
# connection dropped) is simply not committed - or, when only the reply of
# COMMIT was lost, committed: the truth is the outbox table, never the
# writers' counters.

LOAD_PIDS=()

# load_setup KEYS TYPES
load_setup() {
    local keys=${1:?load_setup KEYS TYPES} types=${2:?load_setup KEYS TYPES}
    LOAD_KEYS=$keys LOAD_TYPES=$types
    psql_q <<SQL
CREATE TABLE public.agg_versions (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0);
INSERT INTO public.agg_versions (id) SELECT g FROM generate_series(0, $keys - 1) AS g;
-- n events on random aggregates, in ascending aggregate order (lock order).
CREATE FUNCTION public.load_emit(n int, keys int, types int, writer int, txn bigint)
RETURNS int LANGUAGE plpgsql AS \$\$
DECLARE
    k int;
    ver bigint;
    i int := 0;
BEGIN
    FOR k IN SELECT floor(random() * keys)::int FROM generate_series(1, n) ORDER BY 1 LOOP
        UPDATE public.agg_versions SET v = v + 1 WHERE id = k RETURNING v INTO ver;
        i := i + 1;
        INSERT INTO public.outbox_events
            (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        VALUES (gen_random_uuid(), 'Load' || (k % types), 'agg-' || k, ver, 'Tick',
                jsonb_build_object('w', writer, 't', txn, 'i', i));
    END LOOP;
    RETURN i;
END \$\$;
SQL
}

# _load_writer ID MAX_S: the loop of one writer (run in the background).
_load_writer() {
    local id=$1 max_s=$2 txn=0 ok=0 rb=0 failed=0 n end start=$SECONDS
    local stop=$T/load.stop stats=$T/load.$1.stats
    set +e
    trap - ERR
    while [[ ! -e $stop ]] && ((SECONDS - start < max_s)); do
        txn=$((txn + 1))
        n=$((RANDOM % ${LOAD_MAX_TXN:-200} + 1))
        if ((RANDOM % ${LOAD_ROLLBACK_EVERY:-10} == 0)); then end=ROLLBACK; else end=COMMIT; fi
        if PGCONNECT_TIMEOUT=5 timeout 60 psql -XAtq -v ON_ERROR_STOP=1 >/dev/null \
            2>>"$T/load.$id.err" <<<"BEGIN;
SELECT public.load_emit($n, $LOAD_KEYS, $LOAD_TYPES, $id, $txn);
$end;"; then
            if [[ $end == COMMIT ]]; then ok=$((ok + 1)); else rb=$((rb + 1)); fi
        else
            failed=$((failed + 1))
            sleep 0.2
        fi
        printf 'txns=%d committed=%d rolledback=%d failed=%d\n' \
            "$txn" "$ok" "$rb" "$failed" >"$stats"
        sleep "${LOAD_PAUSE:-0.3}"
    done
    exit 0
}

# load_start WRITERS MAX_S
load_start() {
    local writers=${1:?load_start WRITERS MAX_S} max_s=${2:?load_start WRITERS MAX_S} i
    rm -f "$T/load.stop"
    LOAD_PIDS=()
    for ((i = 1; i <= writers; i++)); do
        e2e_bg _load_writer "$i" "$max_s"
        LOAD_PIDS+=("$E2E_BG_PID")
    done
    info "load: $writers writers (1..${LOAD_MAX_TXN:-200} events per transaction," \
        "1 in ${LOAD_ROLLBACK_EVERY:-10} rolled back, pause ${LOAD_PAUSE:-0.3}s, at most ${max_s}s)"
}

# load_running: true while at least one writer runs.
load_running() {
    local pid
    for pid in "${LOAD_PIDS[@]}"; do
        kill -0 "$pid" 2>/dev/null && return 0
    done
    return 1
}

load_stop() {
    local pid
    touch "$T/load.stop"
    for pid in "${LOAD_PIDS[@]}"; do
        wait "$pid" || fail "load writer $pid failed"
    done
    LOAD_PIDS=()
    info "load stopped: $(load_stats)"
}

# load_stats: "txns=N committed=N rolledback=N failed=N" summed over writers.
load_stats() {
    cat "$T"/load.*.stats 2>/dev/null | awk '
        { for (i = 1; i <= NF; i++) { split($i, kv, "="); s[kv[1]] += kv[2] } }
        END { printf "txns=%d committed=%d rolledback=%d failed=%d", s["txns"], s["committed"], s["rolledback"], s["failed"] }'
}
