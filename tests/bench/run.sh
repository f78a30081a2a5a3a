#!/usr/bin/env bash
# tests/bench/run.sh - outboxd against the physical limit of logical decoding.
#
# The limit on a machine is how fast the walsender decodes a slot:
# pg_recvlogical writing the same stream to /dev/null does nothing beyond
# that. This script measures outboxd against it in one run, on a
# throw-away PostgreSQL 15 (track_commit_timestamp on) and the mock Kafka
# cluster (tests/e2e/lib.sh):
#
#  1. drain: per pair, two slots (one for pg_recvlogical, one for outboxd)
#     are created, THEN N outbox events are loaded (uuid event_id, 1,000
#     aggregate_ids, ~300-byte jsonb payload; half the events in 1-event
#     transactions, half in 10-event ones), so both slots decode identical
#     WAL. pg_recvlogical --endpos and outboxd (until its slot's
#     confirmed_flush_lsn reaches the same end LSN: every event ACKed,
#     acks=all, idempotence on) are timed one after the other, the order
#     alternating between pairs; each pair gets a fresh backlog.
#  2. steady state: pgbench commits outbox events at a fixed rate for a
#     fixed time while outboxd streams them; outboxd logs the commit-to-ACK
#     latency of every event at stop (p50/p99/max, src/base/latency.c) and its
#     CPU time (user+sys from /proc, all threads) is taken per 1,000 events.
#     Measured from outside as well: a consumer (tests/kwatch.c, assigned
#     at the end of every partition before pgbench starts, fetch.wait.max.ms
#     1) writes each message's event_id header and receive time; the lines
#     are COPYed into PostgreSQL and commit-to-consumer is, per event, the
#     first receive time minus pg_xact_commit_timestamp(xmin) of its row
#     (p50/p99 with percentile_disc, max). The run fails unless the
#     consumer saw every committed event; duplicates are counted. outboxd's
#     per-stage and per-broker lines (log_figures.sh) go into the JSON too,
#     when this outboxd prints them.
#     Before it, the floor: outboxd-kprobe (tests/kprobe.c), a bare
#     librdkafka producer with outboxd's producer settings, produces the
#     same rate to the same topic for the same time, once on the idle host
#     and once beside pgbench committing the same load into a table no slot
#     reads; its produce-to-ACK latency is what the cluster and the host
#     give any producer on this librdkafka.
#  3. memory: outboxd's peak RSS (VmHWM) in the drain, in steady state and
#     while relaying one transaction of BIG_TXN events.
#  4. every figure goes to a JSON file; a short table is printed.
#
# Usage: tests/bench/run.sh [--events N] [--pairs K] [--rate EV_PER_S]
#            [--seconds S] [--big-txn N] [--plugin pgoutput|wal2json]
#            [--out FILE] [--smoke] [--kafka mock|real] [--brokers N]
#            [--delivery at_least_once|exactly_once|both]
#   --delivery MODE: outboxd's [delivery] mode (at_least_once). both: each
#            drain pair times pg_recvlogical, outboxd at_least_once and
#            outboxd exactly_once on identical WAL (three slots, the order
#            rotating between pairs), and the steady state runs once per
#            mode, at_least_once first; the report gives exactly_once :
#            at_least_once for drain rate, CPU per event and latency.
#            exactly_once needs --kafka real (the mock cluster cannot judge
#            transactions). BENCH_DELIVERY_EXTRA: lines added to the
#            [delivery] section (the batching knobs, e.g.
#            $'txn_max_ms = 1s').
#   --brokers N: the cluster's size (1). On the mock, outbox.event.Order
#            is created with 4 partitions whose leaders are put on the
#            brokers in turn (partition p on broker p % N + 1; checked with
#            kcat -L): N brokers means N leaders, N connections and N
#            produce streams. The mock's replication factor, min(N, 3), is
#            only what its metadata says: it keeps one copy, on the
#            leader, and answers acks=all as soon as the leader appended
#            the batch, so on the mock RF and acks cost nothing.
#   --kafka real: against a real Apache Kafka 4.4.0 (tests/kafka/kafka.sh,
#            E2E_KAFKA=real in lib.sh) instead of the mock cluster: one
#            broker (RF 1), or with --brokers 3 a controller and three
#            brokers (RF 3, min.insync.replicas 2; outboxd produces with
#            acks=all, so every ACK waits for the in-sync replicas). The
#            topic is created before the first measurement (4 partitions)
#            by one marker message kcat sends to it.
#   Run anything with --brokers 3 or --kafka real under
#   `flock /tmp/outboxd-heavy.lock` on a shared machine.
#   --smoke: 20,000 events, 1 pair, 5 s at 1,000 events/s, a 20,000-event
#            transaction: proves the benchmark works (CI), measures nothing.
# Defaults: 500,000 events, 3 pairs, 5,000 events/s for 30 s, a
# 500,000-event transaction, pgoutput, JSON to build/bench-<plugin>.json.
# Environment: OUTBOXD_BUILD_DIR (default build/), as for the e2e tests;
# BENCH_KAFKA_EXTRA: lines added to outboxd's [kafka] section (to try
# producer settings, e.g. $'linger.ms = 1'; the floor probe gets them as
# -X); BENCH_WRAPPER: a command outboxd runs under (e.g. "valgrind --tool=callgrind"; figures then
# describe the tool, not outboxd); BENCH_LOG_LEVEL (info).
#
# The script fails (exit 1) when outboxd does not deliver every event it
# should (its produced/ACKed counts against the rows loaded), or when the
# consumer did not see every event of the steady state, so a fast number
# can never come from dropped events.

set -Eeuo pipefail

EVENTS=500000 PAIRS=3 RATE=5000 SECONDS_STEADY=30 BIG_TXN=500000 PLUGIN=pgoutput
OUT= SMOKE=0 KAFKA=mock BROKERS=1 DELIVERY=at_least_once
while [[ $# -gt 0 ]]; do
    case $1 in
    --events) EVENTS=$2; shift 2 ;;
    --pairs) PAIRS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --seconds) SECONDS_STEADY=$2; shift 2 ;;
    --big-txn) BIG_TXN=$2; shift 2 ;;
    --plugin) PLUGIN=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --kafka) KAFKA=$2; shift 2 ;;
    --brokers) BROKERS=$2; shift 2 ;;
    --delivery) DELIVERY=$2; shift 2 ;;
    --smoke) SMOKE=1 EVENTS=20000 PAIRS=1 RATE=1000 SECONDS_STEADY=5 BIG_TXN=20000; shift ;;
    -h | --help) sed -n '2,/^$/p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in EVENTS PAIRS RATE SECONDS_STEADY BIG_TXN BROKERS; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "run.sh: $v must be a number, got '${!v}'" >&2; exit 2; }
done
[[ $PLUGIN == pgoutput || $PLUGIN == wal2json ]] ||
    { echo "run.sh: --plugin must be pgoutput or wal2json" >&2; exit 2; }

[[ $KAFKA == mock || $KAFKA == real ]] ||
    { echo "run.sh: --kafka must be mock or real" >&2; exit 2; }
((BROKERS >= 1)) || { echo "run.sh: --brokers must be at least 1" >&2; exit 2; }
case $DELIVERY in
at_least_once | exactly_once) MODES=("$DELIVERY") ;;
both) MODES=(at_least_once exactly_once) ;;
*) echo "run.sh: --delivery must be at_least_once, exactly_once or both" >&2; exit 2 ;;
esac
[[ $DELIVERY == at_least_once || $KAFKA == real ]] ||
    { echo "run.sh: --delivery $DELIVERY needs --kafka real" >&2; exit 2; }
# The mode of the relay started next (bench_outboxd_conf).
RELAY_MODE=${MODES[0]}
if [[ $KAFKA == real ]]; then
    export E2E_KAFKA=real E2E_KAFKA_BROKERS=$BROKERS KAFKA_PARTITIONS=4
fi

export OUTBOXD_TEST_PLUGIN=$PLUGIN
# The whole benchmark is one "test" for lib.sh's watchdog.
export E2E_TIMEOUT=${E2E_TIMEOUT:-5400}
# shellcheck source=../e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
# shellcheck source=log_figures.sh
source "$(dirname "${BASH_SOURCE[0]}")/log_figures.sh"
# shellcheck source=bench_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
: "${OUT:=$OUTBOXD_BUILD_DIR/bench-$PLUGIN.json}"

e2e_init bench
CLK_TCK=$(getconf CLK_TCK)
RESULTS=$T/results.jsonl # one JSON object per measurement
: >"$RESULTS"

now_s() { date +%s.%N; }
# cpu_ticks PID: user+sys of every thread, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# ---------------------------------------------------------------- schema

bench_pg_start
COLS="event_id, aggregate_type, aggregate_id, event_type, payload"
bench_schema public.outbox_events "$COLS" | psql_q >/dev/null
PAYLOAD_BYTES=$(psql_q "SELECT octet_length(bench_payload(123456)::text)")
info "payload: $PAYLOAD_BYTES bytes of jsonb text"
broker_start --brokers "$BROKERS"
if ((BROKERS == 1)); then CLUSTER="kafka $KAFKA (1 broker)"; else CLUSTER="kafka $KAFKA ($BROKERS brokers)"; fi
# The topic exists before the first event, as in production (auto-creating
# it would put the creation's delay into the first events' latency).
if [[ $KAFKA == real ]]; then
    # A real broker auto-creates it (num.partitions 4, RF = brokers) on a
    # first message; outboxd's counts, not the topic, are checked below.
    echo bench-marker | kcat -P -b "$KAFKA_BOOTSTRAP" -t outbox.event.Order -k bench-marker \
        2>"$T/kcat.err" || fail "kcat could not create outbox.event.Order: $(cat "$T/kcat.err")"
    parts=$(kcat -L -b "$KAFKA_BOOTSTRAP" -t outbox.event.Order 2>/dev/null | grep -c '^ *partition ' || true)
    [[ $parts == 4 ]] || fail "outbox.event.Order has '$parts' partitions on real Kafka, expected 4"
    info "real Kafka: $BROKERS broker(s), outbox.event.Order with 4 partitions"
else
    broker_cmd "create outbox.event.Order 4"
    for p in 0 1 2 3; do broker_cmd "leader outbox.event.Order $p $((p % BROKERS + 1))"; done
fi
# The partitions' leaders, from the cluster's metadata: on as many brokers
# as there are (up to the 4 partitions), or the figures would describe a
# smaller cluster.
kcat -L -b "$KAFKA_BOOTSTRAP" -t outbox.event.Order >"$T/kcat.meta" 2>"$T/kcat.err" ||
    fail "kcat -L failed: $(cat "$T/kcat.err")"
LEADERS=$(sed -nE 's/^ *partition ([0-9]+), leader (-?[0-9]+),.*/\1:\2/p' "$T/kcat.meta" |
    sort -n | tr '\n' ' ')
N_LEADERS=$(awk -v RS=' ' -F: 'NF == 2 && $2 >= 0 && !($2 in s) { s[$2]; n++ } END { print n + 0 }' \
    <<<"$LEADERS")
WANT=$((BROKERS < 4 ? BROKERS : 4))
((N_LEADERS == WANT)) ||
    fail "outbox.event.Order's leaders (partition:broker) '$LEADERS' are on $N_LEADERS brokers, not $WANT: $(cat "$T/kcat.meta")"
info "$CLUSTER: partition leaders (partition:broker) $LEADERS"

# ---------------------------------------------------------------- helpers

create_slot() {
    psql_q "SELECT 1 FROM pg_create_logical_replication_slot('$1', '$PLUGIN')" >/dev/null
}
drop_slot() { psql_q "SELECT pg_drop_replication_slot('$1')" >/dev/null; }

# recvlogical_opts: the same plugin options outboxd asks for (src/stream/stream.c).
recvlogical_opts() {
    if [[ $PLUGIN == pgoutput ]]; then
        echo "-o proto_version=1 -o publication_names=outboxd_pub"
    else
        echo "-o format-version=2 -o include-transaction=true -o include-lsn=true" \
            "-o include-timestamp=true -o include-types=false" \
            "-o add-tables=public.outbox_events -o actions=insert"
    fi
}

# run_recvlogical SLOT END_LSN: times pg_recvlogical from start to --endpos;
# sets SECS and RL_CPU_S.
run_recvlogical() {
    local slot=$1 end=$2 tf=$T/time.$1
    # shellcheck disable=SC2046
    { TIMEFORMAT='%3R %3U %3S'; time "$PG_BINDIR/pg_recvlogical" -d "$PG_CONNINFO" \
        -S "$slot" --start -E "$end" --no-loop -f /dev/null $(recvlogical_opts) \
        2>"$T/recvlogical.$slot.log"; } 2>"$tf" ||
        fail "pg_recvlogical failed: $(cat "$T/recvlogical.$slot.log")"
    read -r SECS u s <"$tf"
    RL_CPU_S=$(echo "$u + $s" | bc -l)
}

# wait_slot_at SLOT LSN: until SLOT's confirmed_flush_lsn >= LSN; prints
# the server's clock then (slot_wait_for). Run it before starting the relay.
wait_slot_at() { slot_wait_for "$1" "confirmed_flush_lsn >= '$2'::pg_lsn"; }

# start_relay SLOT: starts outboxd on SLOT in the background; sets RELAY_PID.
start_relay() {
    bench_outboxd_conf "$1" "$T/$1.ini"
    # shellcheck disable=SC2086
    ${BENCH_WRAPPER:-} "$OUTBOXD_BUILD_DIR/outboxd" -c "$T/$1.ini" >"$T/outboxd.$1.log" 2>&1 </dev/null &
    RELAY_PID=$!
    E2E_BG_PIDS+=("$RELAY_PID")
}

# stop_relay SLOT: SIGTERM, expects exit 0; checks that it produced and had
# ACKed exactly EXPECT events; sets LAT_* from its latency line (if any),
# STAGES and BROKERS_JSON from its stage and broker lines (log_figures.sh).
stop_relay() {
    local slot=$1 rc=0 line
    kill -TERM "$RELAY_PID"
    wait "$RELAY_PID" || rc=$?
    [[ $rc -eq 0 ]] || fail "outboxd on $slot exited with $rc: $(tail -5 "$T/outboxd.$slot.log")"
    line=$(grep -o 'produced [0-9]* events, [0-9]* ACKed' "$T/outboxd.$slot.log" | tail -1)
    [[ "$line" == "produced $EXPECT events, $EXPECT ACKed" ]] ||
        fail "outboxd on $slot: '$line', expected $EXPECT events produced and ACKed"
    LAT_P50= LAT_P99= LAT_MAX= LAT_N=
    line=$(grep -o 'latency over [0-9]* events: p50 [0-9]* us, p99 [0-9]* us, max [0-9]* us' \
        "$T/outboxd.$slot.log" | tail -1 || true)
    if [[ -n "$line" ]]; then
        read -r LAT_N LAT_P50 LAT_P99 LAT_MAX < <(echo "$line" |
            sed -E 's/latency over ([0-9]+) events: p50 ([0-9]+) us, p99 ([0-9]+) us, max ([0-9]+) us/\1 \2 \3 \4/')
    fi
    STAGES=$(stages_json "$T/outboxd.$slot.log")
    BROKERS_JSON=$(brokers_json "$T/outboxd.$slot.log")
}

# run_outboxd SLOT END_LSN: times outboxd from start until its slot has
# confirmed END_LSN; sets SECS, STREAM_S (the part after its start:
# stream_start_s), OB_CPU_S, OB_RSS_KB.
run_outboxd() {
    local slot=$1 end=$2 t0 t1 waiter ticks
    wait_slot_at "$slot" "$end" >"$T/done.$slot" 2>&1 &
    waiter=$!
    sleep 0.3 # the waiter is connected and polling before the clock starts
    t0=$(now_s)
    start_relay "$slot"
    wait "$waiter" || fail "waiting for slot $slot: $(cat "$T/done.$slot")"
    t1=$(cat "$T/done.$slot")
    ticks=$(cpu_ticks "$RELAY_PID")
    OB_RSS_KB=$(peak_rss_kb "$RELAY_PID")
    stop_relay "$slot"
    SECS=$(echo "$t1 - $t0" | bc -l)
    OB_CPU_S=$(echo "$ticks / $CLK_TCK" | bc -l)
    STREAM_S=$(echo "$t1 - $(stream_start_s "$T/outboxd.$slot.log")" | bc -l)
}

# stream_start_s LOG: the wall-clock time (epoch seconds) of the first
# "streaming slot" line in outboxd's LOG: its start (connections, and in
# exactly_once init_transactions and the progress topic's read) is over.
stream_start_s() {
    local ts
    ts=$(grep -m1 -o '^[0-9T:.-]*Z .* INFO: streaming slot' "$1" | cut -d' ' -f1) ||
        fail "no 'streaming slot' line in $1"
    date -d "$ts" +%s.%N
}

# load_backlog N BASE [one]: loads N events; prints the end LSN.
load_backlog() {
    # Asynchronous commit: the load does not wait for a WAL flush per
    # transaction (42 s for 200,000 events otherwise); the WAL it writes,
    # and so what the slots decode, is the same.
    if [[ ${3:-} == one ]]; then
        psql_q "SET synchronous_commit = off; CALL bench_load_one_txn($1, $2)" >/dev/null
    else
        psql_q "SET synchronous_commit = off; CALL bench_load($1, $2)" >/dev/null
    fi
    psql_q "SELECT pg_current_wal_lsn()"
}

# settle: VACUUM (ANALYZE) of the outbox table and a CHECKPOINT after a
# load, before anything is timed. Otherwise autovacuum (the table just
# took N inserts) and the load's dirty buffers are written while the first
# reader of the pair runs, and slow whoever happens to be first. Their WAL
# lies past the end LSN taken before, so no slot decodes it in the pair.
settle() {
    psql_q "VACUUM (ANALYZE) public.outbox_events" >/dev/null
    psql_q "CHECKPOINT" >/dev/null
}

# ---------------------------------------------------------------- 1. drain

BASE=0
# Warm-up: each mode's outboxd drains 1,000 events once, untimed, so that
# what a production cluster has after outboxd's first start exists before
# the clock runs: the transaction coordinator's log (__transaction_state,
# made at the first transactional client), the progress topic, the
# producer-id state. Without it the first timed run pays for creating them.
step "warm-up: each mode drains 1,000 events, untimed"
for mode in "${MODES[@]}"; do create_slot "bench_warm_${mode}"; done
END_LSN=$(load_backlog 1000 "$BASE")
BASE=$((BASE + 1000)) EXPECT=1000
for mode in "${MODES[@]}"; do
    RELAY_MODE=$mode
    run_outboxd "bench_warm_${mode}" "$END_LSN"
    drop_slot "bench_warm_${mode}"
done
RELAY_MODE=${MODES[0]}
# Who is timed in each pair: rl = pg_recvlogical, ob = outboxd in the
# first mode, oe = outboxd exactly_once (--delivery both).
WHO=(rl ob)
[[ $DELIVERY == both ]] && WHO+=(oe)
for ((pair = 1; pair <= PAIRS; pair++)); do
    step "drain pair $pair/$PAIRS: $EVENTS events"
    psql_q "TRUNCATE public.outbox_events" >/dev/null
    for who in "${WHO[@]}"; do create_slot "bench_${who}_$pair"; done
    t0=$(now_s)
    END_LSN=$(load_backlog "$EVENTS" "$BASE")
    LOAD_S=$(echo "$(now_s) - $t0" | bc -l)
    settle
    BASE=$((BASE + EVENTS))
    EXPECT=$EVENTS
    info "loaded in ${LOAD_S%???????}s, end LSN $END_LSN"
    # Rotate which goes first: page cache and WAL files warm up for the
    # later ones, and that must not always favour the same one.
    order=
    for ((k = 0; k < ${#WHO[@]}; k++)); do order+="${WHO[(pair - 1 + k) % ${#WHO[@]}]} "; done
    order=${order% }
    for who in $order; do
        case $who in
        rl)
            run_recvlogical "bench_rl_$pair" "$END_LSN"
            RL_S=$SECS RL_CPU=$RL_CPU_S
            info "pg_recvlogical: ${RL_S}s, $(echo "$EVENTS / $RL_S" | bc) events/s"
            ;;
        ob)
            RELAY_MODE=${MODES[0]}
            run_outboxd "bench_ob_$pair" "$END_LSN"
            OB_S=$SECS OB_STREAM_S=$STREAM_S OB_CPU=$OB_CPU_S OB_RSS=$OB_RSS_KB
            info "outboxd ($RELAY_MODE): ${OB_S}s, $(echo "$EVENTS / $OB_S" | bc) events/s," \
                "cpu ${OB_CPU}s, peak RSS ${OB_RSS} kB"
            ;;
        oe)
            RELAY_MODE=exactly_once
            run_outboxd "bench_oe_$pair" "$END_LSN"
            OE_S=$SECS OE_STREAM_S=$STREAM_S OE_CPU=$OB_CPU_S OE_RSS=$OB_RSS_KB
            info "outboxd (exactly_once): ${OE_S}s, $(echo "$EVENTS / $OE_S" | bc) events/s," \
                "cpu ${OE_CPU}s, peak RSS ${OE_RSS} kB"
            ;;
        esac
    done
    for who in "${WHO[@]}"; do drop_slot "bench_${who}_$pair"; done
    eos=()
    [[ $DELIVERY == both ]] &&
        eos=(eos_s="$OE_S" eos_stream_s="$OE_STREAM_S" eos_cpu_s="$OE_CPU" eos_peak_rss_kb="$OE_RSS")
    record kind='"drain"' pair="$pair" events="$EVENTS" first="\"${order%% *}\"" \
        recvlogical_s="$RL_S" outboxd_s="$OB_S" outboxd_stream_s="$OB_STREAM_S" \
        recvlogical_cpu_s="$RL_CPU" outboxd_cpu_s="$OB_CPU" outboxd_peak_rss_kb="$OB_RSS" \
        "${eos[@]}"
done

# ---------------------------------------------------------------- 2. steady

psql_q "TRUNCATE public.outbox_events" >/dev/null
bench_writer public.outbox_events "$COLS" Order
TPS=$(bench_tps "$RATE")
# The same writer into a table no slot reads (the floor's host load).
sed 's/public\.outbox_events/public.bench_sink/' "$T/one.sql" >"$T/sink_one.sql"
sed 's/public\.outbox_events/public.bench_sink/' "$T/ten.sql" >"$T/sink_ten.sql"

# The floor under the latency, on the same cluster and the same topic:
# outboxd-kprobe (tests/kprobe.c) producing RATE messages/s, keyed over
# 1,000 keys, with outboxd's producer settings. Once on the idle host, once
# beside pgbench committing the steady state's load into bench_sink (no
# slot exists then: PostgreSQL writes and commits, nothing decodes). What
# the probe cannot reach, no producer on this librdkafka can.
# The probe gets BENCH_KAFKA_EXTRA's "name = value" lines too (-X), so a
# producer setting tried on outboxd is tried on its floor as well.
PROBE_X=()
while IFS= read -r kv; do
    [[ $kv =~ ^[[:space:]]*([^=[:space:]]+)[[:space:]]*=[[:space:]]*(.*[^[:space:]])[[:space:]]*$ ]] &&
        PROBE_X+=(-X "${BASH_REMATCH[1]}=${BASH_REMATCH[2]}")
done <<<"${BENCH_KAFKA_EXTRA:-}"
run_probe() { # NAME [OPTION...]: one probe run with OPTIONs, its figures recorded as kind "probe"; sets PROBE_ACKED
    local name=$1 line sent acked rate p50 p99 max cpu
    shift
    line=$("$OUTBOXD_BUILD_DIR/tests/outboxd-kprobe" -b "$KAFKA_BOOTSTRAP" -t outbox.event.Order \
        --rate "$RATE" --seconds "$SECONDS_STEADY" --bytes "$PAYLOAD_BYTES" \
        ${PROBE_X[@]+"${PROBE_X[@]}"} "$@" 2>"$T/kprobe.err") ||
        fail "outboxd-kprobe failed: $(tail -3 "$T/kprobe.err") $line"
    info "floor ($name): $line"
    # "kprobe sent N acked N failed F seconds S rate R p50_us A p99_us B
    # max_us C cpu_us_per_msg D" (tests/kprobe.c)
    read -r _ _ sent _ acked _ _ _ _ _ rate _ p50 _ p99 _ max _ cpu <<<"$line"
    PROBE_ACKED=$acked
    record kind='"probe"' name="\"$name\"" sent="$sent" acked="$acked" rate="$rate" \
        p50_us="$p50" p99_us="$p99" max_us="$max" cpu_us_per_msg="$cpu"
}
step "floor: outboxd-kprobe at $RATE messages/s for ${SECONDS_STEADY}s, idle, then beside the writer"
run_probe idle
psql_q "CREATE TABLE public.bench_sink (LIKE public.outbox_events INCLUDING DEFAULTS)" >/dev/null
"$PG_BINDIR/pgbench" -n -c 4 -j 2 -R "$TPS" -T "$SECONDS_STEADY" \
    -f "$T/sink_one.sql@10" -f "$T/sink_ten.sql@1" >"$T/pgbench_sink.log" 2>&1 &
SINK_PID=$!
E2E_BG_PIDS+=("$SINK_PID")
run_probe beside_writer
wait "$SINK_PID" || fail "pgbench (bench_sink) failed: $(tail -5 "$T/pgbench_sink.log")"
psql_q "DROP TABLE public.bench_sink" >/dev/null

# The third floor, beside everything the relay's steady state has around
# it but the relay: pgbench committing into the outbox table itself, the
# walsender decoding those commits for pg_recvlogical (to /dev/null), and
# the consumer (kwatch) reading the topic the probe writes. What is left
# between this floor and outboxd is outboxd's own work and CPU, and the
# stream's commit-to-receive.
step "floor: outboxd-kprobe beside the writer, the walsender and the consumer"
psql_q "TRUNCATE public.outbox_events" >/dev/null
create_slot bench_floor
# shellcheck disable=SC2046
"$PG_BINDIR/pg_recvlogical" -d "$PG_CONNINFO" -S bench_floor --start -f /dev/null \
    $(recvlogical_opts) 2>"$T/recvlogical.bench_floor.log" &
FLOOR_RL_PID=$!
E2E_BG_PIDS+=("$FLOOR_RL_PID")
KW_HEADER=event_id start_kwatch outbox.event.Order
"$PG_BINDIR/pgbench" -n -c 4 -j 2 -R "$TPS" -T "$SECONDS_STEADY" \
    -f "$T/one.sql@10" -f "$T/ten.sql@1" >"$T/pgbench_floor.log" 2>&1 &
SINK_PID=$!
E2E_BG_PIDS+=("$SINK_PID")
run_probe beside_relay_load --header event_id
wait "$SINK_PID" || fail "pgbench (floor beside the relay's load) failed: $(tail -5 "$T/pgbench_floor.log")"
stop_kwatch "$PROBE_ACKED"
kill -TERM "$FLOOR_RL_PID" 2>/dev/null || true
wait "$FLOOR_RL_PID" || true
slot_wait_for bench_floor "NOT active" >/dev/null # the walsender lets go of it
drop_slot bench_floor
psql_q "TRUNCATE public.outbox_events" >/dev/null

# steady_run MODE: the steady state with outboxd in [delivery] mode MODE.
steady_run() {
    RELAY_MODE=$1
    local slot=bench_steady_$1
    step "steady state ($1): $RATE events/s for ${SECONDS_STEADY}s"
    psql_q "TRUNCATE public.outbox_events" >/dev/null
    local i
    create_slot "$slot"
    start_relay "$slot"
    for ((i = 0; i < 100; i++)); do
        [[ "$(psql_q "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'")" == t ]] && break
        sleep 0.1
    done
    start_kwatch outbox.event.Order
    sleep 1
    CPU0=$(cpu_ticks "$RELAY_PID")
    "$PG_BINDIR/pgbench" -n -c 4 -j 2 -R "$TPS" -T "$SECONDS_STEADY" \
        -f "$T/one.sql@10" -f "$T/ten.sql@1" >"$T/pgbench.log" 2>&1 ||
        fail "pgbench failed: $(tail -5 "$T/pgbench.log")"
    STEADY_EVENTS=$(psql_q "SELECT count(*) FROM public.outbox_events")
    wait_slot_at "$slot" "$(psql_q "SELECT pg_current_wal_lsn()")" >/dev/null
    CPU1=$(cpu_ticks "$RELAY_PID")
    STEADY_RSS=$(peak_rss_kb "$RELAY_PID")
    local anon file threads
    read -r anon file threads <<<"$(rss_parts "$RELAY_PID")"
    EXPECT=$STEADY_EVENTS
    stop_kwatch "$STEADY_EVENTS"
    stop_relay "$slot"
    drop_slot "$slot"
    [[ "$LAT_N" == "$STEADY_EVENTS" ]] ||
        fail "latency line covers '$LAT_N' events, expected $STEADY_EVENTS"
    consumer_latency
    # A latency from a partial set would say nothing: every committed event
    # must have reached the consumer, and nothing else may have.
    ((CONS_MISSING == 0)) ||
        fail "the consumer saw $((STEADY_EVENTS - CONS_MISSING)) of the $STEADY_EVENTS committed events ($CONS_MISSING never arrived; $T/kwatch.lines)"
    ((CONS_UNKNOWN == 0)) || fail "the consumer saw $CONS_UNKNOWN event ids that are not in the outbox"
    [[ $CONS_N == "$STEADY_EVENTS" ]] ||
        fail "only $CONS_N of $STEADY_EVENTS events have a commit timestamp (track_commit_timestamp?)"
    ((CONS_DUPS == 0)) || info "consumer: $CONS_DUPS duplicate deliveries (latency from each event's first)"
    STEADY_CPU_S=$(echo "($CPU1 - $CPU0) / $CLK_TCK" | bc -l)
    ACHIEVED=$(echo "$STEADY_EVENTS / $SECONDS_STEADY" | bc -l)
    LATE=$(grep -oE 'number of transactions above the [^:]*: [0-9]+' "$T/pgbench.log" || true)
    info "steady ($1): $STEADY_EVENTS events (${ACHIEVED%.*}/s), commit-to-ACK p50 ${LAT_P50}us" \
        "p99 ${LAT_P99}us max ${LAT_MAX}us; commit-to-consumer p50 ${CONS_P50}us p99 ${CONS_P99}us" \
        "max ${CONS_MAX}us; cpu ${STEADY_CPU_S}s, peak RSS ${STEADY_RSS} kB"
    record kind='"steady"' mode="\"$1\"" target_rate="$RATE" seconds="$SECONDS_STEADY" events="$STEADY_EVENTS" \
        achieved_rate="$ACHIEVED" p50_us="$LAT_P50" p99_us="$LAT_P99" max_us="$LAT_MAX" \
        consumer_events="$CONS_N" consumer_duplicates="$CONS_DUPS" consumer_p50_us="$CONS_P50" \
        consumer_p99_us="$CONS_P99" consumer_max_us="$CONS_MAX" \
        stages="$STAGES" brokers="$BROKERS_JSON" \
        outboxd_cpu_s="$STEADY_CPU_S" outboxd_peak_rss_kb="$STEADY_RSS" \
        outboxd_rss_anon_kb="$anon" outboxd_rss_file_kb="$file" outboxd_threads="$threads"
}
for mode in "${MODES[@]}"; do steady_run "$mode"; done

# ---------------------------------------------------------------- 3. one big txn

RELAY_MODE=${MODES[0]}
if ((BIG_TXN > 0)); then
    step "one transaction of $BIG_TXN events ($RELAY_MODE)"
    psql_q "TRUNCATE public.outbox_events" >/dev/null
    create_slot bench_big
    END_LSN=$(load_backlog "$BIG_TXN" 0 one)
    EXPECT=$BIG_TXN
    run_outboxd bench_big "$END_LSN"
    drop_slot bench_big
    info "big transaction: ${SECS}s, cpu ${OB_CPU_S}s, peak RSS ${OB_RSS_KB} kB"
    record kind='"big_txn"' events="$BIG_TXN" outboxd_s="$SECS" outboxd_cpu_s="$OB_CPU_S" \
        outboxd_peak_rss_kb="$OB_RSS_KB"
fi

# ---------------------------------------------------------------- report

jq -s --arg plugin "$PLUGIN" --argjson payload "$PAYLOAD_BYTES" \
    --arg kafka "$KAFKA" --argjson brokers "$BROKERS" --arg cluster "$CLUSTER" \
    --arg host "$(uname -n)" --argjson cores "$(nproc)" --arg smoke "$SMOKE" \
    --arg delivery "$DELIVERY" --arg mode0 "${MODES[0]}" '
  def median: sort | if length == 0 then null
                     elif length % 2 == 1 then .[length / 2 | floor]
                     else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  (map(select(.kind == "drain")) | map(. + {
      recvlogical_events_per_s: (.events / .recvlogical_s),
      outboxd_events_per_s: (.events / .outboxd_s),
      ratio: (.recvlogical_s / .outboxd_s),
      outboxd_cpu_us_per_event: (.outboxd_cpu_s * 1e6 / .events),
      recvlogical_cpu_us_per_event: (.recvlogical_cpu_s * 1e6 / .events),
      cpu_vs_recvlogical: (.outboxd_cpu_s / .recvlogical_cpu_s)}
      + (if .eos_s then {eos_events_per_s: (.events / .eos_s),
                         eos_cpu_us_per_event: (.eos_cpu_s * 1e6 / .events),
                         eos_vs_alo_rate: (.outboxd_s / .eos_s),
                         eos_vs_alo_stream_rate: (.outboxd_stream_s / .eos_stream_s),
                         eos_vs_alo_cpu: (.eos_cpu_s / .outboxd_cpu_s)} else {} end))) as $drain
  | (map(select(.kind == "steady"))
     | map(. + {outboxd_cpu_ms_per_1000_events: (.outboxd_cpu_s * 1e6 / .events)})) as $steady
  | {plugin: $plugin, smoke: ($smoke == "1"), cores: $cores, host: $host,
     kafka: $kafka, brokers: $brokers, cluster: $cluster, delivery: $delivery,
     payload_bytes: $payload,
     drain: {pairs: $drain,
             median_ratio: ($drain | map(.ratio) | median),
             median_outboxd_events_per_s: ($drain | map(.outboxd_events_per_s) | median),
             median_recvlogical_events_per_s: ($drain | map(.recvlogical_events_per_s) | median),
             median_outboxd_cpu_us_per_event: ($drain | map(.outboxd_cpu_us_per_event) | median),
             median_cpu_vs_recvlogical: ($drain | map(.cpu_vs_recvlogical) | median),
             peak_rss_kb: ($drain | map(.outboxd_peak_rss_kb) | max)},
     steady: ($steady | map(select(.mode == $mode0))[0]),
     exactly_once: (if $delivery != "both" then null else
       ($steady | map(select(.mode == "exactly_once"))[0]) as $se
       | ($steady | map(select(.mode == "at_least_once"))[0]) as $sa
       | {drain_median_events_per_s: ($drain | map(.eos_events_per_s) | median),
          drain_median_cpu_us_per_event: ($drain | map(.eos_cpu_us_per_event) | median),
          drain_peak_rss_kb: ($drain | map(.eos_peak_rss_kb) | max),
          drain_rate_vs_alo: ($drain | map(.eos_vs_alo_rate) | median),
          drain_stream_rate_vs_alo: ($drain | map(.eos_vs_alo_stream_rate) | median),
          drain_median_start_s: ($drain | map(.eos_s - .eos_stream_s) | median),
          alo_drain_median_start_s: ($drain | map(.outboxd_s - .outboxd_stream_s) | median),
          drain_cpu_vs_alo: ($drain | map(.eos_vs_alo_cpu) | median),
          steady: $se,
          steady_cpu_vs_alo: ($se.outboxd_cpu_s / $sa.outboxd_cpu_s),
          consumer_p50_vs_alo: ($se.consumer_p50_us / $sa.consumer_p50_us),
          consumer_p99_vs_alo: ($se.consumer_p99_us / $sa.consumer_p99_us)} end),
     floor: (map(select(.kind == "probe")) | map({key: .name, value: del(.kind, .name)})
             | from_entries),
     big_txn: (map(select(.kind == "big_txn"))[0])}' "$RESULTS" >"$OUT"

jq -r '
  def ms: if . == null then "n/a" else "\(. / 1000) ms" end;
  def us: if . == null then "n/a" else "\(.) us" end;
  "\(.cluster)  plugin \(.plugin)  payload \(.payload_bytes) B  cores \(.cores)\(if .smoke then "  (SMOKE: sizes too small to mean anything)" else "" end)",
  "drain pair  events   pg_recvlogical ev/s   outboxd ev/s   ratio   outboxd cpu us/ev   (pg_recvlogical cpu)   peak RSS kB",
  (.drain.pairs[] | "  \(.pair) (\(.first) first)  \(.events)   \(.recvlogical_events_per_s | floor)   \(.outboxd_events_per_s | floor)   \(.ratio * 1000 | round / 1000)   \(.outboxd_cpu_us_per_event * 100 | round / 100)   (\(.recvlogical_cpu_us_per_event * 100 | round / 100))   \(.outboxd_peak_rss_kb)"),
  (if .drain.median_ratio then "  median ratio \(.drain.median_ratio * 1000 | round / 1000), median cpu \(.drain.median_outboxd_cpu_us_per_event * 100 | round / 100) us/event, \(.drain.median_cpu_vs_recvlogical * 100 | round / 100) x pg_recvlogical cpu" else empty end),
  "steady \(.steady.achieved_rate | floor) ev/s for \(.steady.seconds)s: commit-to-ACK p50 \(.steady.p50_us / 1000) ms, p99 \(.steady.p99_us / 1000) ms, max \(.steady.max_us / 1000) ms; commit-to-consumer p50 \(.steady.consumer_p50_us / 1000) ms, p99 \(.steady.consumer_p99_us / 1000) ms, max \(.steady.consumer_max_us / 1000) ms (\(.steady.consumer_events) events, \(.steady.consumer_duplicates) duplicates); cpu \(.steady.outboxd_cpu_ms_per_1000_events * 100 | round / 100) ms per 1000 events; peak RSS \(.steady.outboxd_peak_rss_kb) kB (at the end: anon \(.steady.outboxd_rss_anon_kb // "?") kB, file \(.steady.outboxd_rss_file_kb // "?") kB, \(.steady.outboxd_threads // "?") threads)",
  (.floor | to_entries[] | "  floor (outboxd-kprobe, \(.key)): \(.value.rate | floor) msg/s, produce-to-ACK p50 \(.value.p50_us | ms), p99 \(.value.p99_us | ms), max \(.value.max_us | ms); cpu \(.value.cpu_us_per_msg) us per message"),
  (.steady.stages | to_entries[] | "  stage \(.key) over \(.value.n) \(if .key == "ack-to-confirm" then "transactions" else "events" end): p50 \(.value.p50_us | ms), p99 \(.value.p99_us | ms), max \(.value.max_us | ms)"),
  (.steady.brokers[] | "  broker \(.name) over \(.windows) windows: rtt avg \(.rtt_avg_us | us) p99 \(.rtt_p99_us | us); int_latency avg \(.int_latency_avg_us | us) p99 \(.int_latency_p99_us | us); outbuf_latency avg \(.outbuf_latency_avg_us | us) p99 \(.outbuf_latency_p99_us | us); produce requests \(.produce_requests // "n/a"), bytes per request \(.bytes_per_request // "n/a"); thread wake-ups \(.thread_wakeups // "n/a")"),
  (if .exactly_once then "exactly_once : at_least_once (same run): drain rate \(.exactly_once.drain_rate_vs_alo * 1000 | round / 1000) (after the start: \(.exactly_once.drain_stream_rate_vs_alo * 1000 | round / 1000); start \(.exactly_once.drain_median_start_s * 1000 | round) ms against \(.exactly_once.alo_drain_median_start_s * 1000 | round) ms), drain cpu per event \(.exactly_once.drain_cpu_vs_alo * 1000 | round / 1000) (\(.exactly_once.drain_median_cpu_us_per_event * 100 | round / 100) us/event, \(.exactly_once.drain_median_events_per_s | floor) ev/s); steady \(.exactly_once.steady.achieved_rate | floor) ev/s: cpu \(.exactly_once.steady_cpu_vs_alo * 1000 | round / 1000), commit-to-consumer p50 \(.exactly_once.steady.consumer_p50_us / 1000) ms (\(.exactly_once.consumer_p50_vs_alo * 100 | round / 100)x), p99 \(.exactly_once.steady.consumer_p99_us / 1000) ms (\(.exactly_once.consumer_p99_vs_alo * 100 | round / 100)x), \(.exactly_once.steady.consumer_duplicates) duplicates" else empty end),
  (if .big_txn then "one transaction of \(.big_txn.events) events: \(.big_txn.outboxd_s * 100 | round / 100)s, peak RSS \(.big_txn.outboxd_peak_rss_kb) kB" else empty end)
' "$OUT"
# Every figure the issue asks for is present and a number.
jq -e '(.drain.pairs | length) == '"$PAIRS"' and
       ([.drain.pairs[] | .recvlogical_events_per_s, .outboxd_events_per_s, .ratio,
         .outboxd_cpu_us_per_event, .outboxd_peak_rss_kb] | all(type == "number" and . > 0)) and
       ([.steady | .p50_us, .p99_us, .max_us, .consumer_p50_us, .consumer_p99_us,
         .consumer_max_us, .consumer_events, .outboxd_cpu_ms_per_1000_events,
         .outboxd_peak_rss_kb] | all(type == "number")) and
       ([.floor.idle, .floor.beside_writer | .p50_us, .p99_us, .max_us, .cpu_us_per_msg]
         | all(type == "number")) and
       (.steady.stages | type == "object") and (.steady.brokers | type == "array") and
       (if '"$BIG_TXN"' > 0 then (.big_txn.outboxd_peak_rss_kb | type == "number") else true end) and
       (if .delivery == "both" then ([.exactly_once | .drain_rate_vs_alo, .drain_cpu_vs_alo,
         .drain_stream_rate_vs_alo,
         .steady_cpu_vs_alo, .consumer_p50_vs_alo, .consumer_p99_vs_alo]
         | all(type == "number" and . > 0)) else true end)' \
    "$OUT" >/dev/null || fail "$OUT lacks a figure: $(cat "$OUT")"
info "figures written to $OUT"
e2e_pass
