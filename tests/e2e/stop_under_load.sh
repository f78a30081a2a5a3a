#!/usr/bin/env bash
# A graceful stop keeps its promise on a starved CPU: SIGTERM in the middle
# of a large transaction, with outboxd in a CPU box beside a busy loop,
# stores what the broker ACKed, and the restart re-sends none of it
# (issue 39: one loaded run once re-sent 9,518 events of a 50,000-event
# transaction after SIGTERM).
#
# The box is a cgroup allowed BOX_PERCENT of one core (cgroup v2's cpu.max,
# or the v1 cpu controller's quota) holding outboxd and a busy loop that
# takes whatever outboxd leaves of it: outboxd runs in short slices with
# long pauses, as on a machine loaded far beyond its cores, while the tests
# beside this one get no more load than BOX_PERCENT of a core.
#
# ROUNDS times: a transaction of N events, SIGTERM once the broker ACKed
# some of them, then a check of the stop (exit 0; the offset file keeps a
# part of the transaction; the stop line says how long the drain took and
# whether every event in flight was ACKed) and a restart in the box. At
# the end, outside the box: every event exactly once, 0 duplicates, per-key
# order. Runs on the plugin of OUTBOXD_TEST_PLUGIN, on the mock or a real
# broker (E2E_KAFKA).
: "${E2E_TIMEOUT:=600}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init stop_under_load

N=${N:-20000}
ROUNDS=${ROUNDS:-3}
BOX_PERCENT=${BOX_PERCENT:-5}

BOX=
HOG_PID=
# cpu_box_make PERCENT: the cgroup, its quota, and the busy loop in it.
cpu_box_make() {
    local quota=$(($1 * 1000)) name=outboxd-e2e-stop-$$
    if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
        BOX=/sys/fs/cgroup/$name
        mkdir "$BOX" || fail "cannot make the cgroup $BOX"
        echo "$quota 100000" >"$BOX/cpu.max" ||
            fail "cannot set cpu.max in $BOX (is the cpu controller enabled in /sys/fs/cgroup/cgroup.subtree_control?)"
    elif [[ -d /sys/fs/cgroup/cpu ]]; then
        BOX=/sys/fs/cgroup/cpu/$name
        mkdir "$BOX" || fail "cannot make the cgroup $BOX"
        echo 100000 >"$BOX/cpu.cfs_period_us" && echo "$quota" >"$BOX/cpu.cfs_quota_us" ||
            fail "cannot set the CPU quota of $BOX"
    else
        fail "no cgroup CPU controller (neither cgroup v2 nor v1's cpu) to starve outboxd in"
    fi
    {
        _close_sess_fds
        exec bash -c 'while :; do :; done'
    } &
    HOG_PID=$!
    cpu_box_enter "$HOG_PID"
    info "CPU box $BOX: $1% of one core, shared with a busy loop (pid $HOG_PID)"
}

# cpu_box_enter PID: moves the process, every thread of it, into the box.
cpu_box_enter() {
    echo "$1" >"$BOX/cgroup.procs" || fail "cannot move pid $1 into $BOX"
}

# cpu_box_throttled: how often the box's quota ran out (cpu.stat's
# nr_throttled, v1 and v2 alike).
cpu_box_throttled() {
    awk '$1 == "nr_throttled" { print $2 }' "$BOX/cpu.stat"
}

cpu_box_remove() {
    if [[ -n "$HOG_PID" ]]; then
        kill -KILL "$HOG_PID" 2>/dev/null
        wait "$HOG_PID" 2>/dev/null || true
    fi
    HOG_PID=
    [[ -n "$BOX" && -d "$BOX" ]] || return 0
    local i
    for ((i = 0; i < 50; i++)); do
        rmdir "$BOX" 2>/dev/null && break
        sleep 0.1
    done
    [[ -d "$BOX" ]] && printf 'stop_under_load: cgroup %s left behind\n' "$BOX" >&2
    BOX=
}
trap 'rc=$?; set +eE; [[ -n "$OUTBOXD_PID" ]] && kill -KILL "$OUTBOXD_PID" 2>/dev/null; cpu_box_remove; (exit $rc); _e2e_cleanup' EXIT

# outboxd as test_large_txn's stop runs it: a small queue, sent every
# 100 ms, keeps a transaction in flight for seconds, so the stop lands
# inside it.
start_in_box() {
    outboxd_start --set kafka.queue.buffering.max.messages=200 --set kafka.linger.ms=100
    cpu_box_enter "$OUTBOXD_PID"
}

pg_start
broker_start --partitions 8 --topic outbox.event.Bulk
cpu_box_make "$BOX_PERCENT"
start_in_box

# acked_over BASE: the running outboxd reports more than BASE events ACKed.
acked_over() {
    local n
    n=$(metric_value 'outboxd_events_acked_total{topic="outbox.event.Bulk"}')
    ((${n:-0} > $1))
}

total=0
# Events the running outboxd ACKs before it reaches the next round's
# transaction: the rest of the one it resumed inside.
base=0
for ((round = 1; round <= ROUNDS; round++)); do
    step "round $round of $ROUNDS: a transaction of $N events, SIGTERM inside it"
    psql_q <<SQL
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
SELECT gen_random_uuid(), 'Bulk', 'bulk-' || (i % 200), $total + i, 'Round$round', jsonb_build_object('i', i)
FROM generate_series(1, $N) AS i;
SQL
    total=$((total + N))
    wait_until 120 "the broker ACKs events of round $round's transaction" acked_over "$base"
    outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM in the CPU box, expected 0"
    last=$(outboxd_log_last_start)
    info "stop: $(grep -E 'confirmed .*; produced [0-9]+ events' <<<"$last" | tail -n 1 | sed 's/^.*\] //')"
    if grep -q 'not ACKed within' <<<"$last"; then
        info "the drain ended with events in flight: $(grep 'not ACKed within' <<<"$last" | tail -n 1)"
    fi
    kept=$(sed -n 's/^txn_acked=//p' "$T/outboxd.offset")
    ((${kept:-0} > 0 && kept < N)) ||
        fail "round $round: the offset file keeps txn_acked=${kept:-none}, expected a part of the $N events: $(cat "$T/outboxd.offset")"
    info "round $round: the offset file keeps $kept of its $N events as ACKed"
    start_in_box
    outboxd_log_wait "skipped the first $kept events of transaction" 120
    base=$((N - kept))
done

step "outside the box: the rest of the last transaction"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM in the CPU box, expected 0"
# The box did starve outboxd: its quota ran out, period after period.
throttled=$(cpu_box_throttled)
info "the box's quota ran out in ${throttled:-0} periods of 100 ms"
((${throttled:-0} > 10)) || fail "the CPU box throttled only ${throttled:-0} times: outboxd was not starved"
cpu_box_remove
outboxd_start
wait_caught_up 300
check_delivery --exactly-once
assert_eq "$total" "$(dump_count "$T/check.dump.jsonl")" "messages (0 duplicates after $ROUNDS stops in the CPU box)"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
e2e_pass
