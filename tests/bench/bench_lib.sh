# shellcheck shell=bash
# tests/bench/bench_lib.sh - what tests/bench/run.sh, peer.sh and emit.sh
# share: the workload (a ~300-byte jsonb payload, the drain's loader, the
# steady state's pgbench writer), outboxd's configuration, the results
# file, and the consumer end of
# the commit-to-consumer latency: a consumer (tests/kwatch.c) that records
# when each event id arrives, and the SQL that turns its lines into
# per-event latencies against the rows' commit timestamps
# (track_commit_timestamp = on). Sourced after tests/e2e/lib.sh ($T,
# $KAFKA_BOOTSTRAP, fail, info, E2E_BG_PIDS). KW_HEADER names the header
# carrying the event id (default event_id).

# record KEY=JSON...: appends one object to $RESULTS.
record() {
    local args=() kv
    for kv in "$@"; do args+=(--argjson "${kv%%=*}" "${kv#*=}"); done
    jq -cn "${args[@]}" '$ARGS.named' >>"$RESULTS"
}
# peak_rss_kb PID: the high-water mark of the resident set.
peak_rss_kb() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }
# rss_parts PID: "ANON_KB FILE_KB THREADS" now (RssAnon: the heap and
# stacks; RssFile: the mapped code of outboxd and its libraries).
rss_parts() { awk '/^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 } /^Threads:/ { t = $2 }
    END { print a, f, t }' "/proc/$1/status"; }

# bench_pg_start: a throw-away PostgreSQL (lib.sh's pg_start) with room for
# the backlogs (max_wal_size 8GB) and the rows' commit timestamps, which the
# commit-to-consumer latency reads (track_commit_timestamp, a restart).
bench_pg_start() {
    pg_start
    psql_q "ALTER SYSTEM SET max_wal_size = '8GB'" >/dev/null
    psql_q "ALTER SYSTEM SET track_commit_timestamp = on" >/dev/null
    pg_restart
    [[ $(psql_q "SHOW track_commit_timestamp") == on ]] ||
        fail "track_commit_timestamp is not on after the restart"
}

# slot_wait_for SLOT CONDITION: blocks server-side (polling shared memory
# every 5 ms, up to 1800 s) until CONDITION, an SQL expression over SLOT's
# row of pg_replication_slots, holds; prints the server's clock (epoch
# seconds) at that moment. Run it in the background before what it times.
slot_wait_for() {
    psql -XAtq -v ON_ERROR_STOP=1 <<SQL
DO \$\$
DECLARE deadline timestamptz := clock_timestamp() + interval '1800 s';
BEGIN
    LOOP
        EXIT WHEN (SELECT $2 FROM pg_replication_slots WHERE slot_name = '$1');
        IF clock_timestamp() > deadline THEN
            RAISE EXCEPTION 'slot $1: % did not hold within 1800 s', \$c\$$2\$c\$;
        END IF;
        PERFORM pg_sleep(0.005);
    END LOOP;
END
\$\$;
SELECT extract(epoch FROM clock_timestamp());
SQL
}

# slot_wait_bg SLOT CONDITION OUT: slot_wait_for in the background (its
# output to OUT, its pid in SLOT_WAITER), returning once its session is
# polling. A condition that holds only for a while ("active": a fast
# relay can take the slot, drain and let go of it in a fraction of a
# second) is missed when the waiter's session starts after it: under load
# it did, and the waiter polled for its 1800 s.
slot_wait_bg() {
    local i app="slotwait_$1"
    PGAPPNAME=$app slot_wait_for "$1" "$2" >"$3" 2>&1 &
    SLOT_WAITER=$!
    E2E_BG_PIDS+=("$SLOT_WAITER")
    for ((i = 0; i < 600; i++)); do
        [[ "$(psql_q "SELECT count(*) FROM pg_stat_activity WHERE application_name = '$app' AND state = 'active'")" == 1 ]] &&
            return 0
        kill -0 "$SLOT_WAITER" 2>/dev/null || fail "the waiter for slot $1 ended before polling: $(cat "$3")"
        sleep 0.05
    done
    fail "the waiter for slot $1 was not polling within 30 s"
}

# bench_schema TABLE COLUMNS: prints the SQL that creates bench_payload(n)
# (about 300 bytes of jsonb), bench_load(n, base) (n events: a 10-event
# transaction, then ten 1-event ones, half the events each, committing as
# it goes; aggregate ids spread over 1,000 values) and
# bench_load_one_txn(n, base) (one transaction of n events), inserting into
# TABLE; COLUMNS names its event id, aggregate type, aggregate id, event
# type and payload columns, comma-separated, in that order.
bench_schema() {
    cat <<SQL
CREATE FUNCTION bench_payload(n bigint) RETURNS jsonb LANGUAGE sql IMMUTABLE AS \$\$
    SELECT jsonb_build_object(
        'order_id', n,
        'customer', md5(n::text),
        'sku', upper(substr(md5((n + 1)::text), 1, 12)),
        'quantity', 1 + n % 7,
        'unit_price_cents', 100 + (n * 37) % 90000,
        'currency', 'EUR',
        'shipping', jsonb_build_object('street', md5((n + 2)::text),
                                       'city', substr(md5((n + 3)::text), 1, 10),
                                       'zip', lpad((n % 100000)::text, 5, '0')),
        'note', md5((n + 4)::text) || md5((n + 5)::text))
\$\$;
CREATE PROCEDURE bench_load(n bigint, base bigint) LANGUAGE plpgsql AS \$\$
DECLARE
    i bigint := 0;
    batch int;
BEGIN
    WHILE i < n LOOP
        batch := CASE WHEN i % 20 = 0 THEN 10 ELSE 1 END;
        IF batch > n - i THEN batch := n - i; END IF;
        INSERT INTO $1 ($2)
        SELECT gen_random_uuid(), 'Order', 'order-' || ((base + i + g) * 7919 % 1000),
               'OrderPlaced', bench_payload(base + i + g)
          FROM generate_series(0, batch - 1) AS g;
        COMMIT;
        i := i + batch;
    END LOOP;
END
\$\$;
CREATE PROCEDURE bench_load_one_txn(n bigint, base bigint) LANGUAGE sql AS \$\$
    INSERT INTO $1 ($2)
    SELECT gen_random_uuid(), 'Order', 'order-' || ((base + g) * 7919 % 1000),
           'OrderPlaced', bench_payload(base + g)
      FROM generate_series(0, n - 1) AS g;
\$\$;
SQL
}

# bench_writer TABLE COLUMNS AGGREGATE_TYPE: writes the steady state's
# pgbench scripts, $T/one.sql (one event) and $T/ten.sql (ten events), for
# TABLE and COLUMNS as bench_schema takes them. Run with weights 10:1
# (-f one.sql@10 -f ten.sql@1) they put half the events in each: 20 events
# per 11 transactions, so RATE events/s is bench_tps RATE transactions/s.
bench_writer() {
    cat >"$T/one.sql" <<EOF
\set n random(1, 1000000000)
INSERT INTO $1 ($2)
VALUES (gen_random_uuid(), '$3', 'order-' || (:n % 1000), 'OrderPlaced', bench_payload(:n));
EOF
    cat >"$T/ten.sql" <<EOF
\set n random(1, 1000000000)
INSERT INTO $1 ($2)
SELECT gen_random_uuid(), '$3', 'order-' || ((:n + g) % 1000), 'OrderPlaced',
       bench_payload(:n + g)
  FROM generate_series(0, 9) AS g;
EOF
}
bench_tps() { echo $((($1 * 11 + 19) / 20)); }

# start_kwatch TOPIC: starts the consumer (tests/kwatch.c) at the end of
# every partition of TOPIC, its lines in $T/kwatch.lines; returns once it
# is ready (everything produced from then on is seen); sets KWATCH_PID.
start_kwatch() {
    local i
    rm -f "$T/kwatch.ready"
    # A real broker answers a fetch as soon as fetch.min.bytes (1) are
    # there, so a long wait costs the consumer no latency and spares the
    # brokers (on the benchmark's 2 cores) 1,000 empty fetches a second per
    # partition leader. The mock answers an empty fetch only after the
    # whole wait, so there it stays kwatch's 1 ms.
    local wait=()
    [[ ${E2E_KAFKA:-mock} == real ]] && wait=(-X fetch.wait.max.ms=100)
    "$OUTBOXD_BUILD_DIR/tests/outboxd-kwatch" -b "$KAFKA_BOOTSTRAP" -t "$1" \
        --header "${KW_HEADER:-event_id}" --ready-file "$T/kwatch.ready" ${wait[@]+"${wait[@]}"} \
        >"$T/kwatch.lines" 2>"$T/kwatch.err" </dev/null &
    KWATCH_PID=$!
    E2E_BG_PIDS+=("$KWATCH_PID")
    for ((i = 0; i < 600; i++)); do
        [[ -s "$T/kwatch.ready" ]] && return 0
        kill -0 "$KWATCH_PID" 2>/dev/null || fail "outboxd-kwatch exited: $(cat "$T/kwatch.err")"
        sleep 0.05
    done
    fail "outboxd-kwatch was not ready within 30 s: $(cat "$T/kwatch.err")"
}

# stop_kwatch N: waits (up to 60 s) until the consumer has written N lines,
# then SIGTERM; expects exit 0.
stop_kwatch() {
    local i rc=0
    for ((i = 0; i < 600; i++)); do
        (($(wc -l <"$T/kwatch.lines") >= $1)) && break
        kill -0 "$KWATCH_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -TERM "$KWATCH_PID" 2>/dev/null || true
    wait "$KWATCH_PID" || rc=$?
    [[ $rc -eq 0 ]] || fail "outboxd-kwatch exited with $rc: $(tail -5 "$T/kwatch.err")"
    info "consumer: $(wc -l <"$T/kwatch.lines") lines for $1 committed events"
}

# consumer_latency: COPYs the consumer's lines into PostgreSQL (against
# the rows of KW_TABLE, default public.outbox_events, whose id column is
# KW_ID, default event_id) and sets
# CONS_LINES, CONS_DUPS (lines beyond the first of an event), CONS_MISSING
# (committed events it never saw), CONS_UNKNOWN (ids not in the outbox),
# CONS_N (events with a latency) and CONS_P50/P99/MAX (us): per event, its
# first receive time minus its row's commit timestamp; CONS_CDF, the same
# latency's distribution as a JSON array of 101 values (us): percentiles
# 1 to 99, 99.5 and 99.9 (tests/bench/plots.sh draws it).
consumer_latency() {
    local table=${KW_TABLE:-public.outbox_events} id=${KW_ID:-event_id}
    psql -XAtq -v ON_ERROR_STOP=1 -F ' ' >"$T/kwatch.sql.out" 2>&1 <<SQL ||
CREATE TEMP TABLE kwatch_lines (event_id text NOT NULL, receive_us bigint NOT NULL);
\copy kwatch_lines FROM '$T/kwatch.lines' WITH (FORMAT text, DELIMITER ' ')
CREATE TEMP TABLE kwatch_first AS
    SELECT event_id, min(receive_us) AS receive_us FROM kwatch_lines GROUP BY event_id;
WITH lat AS (
    SELECT f.receive_us - (extract(epoch FROM pg_xact_commit_timestamp(o.xmin)) * 1000000)::bigint AS us
      FROM $table o JOIN kwatch_first f ON f.event_id = o.$id::text)
SELECT (SELECT count(*) FROM kwatch_lines),
       (SELECT count(*) FROM kwatch_lines) - (SELECT count(*) FROM kwatch_first),
       (SELECT count(*) FROM $table o
         WHERE NOT EXISTS (SELECT 1 FROM kwatch_first f WHERE f.event_id = o.$id::text)),
       (SELECT count(*) FROM kwatch_first f
         WHERE NOT EXISTS (SELECT 1 FROM $table o WHERE o.$id::text = f.event_id)),
       count(us),
       coalesce(percentile_disc(0.5) WITHIN GROUP (ORDER BY us), -1),
       coalesce(percentile_disc(0.99) WITHIN GROUP (ORDER BY us), -1),
       coalesce(max(us), -1),
       coalesce(array_to_json(percentile_disc(
           (SELECT array_agg(g / 100.0) FROM generate_series(1, 99) g) || ARRAY[0.995, 0.999]::float8[])
           WITHIN GROUP (ORDER BY us)), '[]')
  FROM lat;
SQL
        fail "loading the consumer's lines failed: $(cat "$T/kwatch.sql.out")"
    read -r CONS_LINES CONS_DUPS CONS_MISSING CONS_UNKNOWN CONS_N CONS_P50 CONS_P99 CONS_MAX \
        CONS_CDF <"$T/kwatch.sql.out"
}

# bench_outboxd_conf SLOT FILE [INI]: an outboxd configuration for SLOT
# (info logging: the benchmark measures the relay, not its debug output),
# INI's lines (e.g. an [outbox] section) added; [delivery] mode is
# $RELAY_MODE (default at_least_once). Uses $PG_CONNINFO, $PLUGIN,
# $KAFKA_BOOTSTRAP, $T and BENCH_KAFKA_EXTRA, BENCH_DELIVERY_EXTRA,
# BENCH_LOG_LEVEL.
bench_outboxd_conf() {
    local mode=${RELAY_MODE:-at_least_once}
    cat >"$2" <<INI
[postgres]
conninfo = $PG_CONNINFO
slot = $1
publication = outboxd_pub
plugin = $PLUGIN
create_slot = false
${3:-}

[kafka]
bootstrap.servers = $KAFKA_BOOTSTRAP
${BENCH_KAFKA_EXTRA:-}

[offsets]
file = $T/$1.offset

[delivery]
mode = $mode
$([[ $mode == exactly_once ]] && echo "${BENCH_DELIVERY_EXTRA:-}")

[log]
level = ${BENCH_LOG_LEVEL:-info}

[http]
listen = 127.0.0.1:0
INI
}
