#!/usr/bin/env bash
# A hot standby pair ([postgres] hot_standby = true; deploy/standby-failover.md "Hot standby")
# on a real Kafka broker under a 2-writer load: instances a and b share
# slot "outboxd", each with its own configuration, offset file and HTTP
# port. The server's wal_sender_timeout is 8 s (so the fence is 6 s; less
# makes a loaded 2-core machine's scheduling pauses look like stalls).
#   1. a streams, b stands by: /readyz and outboxd_role of both.
#   2. kill -9 of the active one: the other holds the slot within
#      KILL_BOUND_MS (measured), is active; the killed one is restarted
#      and stands by. Twice, so the roles switch back.
#   3. the stall: SIGSTOP of the active one (a) for longer than
#      wal_sender_timeout. The server cuts it, b takes the slot within
#      STALL_BOUND_MS (measured) and confirms the WAL; then SIGCONT. a must
#      log "fenced:" and stand by, and no message a produced after it
#      woke may be of an event committed before b took over (the frames
#      in a's socket buffer: judged by the copies' CreateTime against the
#      rows' created_at).
#   4. kill -9 of b: a, the process that was fenced, takes over again.
# Then the load stops, both drain and exit 0 on SIGTERM, and the judges:
# check_delivery (the independent consumer) and `outboxd verify`: 0
# missing, per-key order; duplicates are counted and attributed to the
# fault before each extra copy (faults_copies), not failed.
# Knobs: KILL_BOUND_MS (5000; exactly_once 10000), STALL_BOUND_MS
# (wal_sender_timeout + 4000; exactly_once + 8000),
# WRITERS (2), E2E_KAFKA (real; mock works too, for a quick run),
# DELIVERY_MODE (at_least_once; exactly_once: both instances share the
# progress topic and transactional.id, and the judges want no duplicate),
# LINGER_MS ([kafka] linger.ms, 1000).
: "${DELIVERY_MODE:=at_least_once}"
# Messages wait up to LINGER_MS in librdkafka before they are sent, so that
# the stall catches some there (they are delivered after the SIGCONT).
: "${LINGER_MS:=1000}"
: "${E2E_KAFKA:=real}"
: "${E2E_TIMEOUT:=300}"
: "${WRITERS:=2}"
export E2E_KAFKA E2E_TIMEOUT
SENDER_TIMEOUT_S=8
# exactly_once adds init_transactions (which waits for the other client's
# open transaction to be aborted) and reading the progress topic.
if [[ $DELIVERY_MODE == exactly_once ]]; then
    : "${KILL_BOUND_MS:=10000}" "${STALL_BOUND_MS:=$((SENDER_TIMEOUT_S * 1000 + 8000))}"
else
    : "${KILL_BOUND_MS:=5000}" "${STALL_BOUND_MS:=$((SENDER_TIMEOUT_S * 1000 + 4000))}"
fi

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/load.sh"
source "$(dirname "${BASH_SOURCE[0]}")/faults_lib.sh"
e2e_init hot_standby
SLOT=outboxd
OUTBOXD_ARGS=()

# Instance a uses lib.sh's names ($T/outboxd.ini, .offset, .log: the
# failure dump and faults_verify read them); b has its own.
declare -A PID=() INI=([a]=$T/outboxd.ini [b]=$T/b.ini) OFFSET=([a]=$T/outboxd.offset [b]=$T/b.offset)
declare -A LOG=([a]=$T/outboxd.log [b]=$T/outboxd-b.log)
eval "$(declare -f e2e_dump_logs | sed '1s/e2e_dump_logs/_lib_dump_logs/')"
e2e_dump_logs() { _lib_dump_logs; _tail_file "${LOG[b]}" 80 "outboxd b log"; }
other() { if [[ $1 == a ]]; then echo b; else echo a; fi; }
now_ms() { date +%s%3N; }

# inst_start N: writes N's configuration and starts it; waits for its HTTP port.
inst_start() {
    local n=$1 before i
    cat >"${INI[$n]}" <<EOF
[postgres]
conninfo = $PG_CONNINFO
slot = $SLOT
publication = outboxd_pub
plugin = $OUTBOXD_TEST_PLUGIN
hot_standby = true
retry_max_ms = 2000

[kafka]
bootstrap.servers = $KAFKA_BOOTSTRAP
linger.ms = $LINGER_MS

[delivery]
mode = $DELIVERY_MODE

[offsets]
file = ${OFFSET[$n]}

[log]
level = info

[http]
listen = 127.0.0.1:0
EOF
    before=$(grep -c 'http: serving' "${LOG[$n]}" 2>/dev/null || true)
    printf '===== e2e: start of %s at %s\n' "$n" "$(_ts)" >>"${LOG[$n]}"
    { _close_sess_fds; exec "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" -c "${INI[$n]}" >>"${LOG[$n]}" 2>&1 </dev/null; } &
    PID[$n]=$!
    E2E_BG_PIDS+=("${PID[$n]}")
    for ((i = 0; i < 300; i++)); do
        (($(grep -c 'http: serving' "${LOG[$n]}" || true) > before)) && break
        kill -0 "${PID[$n]}" 2>/dev/null || fail "outboxd $n exited while starting"
        sleep 0.1
    done
    info "outboxd $n started (pid ${PID[$n]}, http port $(outboxd_http_port "${LOG[$n]}"))"
}

# get N PATH: sets CODE and BODY from N's HTTP server.
get() {
    local port
    port=$(outboxd_http_port "${LOG[$1]}")
    CODE=$(curl -s -m 5 -o "$T/get.body" -w '%{http_code}' "http://127.0.0.1:$port/$2") || CODE=000
    BODY=$(cat "$T/get.body" 2>/dev/null || true)
}

# role N: the role outboxd_role gives 1 (active, standby, connecting).
role() {
    get "$1" metrics
    awk '$1 ~ /^outboxd_role\{/ && $2 == 1 { sub(/.*role="/, "", $1); sub(/".*/, "", $1); print $1 }' <<<"$BODY"
}

# wait_role N ROLE S: N's role becomes ROLE within S seconds.
wait_role() {
    local i r
    for ((i = 0; i < $3 * 5; i++)); do
        r=$(role "$1")
        [[ $r == "$2" ]] && return 0
        kill -0 "${PID[$1]}" 2>/dev/null || fail "outboxd $1 exited (waiting for role $2)"
        sleep 0.2
    done
    fail "outboxd $1: role '$r', expected '$2' within $3 s"
}

# wait_readyz N EXPECTED WHAT: N's /readyz answers "CODE BODY" = EXPECTED
# within 10 s (readiness waits for librdkafka's first statistics).
wait_readyz() {
    local i
    for ((i = 0; i < 150; i++)); do
        get "$1" readyz
        [[ "$CODE $BODY" == "$2" ]] && break
        sleep 0.2
    done
    assert_eq "$2" "$CODE $BODY" "/readyz of $1 $3"
}

# assert_roles ACTIVE: ACTIVE streams (role active, /readyz "ready"), the
# other stands by (role standby, /readyz 200 "ready: standing by: ..."
# naming the slot's walsender); /healthz 200 for both.
assert_roles() {
    local act=$1 sb pid
    sb=$(other "$act")
    wait_role "$act" active 15
    wait_role "$sb" standby 15
    pid=$(slot_active_pid)
    wait_readyz "$act" "200 ready" "(active)"
    wait_readyz "$sb" "200 ready: standing by: slot \"$SLOT\" is held by another process (pid $pid)" \
        "(standby)"
    for n in a b; do
        get "$n" healthz
        [[ $CODE == 200 ]] || fail "/healthz of $n: $CODE $BODY"
    done
    get "$act" metrics
    grep -q '^outboxd_streaming 1$' <<<"$BODY" || fail "$act: outboxd_streaming is not 1"
    info "ok: $act active, $sb standing by (walsender $pid), /healthz 200 for both"
}

# wait_new_holder OLD_PID BOUND_MS T0: the slot is held by a walsender other
# than OLD_PID; sets TAKE_MS (since T0) and fails past BOUND_MS (+ 10 s of
# grace only to report the figure).
wait_new_holder() {
    local old=$1 bound=$2 t0=$3 p
    while :; do
        p=$(slot_active_pid)
        [[ -n $p && $p != "$old" ]] && break
        (($(now_ms) - t0 < bound + 10000)) || fail "no new holder of the slot $((bound + 10000)) ms after the fault"
        sleep 0.05
    done
    TAKE_MS=$(($(now_ms) - t0))
    ((TAKE_MS <= bound)) || fail "take-over took $TAKE_MS ms, over the bound of $bound ms"
    info "ok: the slot has a new holder (walsender $p) $TAKE_MS ms after the fault (bound $bound ms)"
}

# kill_active ACT: kill -9 of ACT under load; the other takes over within
# KILL_BOUND_MS; ACT is restarted and stands by.
TAKES=()
kill_active() {
    local act=$1 sb old t0
    sb=$(other "$act")
    old=$(slot_active_pid)
    step "kill -9 of the active instance $act (pid ${PID[$act]}, walsender $old)"
    fault_mark kill9
    t0=$(now_ms)
    kill -KILL "${PID[$act]}"
    wait "${PID[$act]}" 2>/dev/null || true
    wait_new_holder "$old" "$KILL_BOUND_MS" "$t0"
    TAKES+=("kill9:$TAKE_MS")
    wait_role "$sb" active 10
    grep -q 'the slot is free: taking it over after standing by' "${LOG[$sb]}" ||
        fail "$sb did not log its take-over"
    inst_start "$act"
    assert_roles "$sb"
}

pg_start
psql_q "ALTER SYSTEM SET wal_sender_timeout = '${SENDER_TIMEOUT_S}s'" >/dev/null
pg_reload
broker_start
load_setup 200 2

step "a starts first and streams; b stands by"
inst_start a
for ((i = 0; i < 300; i++)); do [[ $(slot_active_pid) ]] && break; sleep 0.1; done
[[ $(slot_active_pid) ]] || fail "a did not take the slot"
inst_start b
assert_roles a
grep -q 'standing by: replication slot "outboxd" is held by another process' "${LOG[b]}" ||
    fail "b did not log that it stands by"
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "${INI[b]}" >"$T/check_b.out" 2>&1 ||
    { cat "$T/check_b.out" >&2; fail "outboxd check of b's configuration failed"; }
grep -E '^ok .*in use by another process \(pid [0-9]+\): with hot_standby = true this instance stands by' \
    "$T/check_b.out" >&2 || { cat "$T/check_b.out" >&2; fail "outboxd check does not say b stands by"; }

fault_mark none
load_start "$WRITERS" 240
sleep 4
kill_active a # b takes over
sleep 4
kill_active b # and back to a
sleep 3

step "the stall: SIGSTOP of a for longer than wal_sender_timeout (${SENDER_TIMEOUT_S}s)"
old=$(slot_active_pid)
fault_mark stall
t_stop=$(now_ms)
kill -STOP "${PID[a]}"
wait_new_holder "$old" "$STALL_BOUND_MS" "$t_stop"
t_take=$(now_ms)
TAKES+=("stall:$TAKE_MS")
grep -q "terminating walsender process due to replication timeout" "$T/postgres.log" ||
    fail "the server did not cut a's walsender for its timeout"
wait_role b active 10
# b confirms what was committed until just after it took over: its copies
# of those events are all produced before a wakes.
sleep 1
wait_caught_up 60
t_cont=$(now_ms)
kill -CONT "${PID[a]}"
info "a stopped for $((t_cont - t_stop)) ms; b took over $TAKE_MS ms after the stop"
for ((i = 0; i < 100; i++)); do grep -q 'fenced: no status' "${LOG[a]}" && break; sleep 0.1; done
grep 'fenced: no status' "${LOG[a]}" >&2 || fail "a did not log that it was fenced"
fence_line=$(grep 'fenced: no status' "${LOG[a]}" | tail -n 1)
silent=$(sed -n 's/.*for \([0-9]*\) ms (this process did not run.*/\1/p' <<<"$fence_line")
((silent > SENDER_TIMEOUT_S * 750)) || fail "the fence line says $silent ms of silence"
assert_roles b
sleep 3
# The fenced process (same process, its earlier stream's state kept) takes
# the slot over again.
kill_active b
grep -c 'the slot is free: taking it over' "${LOG[a]}" >/dev/null
sleep 3

step "stopping the load"
load_stop
stats=$(load_stats)
wait_caught_up 120
for n in a b; do
    kill -TERM "${PID[$n]}"
    pid_wait_exit "${PID[$n]}" 60
    assert_eq 0 "$EXIT_RC" "exit status of $n on SIGTERM"
done

if [[ $DELIVERY_MODE == exactly_once ]]; then check_delivery --exactly-once; else check_delivery; fi
events=$(committed)
messages=$(wc -l <"$T/check.dump.jsonl")
distinct=$(jq -r '.headers.event_id' "$T/check.dump.jsonl" | sort -u | wc -l)
assert_eq "$events" "$distinct" "distinct event_ids delivered = committed events"
faults_verify "$events" "$messages"
if [[ $DELIVERY_MODE == exactly_once ]]; then
    assert_eq 0 "$((messages - distinct))" "read_committed duplicates (exactly_once)"
    assert_eq 0 "$(jq -r '.duplicates' "$T/verify.json")" "verify duplicates (exactly_once)"
fi

# Nothing from a's stale stream after it woke: a copy produced (CreateTime)
# after the SIGCONT of an event committed before b took over could only
# come from a (b had confirmed all of those before the SIGCONT).
psql -XAtq -v ON_ERROR_STOP=1 -F $'\t' -c \
    "SELECT event_id, (extract(epoch FROM created_at) * 1000)::bigint FROM public.outbox_events" \
    >"$T/created.tsv"
jq -r '[.headers.event_id, (.timestamp // 0 | tostring)] | @tsv' "$T/check.dump.jsonl" >"$T/copy_times.tsv"
stale=$(awk -F '\t' -v cont="$t_cont" -v take="$t_take" \
    'NR == FNR { c[$1] = $2; next } ($1 in c) && c[$1] < take && $2 >= cont { n++ } END { print n + 0 }' \
    "$T/created.tsv" "$T/copy_times.tsv")
queued=$(awk -F '\t' -v stop="$t_stop" -v cont="$t_cont" \
    '$2 >= stop && $2 < cont { n++ } END { print n + 0 }' "$T/copy_times.tsv")
assert_eq 0 "$stale" "copies a produced after it woke of events committed before b took over"
# The frames the fence kept from Kafka: events committed while a was
# stopped, before b took over (the walsender sent them to a's socket).
in_stall=$(awk -F '\t' -v stop="$t_stop" -v take="$t_take" '$2 >= stop && $2 < take { n++ } END { print n + 0 }' \
    "$T/created.tsv")
((in_stall > 0)) || fail "no event was committed while a was stopped: the stall tested nothing"

faults_copies "$T/check.dump.jsonl"
# What a had in flight when it stopped is accounted for: librdkafka
# delivered some of it after the SIGCONT, after b's copies of the same
# events (a copy produced before the stop appended after one produced
# after it). There can be no more of them than the fence line counted.
inflight=$(sed -n 's/.*dropping the connection\. \([0-9]*\) events were in flight.*/\1/p' <<<"$fence_line")
stall_late=$(awk -F '\t' -v stop="$t_stop" \
    '$1 == pe && $3 < po && pt < stop && $2 >= stop { n++ } { pe = $1; pt = $2; po = $3 } END { print n + 0 }' \
    "$T/copies.tsv")
((stall_late <= inflight)) ||
    fail "$stall_late copies of a's from before the stall were appended after b's, but a said $inflight were in flight"
info "ok: $stall_late of the $inflight events a had in flight were delivered after b's copies (late duplicates)"
dup_after() { awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }' "$T/dup_by_kind.txt"; }
step "summary ($OUTBOXD_TEST_PLUGIN, Kafka ${E2E_KAFKA}, load $stats, total ${SECONDS}s)"
{
    printf 'take-over times (ms): %s (bounds: kill -9 %d, stall %d)\n' "${TAKES[*]}" "$KILL_BOUND_MS" "$STALL_BOUND_MS"
    printf 'stall: a stopped %d ms, fenced after %s ms without a status; %d events in flight, %d of them delivered after b'"'"'s copies\n' \
        "$((t_cont - t_stop))" "$silent" "$inflight" "$stall_late"
    printf 'events=%d messages=%d duplicates=%d late_copies=%d; extra copies after: kill9=%s stall=%s before=%s\n' \
        "$events" "$messages" "$((messages - distinct))" "$LATE_COPIES" "$(dup_after kill9)" "$(dup_after stall)" "$(dup_after none)"
    printf 'events committed while a was stopped, before b took over: %d; messages produced while a was stopped (by b): %d; stale copies from a after SIGCONT: %d\n' \
        "$in_stall" "$queued" "$stale"
    printf '%s\n' "$VERIFY_NOTE"
} | tee "$T/summary.txt" >&2
e2e_pass
