# shellcheck shell=bash
# tests/bench/kwatch_lib.sh - the consumer end of the commit-to-consumer
# latency, for tests/bench/run.sh and tests/bench/peer.sh: a consumer
# (tests/kwatch.c) that records when each event id arrives, and the SQL
# that turns its lines into per-event latencies against the rows' commit
# timestamps (track_commit_timestamp = on). Sourced after tests/e2e/lib.sh
# ($T, $KAFKA_BOOTSTRAP, fail, info, E2E_BG_PIDS). KW_HEADER names the
# header carrying the event id (default event_id).

# start_kwatch TOPIC: starts the consumer (tests/kwatch.c) at the end of
# every partition of TOPIC, its lines in $T/kwatch.lines; returns once it
# is ready (everything produced from then on is seen); sets KWATCH_PID.
start_kwatch() {
    local i
    rm -f "$T/kwatch.ready"
    "$OUTBOXD_BUILD_DIR/tests/outboxd-kwatch" -b "$KAFKA_BOOTSTRAP" -t "$1" \
        --header "${KW_HEADER:-event_id}" --ready-file "$T/kwatch.ready" \
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
# first receive time minus its row's commit timestamp.
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
       coalesce(max(us), -1)
  FROM lat;
SQL
        fail "loading the consumer's lines failed: $(cat "$T/kwatch.sql.out")"
    read -r CONS_LINES CONS_DUPS CONS_MISSING CONS_UNKNOWN CONS_N CONS_P50 CONS_P99 CONS_MAX \
        <"$T/kwatch.sql.out"
}
