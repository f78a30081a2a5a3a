#!/usr/bin/env bash
# Network partitions (issue 38): faults in which no FIN or RST reaches
# anyone, on test hosts made of network namespaces (tests/e2e/netns_lib.sh),
# under three writers; judged afterwards by an independent dump of every
# topic (check_delivery, order against the real commit order read from a
# judge slot) and `outboxd verify`: 0 missing, 0 per-key order violations,
# duplicates counted and attributed to the scenario whose fault came last
# before each extra copy was produced (faults_copies).
#
# outboxd runs on this side of the test network (host "root"), PostgreSQL on
# host "pg"; on real Kafka (E2E_KAFKA=real) the controller is on host "ctl"
# and three brokers on "b1".."b3" (RF 3, min ISR 2, unclean leader election
# off), and the hot standby scenario adds a second outboxd on host "ob".
# Scenarios (--scenarios a,b; default: every one the cluster allows):
#   dead_db_host        PostgreSQL's host cut off from everyone both ways for
#                       PARTITION_CUT_S (longer than every timeout:
#                       outboxd's tcp_user_timeout, the server's
#                       wal_sender_timeout, 10 s here), then healed. outboxd
#                       must notice within PARTITION_NOTICE_MAX_S (its bound:
#                       tcp_user_timeout 20 s after the first unacknowledged
#                       status, a status every second: about 21 s), say so,
#                       reconnect after the healing and lose nothing.
#   dead_broker_host    (real) the broker leading the most outbox partitions
#                       cut off from outboxd only, then from everyone (the
#                       controller moves leadership while it is away).
#   brokers_unreachable (real) every broker cut off from outboxd for longer
#                       than message.timeout.ms (at_least_once: set to
#                       PARTITION_MSG_TIMEOUT_MS for this scenario; exactly_once:
#                       the transaction timeout's 30 s): librdkafka fails the
#                       queued messages, outboxd stops with exit 1 without
#                       confirming past them, and the test restarts it as
#                       systemd's Restart=on-failure would, during and after
#                       the cut.
#   asymmetric          (real) the busiest leader drops what it sends to
#                       outboxd (requests land, ACKs are lost), then what it
#                       receives from it.
#   lossy               (real) every host drops PARTITION_LOSS_PCT (5) % of its
#                       packets each way, at random, and holds the others
#                       PARTITION_DELAY_MS +- PARTITION_JITTER_MS (50 +- 40,
#                       uniform, so they are reordered) each way over every
#                       link, for PARTITION_CUT_S (tests/netdelay.c).
#   standby_split       (real) a hot standby pair: the active (this side) cut
#                       off from PostgreSQL but not from Kafka (its walsender
#                       times out, the standby on host "ob" takes the slot),
#                       then the new active cut off from Kafka but not from
#                       PostgreSQL: it gives the slot up ([postgres]
#                       hot_standby_yield, 15 s here; exit 1, restarted as
#                       by a supervisor) and the first takes it back.
#
# With DELIVERY_MODE=exactly_once (ctest real.partitions_exactly_once)
# outboxd runs [delivery] mode = exactly_once and the judges are
# read_committed: 0 duplicates, and verify counts none.
#
# Usage: partitions.sh [--rounds N] [--scenarios LIST]
# Knobs: PARTITION_CUT_S (35), PARTITION_NOTICE_MAX_S (45),
# PARTITION_MSG_TIMEOUT_MS (10000), PARTITION_LOSS_PCT (5),
# PARTITION_DELAY_MS (50), PARTITION_JITTER_MS (40).
# Needs root (namespaces, iptables). Figures per scenario and round go to
# stderr as "partition: ..." lines (tests/partitions.md keeps a table).
: "${E2E_TIMEOUT:=1800}"
export E2E_TIMEOUT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/load.sh"
source "$(dirname "${BASH_SOURCE[0]}")/faults_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"

REAL=0
[[ "${E2E_KAFKA:-mock}" == real ]] && REAL=1
ALL_SCENARIOS=dead_db_host
((REAL)) && ALL_SCENARIOS=dead_db_host,dead_broker_host,brokers_unreachable,asymmetric,lossy,standby_split
ROUNDS=1
SCENARIOS=$ALL_SCENARIOS
while (($#)); do
    case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --scenarios) SCENARIOS=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--scenarios $ALL_SCENARIOS]" >&2; exit 2 ;;
    esac
done
: "${PARTITION_CUT_S:=35}"
: "${PARTITION_NOTICE_MAX_S:=45}"
: "${PARTITION_MSG_TIMEOUT_MS:=10000}"
: "${PARTITION_LOSS_PCT:=5}"
: "${PARTITION_DELAY_MS:=50}"
: "${PARTITION_JITTER_MS:=40}"

e2e_init partitions
netns_require
: "${DELIVERY_MODE:=at_least_once}"
[[ $DELIVERY_MODE == at_least_once || $DELIVERY_MODE == exactly_once ]] ||
    fail "DELIVERY_MODE is at_least_once or exactly_once"
((REAL)) || [[ $DELIVERY_MODE == at_least_once ]] ||
    fail "DELIVERY_MODE=exactly_once needs E2E_KAFKA=real (the mock cannot judge transactions)"
for sc in ${SCENARIOS//,/ }; do
    [[ ",$ALL_SCENARIOS," == *",$sc,"* ]] ||
        fail "no scenario $sc here (E2E_KAFKA=${E2E_KAFKA:-mock}: $ALL_SCENARIOS)"
done
SLOT=${OUTBOXD_SLOT:-outboxd}
SIGTERMS=0
OUTBOXD_ARGS=(--set postgres.retry_max_ms=2000 --set "delivery.mode=$DELIVERY_MODE")
# On real Kafka every instance may share the slot (standby_split); this
# one never yields it (see b_start).
((REAL)) && OUTBOXD_ARGS+=(--set postgres.hot_standby=true --set postgres.hot_standby_yield=0)
faults_save_on_exit 'outboxd*.log' 'check.*' 'verify.json' 'faults.marks' 'postgres.log' 'netdelay.*'

netns_pg_host
pg_start
psql_q "ALTER SYSTEM SET wal_sender_timeout = '10s'" >/dev/null
pg_reload
judge_slot # the order is judged against the real commit order (lib.sh)
if ((REAL)); then
    netns_kafka_hosts 3
    broker_start --brokers 3
else
    broker_start
fi
load_setup 300 8
outboxd_start "${OUTBOXD_ARGS[@]}"

now_ms() { date +%s%3N; }

# wait_events_past N: until the outbox table holds more than N rows.
wait_events_past() {
    local n=$1 start=$SECONDS
    until (($(committed) > n)); do
        ((SECONDS - start < 60)) || fail "the writers committed nothing new within 60s"
        sleep 0.2
    done
}

# log_count ERE [LOG]: lines of LOG (outboxd's) matching ERE.
log_count() { grep -cE -- "$1" "${2:-$T/outboxd.log}" || true; }

# The lines by which outboxd says it lost the database (its replication
# stream ended: it then reconnects) or a broker (librdkafka's errors).
DB_LOST='WARN: replication stream: '
KAFKA_WARN='(WARN|ERROR): kafka: '

# confirm_passes LSN BOUND_S: waits until the slot is confirmed at or past
# LSN; sets CONFIRM_MS to the milliseconds it took. Fails past BOUND_S.
# (Not run in $(...): it supervises outboxd, which may restart it.)
confirm_passes() {
    local lsn=$1 bound=$2 t0
    t0=$(now_ms)
    until lsn_ge "$(slot_confirmed_lsn)" "$lsn"; do
        (($(now_ms) - t0 < bound * 1000)) ||
            fail "the slot was not confirmed past $lsn within ${bound}s (at $(slot_confirmed_lsn))"
        supervise
        sleep 0.2
    done
    CONFIRM_MS=$(($(now_ms) - t0))
}

# supervise: fails when outboxd has exited, unless SUPERVISED is set: then,
# as systemd's Restart=on-failure, an exit 1 (a fatal runtime error, which
# must name its cause) is counted in RESTARTS and outboxd started again.
# Before the restart the slot must not be confirmed past the commit of the
# delivery that failed (when the error names one).
SUPERVISED=0
RESTARTS=0
supervise() {
    [[ -n "$OUTBOXD_PID" ]] && kill -0 "$OUTBOXD_PID" 2>/dev/null && return 0
    ((SUPERVISED)) || outboxd_assert_running
    OUTBOXD_RC=0
    [[ -z "$OUTBOXD_PID" ]] || wait "$OUTBOXD_PID" || OUTBOXD_RC=$?
    OUTBOXD_PID=
    ((OUTBOXD_RC == 1)) || fail "outboxd exited with status $OUTBOXD_RC (a supervisor restarts only 1)"
    local why failed f confirmed
    why=$(outboxd_log_last_start | grep -E 'ERROR' | tail -n 1)
    [[ -n "$why" ]] || fail "outboxd exited 1 without an ERROR line naming the cause"
    info "outboxd exited 1: $why"
    # Every transaction whose delivery failed must still be ahead of the slot.
    failed=$(outboxd_log_last_start | grep ERROR |
        sed -n 's/.*(commit_lsn \([0-9A-F]*\/[0-9A-F]*\)).*/\1/p' | sort -u)
    confirmed=$(slot_confirmed_lsn)
    for f in $failed; do
        lsn_ge "$f" "$confirmed" ||
            fail "slot confirmed $confirmed, past an undelivered transaction (commit_lsn $f)"
    done
    [[ -z "$failed" ]] ||
        info "ok: the slot stays at $confirmed, before all $(wc -w <<<"$failed") failed transactions' commits"
    RESTARTS=$((RESTARTS + 1))
    _slot_wait_released
    outboxd_start --no-wait "${OUTBOXD_ARGS[@]}" "${EXTRA_ARGS[@]}"
}
EXTRA_ARGS=()

# fault_begin NAME COUNT_FN: a fault starts now (NOTICE_T0). fault_tick
# supervises outboxd and sets NOTICE_MS, once, to the milliseconds from
# NOTICE_T0 until COUNT_FN's count grew (outboxd said so); hold_until MS
# ticks until MS after NOTICE_T0. Ticks supervise the standby (b_supervise)
# too, when there is one.
fault_begin() {
    NOTICE_NAME=$1 NOTICE_FN=$2 NOTICE_MS=
    NOTICE_BASE=$($NOTICE_FN)
    NOTICE_T0=$(now_ms)
}
fault_tick() {
    supervise
    b_supervise
    if [[ -z "$NOTICE_MS" ]] && (($($NOTICE_FN) > NOTICE_BASE)); then
        NOTICE_MS=$(($(now_ms) - NOTICE_T0))
        info "$NOTICE_NAME: outboxd noticed after ${NOTICE_MS} ms: $(grep -E 'WARN|ERROR' "$T/outboxd.log" | tail -n 1)"
    fi
}
hold_until() {
    while (($(now_ms) - NOTICE_T0 < $1)); do
        fault_tick
        sleep 0.2
    done
}
db_lost_count() { log_count "$DB_LOST"; }
kafka_warn_count() { log_count "$KAFKA_WARN"; }

# report SCENARIO ROUND K=V...: the figures line of one scenario.
report() {
    local sc=$1 round=$2
    shift 2
    printf 'partition: scenario=%s round=%d %s\n' "$sc" "$round" "$*" >&2
}

# ---------------------------------------------------------------- Kafka

# Metadata from the brokers but SKIP (cut off from this side): one line per
# outbox partition, "TOPIC PARTITION LEADER ISR_COUNT".
partitions_meta() {
    local skip=${1:-0} boot= id addr out
    for ((id = 1; id <= 3; id++)); do
        ((id == skip)) && continue
        addr=NETNS_ADDR_b$id
        boot+="${boot:+,}${!addr}:$(cat "$E2E_KAFKA_DIR/node$id/port")"
    done
    out=$(timeout 20 kcat -L -b "$boot" -m 5 2>/dev/null) || true
    awk '/^  topic "outbox\.event\./ { t = $2; gsub(/"/, "", t); next }
         /^  topic / { t = ""; next }
         t != "" && /^    partition / {
             p = $2; sub(/,/, "", p); l = $4; sub(/,/, "", l)
             n = split($NF, isr, ","); print t, p, l, n }' <<<"$out"
}

# busiest_leader: the broker leading the most outbox partitions.
busiest_leader() {
    partitions_meta | awk '{ c[$3]++ } END { for (b in c) if (c[b] > m) { m = c[b]; best = b } print best }'
}

# wait_isr_full: every outbox partition has all three replicas in sync
# (a broker back from a cut has caught up), up to 120 s.
wait_isr_full() {
    local start=$SECONDS m
    while :; do
        m=$(partitions_meta)
        [[ -n "$m" ]] && ! awk '$4 != 3 { bad = 1 } END { exit !bad }' <<<"$m" && return 0
        ((SECONDS - start < 120)) || fail "the outbox partitions' ISR is not full 120s after the healing: $m"
        supervise
        sleep 1
    done
}

# leadership_moved_from L T0: milliseconds since T0 until no outbox
# partition is led by broker L (asked of the others); "-" if not within
# the cut.
leadership_moved_ms() {
    local l=$1 t0=$2 m
    m=$(partitions_meta "$l")
    [[ -n "$m" ]] && ! awk -v l="$l" '$3 == l { f = 1 } END { exit !f }' <<<"$m" && echo $(($(now_ms) - t0))
}

# ---------------------------------------------------------------- scenarios

# One round of dead_db_host.
dead_db_host() {
    local round=$1 old during0 t_heal lsn
    step "dead_db_host, round $round: PostgreSQL's host cut off for ${PARTITION_CUT_S}s"
    wait_events_past "$(committed)"
    old=$(slot_active_pid)
    during0=$(committed)
    fault_mark dead_db_host
    netns_cut pg both
    fault_begin dead_db_host db_lost_count
    hold_until $((PARTITION_CUT_S * 1000))
    [[ -n "$NOTICE_MS" ]] || fail "outboxd did not notice the dead database host within ${PARTITION_CUT_S}s"
    ((NOTICE_MS <= PARTITION_NOTICE_MAX_S * 1000)) ||
        fail "outboxd noticed the dead database host after ${NOTICE_MS} ms (bound ${PARTITION_NOTICE_MAX_S}s)"
    netns_heal pg
    t_heal=$(now_ms)
    lsn=$(current_lsn)
    wait_reconnected "$old" "the healing"
    local stream_ms=$(($(now_ms) - t_heal))
    confirm_passes "$lsn" 120
    report dead_db_host "$round" "notice_ms=$NOTICE_MS heal_to_stream_ms=$stream_ms" \
        "heal_to_confirm_ms=$CONFIRM_MS" "committed_during_cut=$(($(committed) - during0))"
}

# cut_broker ROUND PHASE L DIR [PEER...]: broker L's host cut off (netns_cut
# bL DIR PEER...) for PARTITION_CUT_S under load, healed, and its figures:
# when outboxd noticed (a librdkafka error), when leadership left L (if it
# did), when the slot passed the WAL written in the cut's first 2 s (if
# during the cut: delivery went on without L), from the healing until the slot is
# confirmed past the WAL written by then and until L is back in every ISR.
cut_broker() {
    local round=$1 phase=$2 l=$3 dir=$4 during0 t_heal lsn moved=- heal_ms isr_ms lsn1 through=-
    shift 4
    wait_events_past "$(committed)"
    during0=$(committed)
    fault_mark "$phase"
    netns_cut "b$l" "$dir" "$@"
    fault_begin "$phase" kafka_warn_count
    hold_until 2000
    lsn1=$(current_lsn) # the WAL of 2 s of the cut
    while (($(now_ms) - NOTICE_T0 < PARTITION_CUT_S * 1000)); do
        [[ $moved != - ]] || moved=$(leadership_moved_ms "$l" "$NOTICE_T0") || moved=-
        # Delivery goes on without L once the slot passes what was written
        # in the cut's first 2 s (every partition's events among it).
        [[ $through != - ]] || ! lsn_ge "$(slot_confirmed_lsn)" "$lsn1" ||
            through=$(($(now_ms) - NOTICE_T0))
        hold_until $(($(now_ms) - NOTICE_T0 + 1000))
    done
    # Its connections to L end within TCP_USER_TIMEOUT (10 s, kafkasock.h)
    # and librdkafka says so; with librdkafka's own sockets nothing was
    # said for the whole cut.
    [[ -n "$NOTICE_MS" ]] ||
        fail "$phase: outboxd logged nothing about broker $l within the ${PARTITION_CUT_S}s cut"
    netns_heal "b$l"
    t_heal=$(now_ms)
    lsn=$(current_lsn)
    confirm_passes "$lsn" 180
    heal_ms=$CONFIRM_MS
    wait_isr_full
    isr_ms=$(($(now_ms) - t_heal))
    report "$phase" "$round" "broker=$l notice_ms=${NOTICE_MS:--} leadership_moved_ms=$moved" \
        "cut_to_confirm_during_ms=$through" \
        "heal_to_confirm_ms=$heal_ms heal_to_isr_full_ms=$isr_ms committed_during_cut=$(($(committed) - during0))"
}

# dead_broker_host: the busiest leader cut off from outboxd alone, then from
# every host.
dead_broker_host() {
    local round=$1 l
    l=$(busiest_leader)
    [[ -n "$l" ]] || fail "no leader of an outbox partition found"
    step "dead_broker_host, round $round: broker $l (the busiest leader) cut off from outboxd for ${PARTITION_CUT_S}s"
    cut_broker "$round" dead_broker_from_outboxd "$l" both root
    l=$(busiest_leader)
    step "dead_broker_host, round $round: broker $l cut off from everyone for ${PARTITION_CUT_S}s"
    cut_broker "$round" dead_broker_from_all "$l" both
}

# asymmetric: the busiest leader's replies to outboxd lost, then its requests.
asymmetric() {
    local round=$1 l
    l=$(busiest_leader)
    step "asymmetric, round $round: broker $l drops what it sends to outboxd (ACKs lost) for ${PARTITION_CUT_S}s"
    cut_broker "$round" asymmetric_acks_lost "$l" out root
    l=$(busiest_leader)
    step "asymmetric, round $round: broker $l drops what it receives from outboxd for ${PARTITION_CUT_S}s"
    cut_broker "$round" asymmetric_requests_lost "$l" in root
}

# brokers_unreachable: every broker cut off from outboxd for longer than
# message.timeout.ms; outboxd, supervised, exits 1 and is started again.
brokers_unreachable() {
    local round=$1 secs during0 t0 t_heal lsn id restarts0=$RESTARTS first_exit=
    secs=$(((PARTITION_MSG_TIMEOUT_MS / 1000) * 2 + 5))
    if [[ $DELIVERY_MODE == at_least_once ]]; then
        EXTRA_ARGS=(--set "kafka.message.timeout.ms=$PARTITION_MSG_TIMEOUT_MS")
    else
        secs=45 # the transaction timeout (30 s) and more
    fi
    step "brokers_unreachable, round $round: every broker cut off from outboxd for ${secs}s" \
        "(message.timeout.ms ${EXTRA_ARGS[*]:-the transaction timeout})"
    if ((${#EXTRA_ARGS[@]})); then
        outboxd_stop 60 || fail "outboxd exited $OUTBOXD_RC on SIGTERM"
        outboxd_start "${OUTBOXD_ARGS[@]}" "${EXTRA_ARGS[@]}"
    fi
    wait_events_past "$(committed)"
    during0=$(committed)
    fault_mark brokers_unreachable
    SUPERVISED=1
    for id in 1 2 3; do netns_cut "b$id" both root; done
    t0=$(now_ms)
    while (($(now_ms) - t0 < secs * 1000)); do
        supervise
        [[ -n "$first_exit" ]] || ((RESTARTS == restarts0)) || first_exit=$(($(now_ms) - t0))
        sleep 0.2
    done
    for id in 1 2 3; do netns_heal "b$id"; done
    t_heal=$(now_ms)
    lsn=$(current_lsn)
    local heal_ms
    confirm_passes "$lsn" 180
    heal_ms=$CONFIRM_MS
    SUPERVISED=0
    report brokers_unreachable "$round" "first_exit_ms=${first_exit:--} restarts=$((RESTARTS - restarts0))" \
        "heal_to_confirm_ms=$heal_ms committed_during_cut=$(($(committed) - during0))"
    if ((${#EXTRA_ARGS[@]})); then
        EXTRA_ARGS=()
        outboxd_stop 60 || fail "outboxd exited $OUTBOXD_RC on SIGTERM"
        outboxd_start "${OUTBOXD_ARGS[@]}"
    fi
}

# lossy: every host loses PARTITION_LOSS_PCT % of its packets each way and
# holds the rest PARTITION_DELAY_MS +- PARTITION_JITTER_MS (reordered).
lossy() {
    local round=$1 h during0 lsn lag n
    step "lossy, round $round: ${PARTITION_LOSS_PCT}% loss and ${PARTITION_DELAY_MS} +- ${PARTITION_JITTER_MS} ms" \
        "each way on every host for ${PARTITION_CUT_S}s"
    wait_events_past "$(committed)"
    during0=$(committed)
    fault_mark lossy
    for h in pg ctl b1 b2 b3; do
        netns_delay "$h" "$PARTITION_DELAY_MS" "$PARTITION_JITTER_MS"
        netns_loss "$h" "$PARTITION_LOSS_PCT"
    done
    fault_begin lossy kafka_warn_count
    hold_until $((PARTITION_CUT_S * 1000))
    # How far the slot trails the WAL at the end of the lossy period.
    lag=$(psql_q "SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'")
    for h in pg ctl b1 b2 b3; do
        netns_heal "$h"
        n=NETNS_DELAYED_$h
        ((${!n:-0} > 0)) || fail "the delayer on host $h held no packet: the delay was not in effect"
    done
    lsn=$(current_lsn)
    confirm_passes "$lsn" 180
    report lossy "$round" "loss_pct=$PARTITION_LOSS_PCT delay_ms=$PARTITION_DELAY_MS+-$PARTITION_JITTER_MS" \
        "packets_delayed_b1=$NETNS_DELAYED_b1 first_kafka_warning_ms=${NOTICE_MS:--} lag_bytes_at_heal=$lag" \
        "heal_to_confirm_ms=$CONFIRM_MS committed_during=$(($(committed) - during0))"
}

# ---------------------------------------------------------------- hot standby

# Instance b of the standby pair, on host "ob": its own configuration,
# offset file, log and HTTP address, and [postgres] hot_standby_yield =
# B_YIELD (a runs with 0, so that the scenarios that cut it off from every
# broker test librdkafka's timeouts rather than the yield).
B_PID=
B_LOG=$T/outboxd-b.log
B_YIELD=15s
B_YIELDS=0
eval "$(declare -f e2e_dump_logs | sed '1s/e2e_dump_logs/_lib_dump_logs/')"
e2e_dump_logs() { _lib_dump_logs; [[ -f $B_LOG ]] && _tail_file "$B_LOG" 80 "outboxd b log"; }

b_start() {
    sed -e "s|^file = .*|file = $T/b.offset|" \
        -e "s|^listen = .*|listen = $NETNS_ADDR_ob:0|" "$T/outboxd.ini" >"$T/b.ini"
    printf '===== e2e: start of b at %s\n' "$(_ts)" >>"$B_LOG"
    { _close_sess_fds; exec ip netns exec "$NETNS_NS_ob" "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" -c "$T/b.ini" \
        "${OUTBOXD_ARGS[@]}" --set "postgres.hot_standby_yield=$B_YIELD" >>"$B_LOG" 2>&1 </dev/null; } &
    B_PID=$!
    E2E_BG_PIDS+=("$B_PID")
    info "outboxd b started on host ob (pid $B_PID)"
}

# b_supervise: b must run; as a supervisor would, an exit 1 that is its
# yield (no Kafka broker reachable while holding the slot) is counted in
# B_YIELDS (B_YIELD_MS: when, since NOTICE_T0) and b started again 10 s
# later (deploy/outboxd.service's RestartSec), which leaves the slot to the
# standing-by instance first.
YIELD_RE='no Kafka broker reachable for [0-9]+ ms while holding slot'
B_RESTART_AT=
b_supervise() {
    if [[ -n "$B_RESTART_AT" ]]; then
        (($(now_ms) >= B_RESTART_AT)) || return 0
        B_RESTART_AT=
        b_start
        return 0
    fi
    [[ -n "$B_PID" ]] || return 0
    kill -0 "$B_PID" 2>/dev/null && return 0
    local rc=0
    wait "$B_PID" || rc=$?
    B_PID=
    ((rc == 1)) && [[ "$(tail -n 200 "$B_LOG" | grep -cE "$YIELD_RE")" -gt 0 ]] ||
        fail "outboxd b exited with status $rc: $(grep -E 'ERROR' "$B_LOG" | tail -n 1)"
    info "outboxd b yielded the slot: $(grep -E "$YIELD_RE" "$B_LOG" | tail -n 1)"
    B_YIELDS=$((B_YIELDS + 1))
    [[ -n "${B_YIELD_MS:-}" ]] || B_YIELD_MS=$(($(now_ms) - NOTICE_T0))
    B_RESTART_AT=$(($(now_ms) + 10000))
}

# b_role: b's role by its metrics (active, standby, connecting).
b_role() {
    local port
    port=$(outboxd_http_port "$B_LOG")
    [[ -n "$port" ]] || return 0
    curl -s -m 5 "http://$NETNS_ADDR_ob:$port/metrics" 2>/dev/null |
        awk '$1 ~ /^outboxd_role\{/ && $2 == 1 { sub(/.*role="/, "", $1); sub(/".*/, "", $1); print $1 }'
}

# slot_holder: which host's outboxd holds the slot (root, ob), "" if none.
slot_holder() {
    local a
    a=$(psql_q "SELECT r.client_addr FROM pg_replication_slots s JOIN pg_stat_replication r
                ON r.pid = s.active_pid WHERE s.slot_name = '$SLOT'" 2>/dev/null) || true
    case $a in
    "$NETNS_ADDR_root") echo root ;;
    "${NETNS_ADDR_ob:-none}") echo ob ;;
    *) echo "" ;;
    esac
}

# wait_log_grows LOG ERE BEFORE S WHAT: until LOG has more than BEFORE lines
# matching ERE, within S seconds.
wait_log_grows() {
    local log=$1 re=$2 before=$3 s=$4 what=$5 start=$SECONDS
    until (($(log_count "$re" "$log") > before)); do
        ((SECONDS - start < s)) || fail "$what: no /$re/ in $log within ${s}s"
        supervise
        b_supervise
        sleep 0.2
    done
}

# wait_holder HOST T0 BOUND_S: the slot held by HOST's outboxd; sets
# TAKE_MS to the milliseconds since T0 (not run in $(...): it supervises).
wait_holder() {
    local host=$1 t0=$2 bound=$3
    until [[ "$(slot_holder)" == "$host" ]]; do
        (($(now_ms) - t0 < bound * 1000)) || fail "the slot is not held from host $host within ${bound}s"
        supervise
        b_supervise
        sleep 0.1
    done
    TAKE_MS=$(($(now_ms) - t0))
}

# standby_split: a is active here, b stands by on host ob. a cut off from
# PostgreSQL: b takes the slot; then b cut off from Kafka: it yields (or,
# in exactly_once, its transaction fails and it lets the stream go) and a
# takes the slot back.
STANDBY_RE='standing by: replication slot'
standby_split() {
    local round=$1 take notice during0 lsn t_heal heal_ms before id
    [[ -n "${NETNS_NS_ob:-}" ]] || netns_host ob
    before=$(log_count "$STANDBY_RE" "$B_LOG")
    [[ -n "$B_PID" ]] || b_start
    wait_log_grows "$B_LOG" "$STANDBY_RE" "$before" 60 "outboxd b standing by"
    assert_eq root "$(slot_holder)" "the host whose outboxd holds the slot"
    step "standby_split, round $round: the active instance (this side) cut off from PostgreSQL, not from Kafka"
    wait_events_past "$(committed)"
    during0=$(committed)
    before=$(log_count "$STANDBY_RE")
    fault_mark standby_active_cut_from_pg
    netns_cut pg both root
    fault_begin standby_active_cut_from_pg db_lost_count
    wait_holder ob "$NOTICE_T0" "$PARTITION_CUT_S"
    take=$TAKE_MS
    hold_until $((PARTITION_CUT_S * 1000))
    [[ -n "$NOTICE_MS" ]] || fail "outboxd a did not notice that it lost the database"
    notice=$NOTICE_MS
    netns_heal pg
    t_heal=$(now_ms)
    wait_log_grows "$T/outboxd.log" "$STANDBY_RE" "$before" 60 "outboxd a standing by after the healing"
    local standing_ms=$(($(now_ms) - t_heal))
    lsn=$(current_lsn)
    confirm_passes "$lsn" 120
    report standby_active_cut_from_pg "$round" "takeover_ms=$take old_active_notice_ms=$notice" \
        "heal_to_old_active_standing_by_ms=$standing_ms" \
        "heal_to_confirm_ms=$CONFIRM_MS committed_during_cut=$(($(committed) - during0))"

    step "standby_split, round $round: the active instance (b, host ob) cut off from Kafka, not from PostgreSQL"
    assert_eq ob "$(slot_holder)" "the host whose outboxd holds the slot"
    during0=$(committed)
    B_YIELD_MS=
    fault_mark standby_active_cut_from_kafka
    for id in 1 2 3; do netns_cut ob both "b$id"; done
    fault_begin standby_active_cut_from_kafka kafka_warn_count
    # 10 s to drop the silent connections, the yield, the standby's check:
    # about 28 s alone; the bound leaves room for a loaded machine.
    wait_holder root "$NOTICE_T0" 60
    take=$TAKE_MS
    hold_until $((PARTITION_CUT_S * 1000))
    netns_heal ob
    t_heal=$(now_ms)
    lsn=$(current_lsn)
    confirm_passes "$lsn" 180
    heal_ms=$CONFIRM_MS
    report standby_active_cut_from_kafka "$round" "takeover_ms=$take b_yielded_ms=${B_YIELD_MS:--}" \
        "heal_to_confirm_ms=$heal_ms committed_during_cut=$(($(committed) - during0))"
    # Back to one instance: b, standing by, stops (exit 0); a keeps the slot.
    local start=$SECONDS
    until [[ -z "$B_RESTART_AT" && "$(b_role)" == standby ]]; do
        ((SECONDS - start < 60)) || fail "outboxd b is not standing by 60s after the healing (role '$(b_role)')"
        supervise
        b_supervise
        sleep 0.2
    done
    step "stopping outboxd b (SIGTERM)"
    kill -TERM "$B_PID"
    local rc=0
    wait "$B_PID" || rc=$?
    B_PID=
    assert_eq 0 "$rc" "outboxd b's exit status on SIGTERM"
    assert_eq root "$(slot_holder)" "the host whose outboxd holds the slot"
}

load_start 3 3600
for ((r = 1; r <= ROUNDS; r++)); do
    for sc in ${SCENARIOS//,/ }; do
        "$sc" "$r"
    done
done
wait_events_past "$(committed)"
load_stop
faults_drain
if [[ $DELIVERY_MODE == exactly_once ]]; then check_delivery --exactly-once; else check_delivery; fi
events=$(committed)
messages=$(wc -l <"$T/check.dump.jsonl")
faults_verify "$events" "$messages"
if [[ $DELIVERY_MODE == exactly_once ]]; then
    assert_eq 0 "$(jq -r '.duplicates' "$T/verify.json")" "verify duplicates (exactly_once)"
fi
faults_copies "$T/check.dump.jsonl"
printf 'partition: mode=%s events=%d messages=%d restarts=%d duplicates_by_scenario="%s" %s\n' \
    "$DELIVERY_MODE" "$events" "$messages" "$RESTARTS" "$(sort "$T/dup_by_kind.txt" | tr '\n' ' ' | sed 's/ $//')" \
    "$VERIFY_NOTE" >&2
e2e_pass
