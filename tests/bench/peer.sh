#!/usr/bin/env bash
# tests/bench/peer.sh - outboxd against Debezium and pg_recvlogical, in one
# run, on the same WAL backlog and the same real Kafka broker.
#
# A throw-away PostgreSQL 15 with Debezium's default outbox table
# (public.outbox, published by dbz_pub) and one real Apache Kafka (4.4.0)
# broker (tests/kafka/kafka.sh; 4 partitions per topic). Per pair, three
# slots are created, THEN N events are loaded (the drain workload of
# tests/bench/run.sh: ~300-byte jsonb payloads, 1,000 aggregates, half the
# events in 1-event transactions, half in 10-event ones), so all three
# decode identical WAL. Then, one after the other, the order rotating
# between pairs:
#   pg_recvlogical  --endpos, pgoutput, to /dev/null: the decoding limit;
#   outboxd         [outbox] preset = debezium, its defaults otherwise
#                   (acks=all, idempotence on);
#   Debezium        3.6.1, PostgreSQL connector (pgoutput) + Outbox Event
#                   Router in Kafka Connect standalone
#                   (tests/debezium/debezium.sh), StringConverter, with the
#                   producer settings users are told to use for no loss
#                   (acks=all, enable.idempotence=true), Connect's and
#                   Debezium's defaults otherwise; JVM heap DBZ_HEAP
#                   (-Xmx512m), --small-heap adds a run per pair at
#                   -Xmx128m.
# Each relay produces to topics of its own. Its drain time runs from the
# moment its slot turns active (watched server-side every 5 ms, so the
# JVM's start and Connect's set-up are not counted) to the moment the sum
# of its topic's end offsets reaches N (kcat -Q every 100 ms); for
# outboxd the slot must also be confirmed past the backlog, and for both
# the dump must hold N distinct ids, so a fast figure can never come from
# lost events. CPU seconds: user+sys of every thread of the relay's
# process (/proc/PID/stat) over the drain, the JVM's JIT and GC threads
# included; pg_recvlogical's from time(1). Peak RSS: VmHWM of the process
# at the end (JVM start included).
#
# Then the steady state, per pair, for outboxd and Debezium (the order
# alternating): the table emptied, a fresh slot, the relay started and
# idle, a consumer (tests/kwatch.c, tests/bench/bench_lib.sh) assigned at
# the end of every partition of the relay's topic after a warm-up (the
# same load for --warmup seconds into a topic of its own, delivered whole,
# then deleted: a relay runs for days, and a JVM's first seconds are not
# its steady state); pgbench commits --rate
# events/s for --seconds (half in 1-event transactions, half in 10-event
# ones, as tests/bench/run.sh's steady state); the figures are the
# commit-to-consumer latency (per event, its first receive time minus its
# row's commit timestamp, track_commit_timestamp = on; p50, p99, max), the
# relay's CPU seconds per 1,000 events and its peak RSS. The run fails
# unless the consumer saw every committed event and nothing else.
#
# Prints one line per measurement and the medians with the ratios outboxd :
# Debezium; writes them to --out (JSON).
#
# Usage: tests/bench/peer.sh [--events N (100000)] [--pairs K (3)]
#            [--rate EV_PER_S (5000)] [--seconds S (30)] [--warmup S (15)]
#            [--small-heap] [--smoke] [--out FILE]
#   --smoke: 5,000 events, 1 pair, 5 s at 1,000 events/s after 2 s of
#            warm-up: proves it runs
#            (CI), measures nothing.
# Environment: OUTBOXD_BUILD_DIR (default build/); DBZ_HEAP.
set -Eeuo pipefail

EVENTS=100000 PAIRS=3 SMALL=0 OUT= RATE=5000 STEADY_S=30 WARMUP_S=15
while [[ $# -gt 0 ]]; do
    case $1 in
    --events) EVENTS=$2; shift 2 ;;
    --pairs) PAIRS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --seconds) STEADY_S=$2; shift 2 ;;
    --small-heap) SMALL=1; shift ;;
    --warmup) WARMUP_S=$2; shift 2 ;;
    --smoke) EVENTS=5000 PAIRS=1 RATE=1000 STEADY_S=5 WARMUP_S=2; shift ;;
    --out) OUT=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -E/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "peer.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in EVENTS PAIRS RATE STEADY_S WARMUP_S; do
    [[ ${!v} =~ ^[0-9]+$ ]] && ((${!v} > 0)) ||
        { echo "peer.sh: $v must be a positive number, got '${!v}'" >&2; exit 2; }
done
export E2E_KAFKA=real KAFKA_PARTITIONS=4 OUTBOXD_TEST_PLUGIN=pgoutput
export E2E_TIMEOUT=${E2E_TIMEOUT:-5400}
# shellcheck source=../e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
# shellcheck source=bench_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
export KW_TABLE=public.outbox KW_ID=id KW_HEADER=id
: "${OUT:=$OUTBOXD_BUILD_DIR/bench-peer.json}"
DBZ=$E2E_SRC_DIR/tests/debezium/debezium.sh
e2e_init bench_peer
RESULTS=$T/results.jsonl
: >"$RESULTS"

cpu_s() { awk -v t="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$1/stat"; }

bench_pg_start
COLS="id, aggregatetype, aggregateid, type, payload"
psql_q "CREATE TABLE public.outbox (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
          aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb);
        CREATE PUBLICATION dbz_pub FOR TABLE public.outbox" >/dev/null
bench_schema public.outbox "$COLS" | psql_q >/dev/null
printf 'message.max.bytes=4194304\n' >"$T/broker.properties"
E2E_KAFKA_PROPERTIES=$T/broker.properties broker_start

# slot_active_bg SLOT: from now until SLOT is active, in the background
# (slot_wait_bg); the server's clock then goes to $T/SLOT.t0. Started
# before the relay.
slot_active_bg() { slot_wait_bg "$1" active "$T/$1.t0"; }
# topic_end TOPIC: the sum of its partitions' end offsets (0 before it exists).
topic_end() {
    { kcat -b "$KAFKA_BOOTSTRAP" -Q -t "$1:0:-1" -t "$1:1:-1" -t "$1:2:-1" -t "$1:3:-1" \
        2>/dev/null || true; } |
        awk '/offset/ { for (i = 1; i < NF; i++) if ($i == "offset") s += $(i + 1) } END { print s + 0 }'
}
# wait_topic TOPIC N PID: until TOPIC holds N messages; prints the time
# (epoch seconds). Fails if PID exits first.
wait_topic() {
    local n
    while :; do
        n=$(topic_end "$1")
        ((n >= $2)) && break
        kill -0 "$3" 2>/dev/null || fail "the relay (pid $3) exited with $n of $2 in $1"
        sleep 0.1
    done
    date +%s.%N
}
# distinct_ids TOPIC HEADER: distinct values of HEADER in TOPIC.
distinct_ids() {
    "$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" -b "$KAFKA_BOOTSTRAP" -t "$1" --timeout-ms 120000 |
        jq -r --arg h "$2" '.headers[$h]' | sort -u | wc -l
}

# run_recvlogical SLOT END: pg_recvlogical to --endpos, timed like the
# relays from its slot turning active to its exit; sets SECS, CPU, RSS.
run_recvlogical() {
    local tf=$T/time.$1 u s waiter t1
    slot_active_bg "$1"
    waiter=$SLOT_WAITER
    { TIMEFORMAT='%3R %3U %3S'; time "$PG_BINDIR/pg_recvlogical" -d "$PG_CONNINFO" -S "$1" \
        --start -E "$2" --no-loop -f /dev/null -o proto_version=1 -o publication_names=dbz_pub \
        2>"$T/recvlogical.$1.log"; } 2>"$tf" ||
        fail "pg_recvlogical failed: $(cat "$T/recvlogical.$1.log")"
    t1=$(date +%s.%N)
    wait "$waiter" || fail "pg_recvlogical's slot $1 was never seen active"
    read -r _ u s <"$tf"
    SECS=$(echo "$t1 - $(cat "$T/$1.t0")" | bc -l)
    CPU=$(echo "$u + $s" | bc -l) RSS=null
}

# start_outboxd SLOT: outboxd (preset debezium, its defaults otherwise) on
# SLOT into obx.SLOT.outbox.event.<aggregatetype>; sets PID. The server's
# clock when the slot turned active goes to $T/SLOT.t0.
start_outboxd() {
    local slot=$1 waiter
    cat >"$T/$slot.ini" <<EOF
[postgres]
conninfo = $PG_CONNINFO
slot = $slot
publication = dbz_pub
create_slot = false
[outbox]
preset = debezium
topic = obx.$slot.outbox.event.\${aggregatetype}
[kafka]
bootstrap.servers = $KAFKA_BOOTSTRAP
[offsets]
file = $T/$slot.offset
[log]
level = info
[http]
listen = 127.0.0.1:0
EOF
    slot_active_bg "$slot"
    waiter=$SLOT_WAITER
    "$OUTBOXD_BUILD_DIR/outboxd" -c "$T/$slot.ini" >"$T/outboxd.$slot.log" 2>&1 </dev/null &
    PID=$!
    E2E_BG_PIDS+=("$PID")
    wait "$waiter" || fail "outboxd's slot $slot did not turn active: $(tail -n 5 "$T/outboxd.$slot.log")"
}
stop_outboxd() { # SLOT
    kill -TERM "$PID"
    wait "$PID" || fail "outboxd on $1 exited with $? after SIGTERM"
}

# start_debezium SLOT HEAP: Debezium in Kafka Connect on SLOT into
# dbz.SLOT.outbox.event.<aggregatetype>; sets PID; $T/SLOT.t0 as above.
start_debezium() {
    local slot=$1 waiter
    slot_active_bg "$slot"
    waiter=$SLOT_WAITER
    DBZ_SLOT=$slot DBZ_PUBLICATION=dbz_pub DBZ_TOPIC_PREFIX=dbz.$slot. DBZ_NAME=dbz-$slot \
        DBZ_HEAP=$2 "$DBZ" start "$T/dbz.$slot" >/dev/null 2>"$T/dbz.$slot.err" || {
        "$DBZ" kill "$T/dbz.$slot" || true
        fail "Debezium did not start: $(tail -c 2000 "$T/dbz.$slot.err")"
    }
    PID=$("$DBZ" pid "$T/dbz.$slot")
    E2E_BG_PIDS+=("$PID")
    wait "$waiter" || fail "Debezium's slot $slot did not turn active"
}
# A Connect that hangs in its shutdown (seen once beside a loaded CI run)
# leaves a thread dump in connect.out: printed, since $T goes with the test.
stop_debezium() {
    "$DBZ" stop "$T/dbz.$1" ||
        { grep -A12 -E '^"(Thread-|SIGTERM|main|kafka-coordinator|task-thread)' \
              "$T/dbz.$1/connect.out" | tail -n 150 >&2
          fail "Debezium did not stop"; }
}

# start_relay RELAY SLOT, stop_relay RELAY SLOT: outboxd, debezium (heap
# DBZ_HEAP, -Xmx512m) or debezium_small (-Xmx128m). topic_prefix RELAY
# SLOT: the prefix of its topics.
start_relay() {
    case $1 in
    outboxd) start_outboxd "$2" ;;
    debezium) start_debezium "$2" "${DBZ_HEAP:--Xmx512m}" ;;
    debezium_small) start_debezium "$2" -Xmx128m ;;
    esac
}
stop_relay() { if [[ $1 == outboxd ]]; then stop_outboxd "$2"; else stop_debezium "$2"; fi; }
topic_prefix() { if [[ $1 == outboxd ]]; then echo "obx.$2."; else echo "dbz.$2."; fi; }

# rss_sampler PID FILE: writes "EPOCH_S RSS_KB" lines to FILE every 100 ms
# while PID lives (in the background; kill it when done).
rss_sampler() {
    while kill -0 "$1" 2>/dev/null; do
        awk -v t="$EPOCHREALTIME" '/^VmRSS:/ { print t, $2 }' "/proc/$1/status" 2>/dev/null || true
        sleep 0.1
    done >"$2"
}

# drain_relay RELAY SLOT END: times RELAY through the backlog; sets SECS,
# CPU (s), RSS (kB), RSS_SERIES (JSON: [[seconds since the slot turned
# active, RSS kB], ...] over the drain, sampled every 100 ms).
drain_relay() {
    local topic t0 t1 c0 ids sampler
    topic=$(topic_prefix "$1" "$2")outbox.event.Order
    start_relay "$1" "$2"
    rss_sampler "$PID" "$T/rss.$2" &
    sampler=$!
    c0=$(cpu_s "$PID")
    t1=$(wait_topic "$topic" "$EVENTS" "$PID")
    CPU=$(echo "$(cpu_s "$PID") - $c0" | bc -l) RSS=$(peak_rss_kb "$PID")
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    t0=$(cat "$T/$2.t0")
    SECS=$(echo "$t1 - $t0" | bc -l)
    RSS_SERIES=$(awk -v t0="$t0" -v t1="$t1" '$1 >= t0 && $1 <= t1 { printf "%s[%.2f,%d]", n++ ? "," : "", $1 - t0, $2 }
        END { printf "\n" }' "$T/rss.$2")
    RSS_SERIES="[$RSS_SERIES]"
    if [[ $1 == outboxd ]]; then
        OUTBOXD_SLOT=$2 wait_for_confirmed_lsn "$3" 60 ||
            fail "outboxd did not confirm its slot past the backlog"
    fi
    stop_relay "$1" "$2"
    ids=$(distinct_ids "$topic" id)
    ((ids == EVENTS)) || fail "$1: $ids distinct ids in $topic, expected $EVENTS"
}

# steady_relay RELAY PAIR: the steady state of RELAY (see the top).
steady_relay() {
    local relay=$1 slot=steady_$1_$2 agg=Steady$2 topic c0 n per_k achieved
    psql_q "TRUNCATE public.outbox" >/dev/null
    psql_q "SELECT 1 FROM pg_create_logical_replication_slot('$slot', 'pgoutput')" >/dev/null
    topic=$(topic_prefix "$relay" "$slot")outbox.event.$agg
    # The topic exists (4 partitions, auto-created) before the consumer
    # assigns it: one marker message, before the consumer's start offsets.
    echo marker | kcat -b "$KAFKA_BOOTSTRAP" -P -t "$topic" 2>"$T/kcat.err" ||
        fail "kcat could not create $topic: $(cat "$T/kcat.err")"
    start_relay "$relay" "$slot"
    # Warm-up: the same load for WARMUP_S into a topic of its own, until
    # the relay has delivered it all (a relay runs for days: a JVM's
    # warm-up is not its steady state); those rows are deleted after.
    bench_writer public.outbox "$COLS" "Warm$2"
    "$PG_BINDIR/pgbench" -n -c 4 -j 2 -R "$(bench_tps "$RATE")" -T "$WARMUP_S" \
        -f "$T/one.sql@10" -f "$T/ten.sql@1" >"$T/pgbench.warm.log" 2>&1 ||
        fail "pgbench (warm-up) failed: $(tail -5 "$T/pgbench.warm.log")"
    n=$(psql_q "SELECT count(*) FROM public.outbox")
    wait_topic "$(topic_prefix "$relay" "$slot")outbox.event.Warm$2" "$n" "$PID" >/dev/null
    psql_q "DELETE FROM public.outbox" >/dev/null
    start_kwatch "$topic"
    bench_writer public.outbox "$COLS" "$agg"
    c0=$(cpu_s "$PID")
    "$PG_BINDIR/pgbench" -n -c 4 -j 2 -R "$(bench_tps "$RATE")" -T "$STEADY_S" \
        -f "$T/one.sql@10" -f "$T/ten.sql@1" >"$T/pgbench.log" 2>&1 ||
        fail "pgbench failed: $(tail -5 "$T/pgbench.log")"
    n=$(psql_q "SELECT count(*) FROM public.outbox")
    stop_kwatch "$n"
    CPU=$(echo "$(cpu_s "$PID") - $c0" | bc -l) RSS=$(peak_rss_kb "$PID")
    stop_relay "$relay" "$slot"
    psql_q "SELECT pg_drop_replication_slot('$slot')" >/dev/null
    consumer_latency
    ((CONS_MISSING == 0)) ||
        fail "$relay: the consumer saw $((n - CONS_MISSING)) of the $n committed events"
    ((CONS_UNKNOWN == 0)) || fail "$relay: the consumer saw $CONS_UNKNOWN unknown event ids"
    [[ $CONS_N == "$n" ]] || fail "$relay: only $CONS_N of $n events have a commit timestamp"
    per_k=$(echo "$CPU * 1000 / $n" | bc -l) achieved=$(echo "$n / $STEADY_S" | bc -l)
    info "$relay steady: $n events ($(printf '%.0f' "$achieved")/s), commit-to-consumer p50 $CONS_P50 us p99 $CONS_P99 us max $CONS_MAX us, CPU $(printf '%.3f' "$per_k") s per 1,000 events, peak RSS $RSS kB, $CONS_DUPS duplicates"
    record kind='"steady"' pair="$2" relay="\"$relay\"" events="$n" \
        achieved_rate="$(printf '%.1f' "$achieved")" p50_us="$CONS_P50" p99_us="$CONS_P99" \
        max_us="$CONS_MAX" duplicates="$CONS_DUPS" cpu_s_per_1000="$(printf '%.4f' "$per_k")" \
        peak_rss_kb="$RSS" cdf_us="$CONS_CDF"
}

relays=(recvlogical outboxd debezium)
((SMALL)) && relays+=(debezium_small)
base=0
for ((p = 1; p <= PAIRS; p++)); do
    step "pair $p of $PAIRS: $EVENTS events"
    for r in "${relays[@]}"; do
        psql_q "SELECT 1 FROM pg_create_logical_replication_slot('${r}_$p', 'pgoutput')" >/dev/null
    done
    psql_q "CALL bench_load($EVENTS, $base)" >/dev/null
    base=$((base + EVENTS))
    end=$(current_lsn)
    # Rotate the order: pair 1 starts with the first relay, pair 2 with the
    # second, and so on.
    order=("${relays[@]:$(((p - 1) % ${#relays[@]}))}" "${relays[@]:0:$(((p - 1) % ${#relays[@]}))}")
    for r in "${order[@]}"; do
        slot=${r}_$p
        if [[ $r == recvlogical ]]; then
            run_recvlogical "$slot" "$end"
        else
            drain_relay "$r" "$slot" "$end"
        fi
        rate=$(echo "$EVENTS / $SECS" | bc -l)
        info "$r: $(printf '%.2f' "$SECS") s, $(printf '%.0f' "$rate") events/s, CPU $(printf '%.2f' "$CPU") s, peak RSS ${RSS} kB"
        series=()
        [[ $r != recvlogical ]] && series=(rss_series="$RSS_SERIES")
        record kind='"drain"' pair="$p" relay="\"$r\"" seconds="$(printf '%.3f' "$SECS")" \
            events_per_s="$(printf '%.1f' "$rate")" cpu_s="$(printf '%.3f' "$CPU")" peak_rss_kb="$RSS" \
            "${series[@]}"
        psql_q "SELECT pg_drop_replication_slot('$slot')" >/dev/null
    done
done

for ((p = 1; p <= PAIRS; p++)); do
    step "steady state, pair $p of $PAIRS: $RATE events/s for $STEADY_S s"
    if ((p % 2)); then order=(outboxd debezium); else order=(debezium outboxd); fi
    for r in "${order[@]}"; do steady_relay "$r" "$p"; done
done

step "medians over $PAIRS pair(s)"
jq -s --argjson events "$EVENTS" --argjson pairs "$PAIRS" --argjson rate "$RATE" '
    def median: sort | if length % 2 == 1 then .[length / 2 | floor]
                        else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    def med($f): map(.[$f]) | if .[0] == null then null else median end;
    (map(select(.kind == "drain")) | group_by(.relay) | map({key: .[0].relay, value: {
        events_per_s: med("events_per_s"), cpu_s: med("cpu_s"),
        peak_rss_kb: med("peak_rss_kb")}}) | from_entries) as $d
    | (map(select(.kind == "steady")) | group_by(.relay) | map({key: .[0].relay, value: {
        p50_us: med("p50_us"), p99_us: med("p99_us"), max_us: med("max_us"),
        cpu_s_per_1000: med("cpu_s_per_1000"), peak_rss_kb: med("peak_rss_kb")}})
       | from_entries) as $s
    | {events: $events, pairs: $pairs, steady_rate: $rate, runs: ., drain: $d, steady: $s,
       ratios: {
         drain_outboxd_to_debezium: ($d.outboxd.events_per_s / $d.debezium.events_per_s),
         drain_cpu_outboxd_to_debezium: ($d.outboxd.cpu_s / $d.debezium.cpu_s),
         drain_rss_outboxd_to_debezium: ($d.outboxd.peak_rss_kb / $d.debezium.peak_rss_kb),
         drain_outboxd_to_recvlogical: ($d.outboxd.events_per_s / $d.recvlogical.events_per_s),
         drain_debezium_to_recvlogical: ($d.debezium.events_per_s / $d.recvlogical.events_per_s),
         steady_p50_outboxd_to_debezium: ($s.outboxd.p50_us / $s.debezium.p50_us),
         steady_p99_outboxd_to_debezium: ($s.outboxd.p99_us / $s.debezium.p99_us),
         steady_cpu_outboxd_to_debezium: ($s.outboxd.cpu_s_per_1000 / $s.debezium.cpu_s_per_1000),
         steady_rss_outboxd_to_debezium: ($s.outboxd.peak_rss_kb / $s.debezium.peak_rss_kb)}}' \
    "$RESULTS" >"$OUT"
jq -r '.drain | to_entries[] | "drain \(.key): \(.value.events_per_s | round) events/s, CPU \(.value.cpu_s) s, peak RSS \(.value.peak_rss_kb // "-") kB"' "$OUT" >&2
jq -r '.steady | to_entries[] | "steady \(.key): p50 \(.value.p50_us) us, p99 \(.value.p99_us) us, CPU \(.value.cpu_s_per_1000) s per 1,000 events, peak RSS \(.value.peak_rss_kb) kB"' "$OUT" >&2
jq -r '.ratios | to_entries[] | "\(.key) = \(.value * 1000 | round / 1000)"' "$OUT" >&2
info "figures in $OUT"
e2e_pass
