# shellcheck shell=bash
#
# tests/e2e/faults_lib.sh - the faults both fault suites inject (faults.sh on
# the mock cluster, faults_real.sh on a three-broker Kafka cluster), and the
# final judgement by `outboxd verify`. Source it after lib.sh and load.sh.
#
# The caller sets SLOT and OUTBOXD_ARGS (outboxd's extra arguments) and the
# counters the faults increment: KILLS PG_RESTARTS PG_FAST PG_IMMEDIATE
# WALSENDER_KILLS SIGTERMS. Each fault is also appended to $T/faults.marks
# ("EPOCH_MS KIND"), by which faults_real.sh attributes duplicates to faults.

# fault_mark KIND: notes the moment a fault of KIND is injected.
fault_mark() {
    LAST_MARK_MS=$(date +%s%3N)
    printf '%s %s\n' "$LAST_MARK_MS" "$1" >>"$T/faults.marks"
}


# rand_sleep MIN_MS MAX_MS
rand_sleep() {
    local ms=$(($1 + RANDOM % ($2 - $1 + 1)))
    sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
}

committed() { psql_q "SELECT count(*) FROM public.outbox_events"; }

# The pid of the walsender holding the slot, empty when the slot is not
# active or the server does not answer.
slot_active_pid() {
    psql_q "SELECT coalesce(active_pid::text, '') FROM pg_replication_slots WHERE slot_name = '$SLOT'" \
        2>/dev/null || true
}

# wait_reconnected OLD_WALSENDER_PID WHAT: outboxd (the same process) must
# stream again from a new walsender within 60 s, without exiting.
wait_reconnected() {
    local old=$1 what=$2 start=$SECONDS pid
    while :; do
        outboxd_assert_running
        pid=$(slot_active_pid)
        if [[ -n "$pid" && "$pid" != "$old" ]]; then
            info "outboxd (pid $OUTBOXD_PID) streams again (walsender $pid) $((SECONDS - start))s after $what"
            return 0
        fi
        ((SECONDS - start < 60)) ||
            fail "outboxd (pid $OUTBOXD_PID, still running) did not stream again within 60s after $what"
        sleep 0.2
    done
}

# One kill -9 at a random moment of streaming; one time in four the new
# process is killed again at once, while it connects or catches up.
# kill9_noting_resume: kill -9 of outboxd (marked), then notes where the
# offset file says the restart resumes ("MARK_MS LSN" in
# $T/kill_resume.txt): faults_copies checks that nothing committed before
# it is sent again. KILLS_AHEAD counts the kills after which that was the
# file's acked, ahead of its lsn (format 5: pgoutput, ACKs past the last
# publication proof).
KILLS_AHEAD=0
kill9_noting_resume() {
    local resume
    fault_mark kill9
    outboxd_kill9
    KILLS=$((KILLS + 1))
    resume=$(offset_file_resume)
    [[ "$resume" == "$(offset_file_lsn)" ]] || KILLS_AHEAD=$((KILLS_AHEAD + 1))
    printf '%s %s\n' "$LAST_MARK_MS" "$resume" >>"$T/kill_resume.txt"
}

kill_cycle() {
    rand_sleep 200 3000
    outboxd_assert_running
    kill9_noting_resume
    if ((RANDOM % 4 == 0)); then
        outboxd_start --no-wait "${OUTBOXD_ARGS[@]}"
        rand_sleep 0 1500
        kill9_noting_resume
    fi
    outboxd_start "${OUTBOXD_ARGS[@]}"
}

kills() { # N
    local i
    for ((i = 0; i < $1; i++)); do kill_cycle; done
}

pg_restart_mode() { # fast|immediate
    local old
    old=$(slot_active_pid)
    step "restarting PostgreSQL (-m $1) under outboxd (pid $OUTBOXD_PID, walsender ${old:-none})"
    fault_mark "pg_restart_$1"
    _pg_server "$PG_BINDIR/pg_ctl" -D "$T/pgdata" -l "$T/postgres.log" -m "$1" -w \
        -t 60 -o "$PG_CTL_OPTS" restart >>"$T/pg_ctl.log" 2>&1 ||
        fail "pg_ctl restart -m $1 failed"
    PG_RESTARTS=$((PG_RESTARTS + 1))
    if [[ $1 == fast ]]; then PG_FAST=$((PG_FAST + 1)); else PG_IMMEDIATE=$((PG_IMMEDIATE + 1)); fi
    wait_reconnected "$old" "pg_ctl restart -m $1"
}

# active_walsender: sets WALSENDER_PID to the walsender that holds the
# slot, waiting up to 30 s for outboxd (which must keep running) to take
# the slot. Called in the test's own shell, not in $(...): its fail and
# outboxd_assert_running must end the test, not a subshell.
active_walsender() {
    local i
    for ((i = 0; i < 300; i++)); do
        WALSENDER_PID=$(slot_active_pid)
        [[ -n "$WALSENDER_PID" ]] && return 0
        outboxd_assert_running
        sleep 0.1
    done
    fail "slot $SLOT not active: no walsender to terminate"
}

# walsender_kill: terminates the walsender that holds the slot. The slot's
# active_pid can name a walsender that is already on its way out (CI once
# read one that a server still finishing a fast shutdown ended 0.3 s
# later: pg_terminate_backend then answers f, "not a PostgreSQL backend
# process"); the slot's next walsender is taken then, up to 20 times.
walsender_kill() {
    local pid tries got
    for ((tries = 0; tries < 20; tries++)); do
        active_walsender
        pid=$WALSENDER_PID
        ((tries > 0)) || fault_mark walsender_kill
        got=$(psql_q "SELECT pg_terminate_backend($pid)" 2>/dev/null || true)
        [[ "$got" == t ]] && break
        info "walsender $pid was gone before it could be terminated ('$got'); taking the slot's next one"
        sleep 0.2
    done
    [[ "$got" == t ]] || fail "pg_terminate_backend of the slot's walsender answered '$got' 20 times"
    step "terminated outboxd's walsender $pid"
    WALSENDER_KILLS=$((WALSENDER_KILLS + 1))
    wait_reconnected "$pid" "pg_terminate_backend of its walsender"
}

sigterm_restart() {
    outboxd_assert_running
    fault_mark sigterm
    outboxd_stop 60 || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM during load, expected 0"
    SIGTERMS=$((SIGTERMS + 1))
    outboxd_start "${OUTBOXD_ARGS[@]}"
}


# faults_verify EVENTS MESSAGES: `outboxd verify --json` must exit 0 (clean;
# any other status is a failure) and report no missing, out-of-order or
# unknown message, EVENTS rows and MESSAGES messages. Sets VERIFY_NOTE.
faults_verify() {
    local events=$1 messages=$2 vrc=0
    step "outboxd verify"
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" "${OUTBOXD_ARGS[@]}" --json >"$T/verify.json" \
        2>"$T/verify.err" || vrc=$?
    cat "$T/verify.json" >&2
    [[ $vrc -eq 0 ]] || { cat "$T/verify.err" >&2; fail "outboxd verify exited $vrc (0 = clean)"; }
    assert_eq true "$(jq -r '.ok' "$T/verify.json")" "verify ok"
    assert_eq 0 "$(jq -r '.missing' "$T/verify.json")" "verify missing"
    assert_eq 0 "$(jq -r '.order_violations' "$T/verify.json")" "verify order_violations"
    assert_eq 0 "$(jq -r '.unknown' "$T/verify.json")" "verify unknown"
    assert_eq "$events" "$(jq -r '.rows' "$T/verify.json")" "verify rows"
    assert_eq "$messages" "$(jq -r '.messages' "$T/verify.json")" "verify messages"
    VERIFY_NOTE="verify: ok (duplicates=$(jq -r '.duplicates' "$T/verify.json"), duplicate_events=$(jq -r '.duplicate_events' "$T/verify.json"))"
}

# faults_copies DUMP: every extra copy of an event (every copy but the one
# produced first, by the copies' CreateTime timestamps) is counted against
# the fault marked last before it was produced. Writes $T/dup_by_kind.txt
# ("KIND N", KIND "none" before any fault) and $T/dup_per_mark.txt (one line
# per mark, in order: "KIND N", N the copies produced after it and before
# the next mark), and sets LATE_COPIES: copies appended in another order
# than they were produced (after a copy produced later), PER_KILL: the
# copies per kill -9 as "kills=K min=A median=M max=X total=T", and
# KILL_AGES: how long before its kill -9 the first copy of each event sent
# again after it had been produced, as "copies=N median=A p99=B max=C"
# (ms; 0 for one produced after the mark, as the kill came), with
# KILL_AGE_MEDIAN and KILL_AGE_MAX the median and the max (0 with no copies). A restart re-sends
# what was in flight at the kill and what was ACKed after the offset file's
# last write (at most ACKED_WRITE_MS, 100 ms, apart while events are
# ACKed: include/ack/confirm.h): the max is that plus the longest ACK wait.
faults_copies() {
    local dump=$1
    jq -r '[.headers.event_id, (.timestamp // 0 | tostring), (.offset | tostring),
            (.headers.commit_lsn // "0/0")] | @tsv' \
        "$dump" | sort -t $'\t' -k1,1 -k2,2n -k3,3n >"$T/copies.tsv"
    awk -F '\t' '$1 == prev { print $2 } { prev = $1 }' "$T/copies.tsv" | sort -n >"$T/dup_times.txt"
    LATE_COPIES=$(awk -F '\t' '$1 == prev && $3 < poff { n++ } { prev = $1; poff = $3 } END { print n + 0 }' "$T/copies.tsv")
    touch "$T/faults.marks"
    awk 'NR == FNR { t[++n] = $1; k[n] = $2; next }
         { for (i = n; i >= 1 && t[i] > $1; i--) ; c[i]++ }
         END { for (i = 1; i <= n; i++) print k[i], c[i] + 0 > per
               for (i = 0; i <= n; i++) if (i in c) kc[i ? k[i] : "none"] += c[i]
               for (x in kc) print x, kc[x] }' per="$T/dup_per_mark.txt" \
        "$T/faults.marks" "$T/dup_times.txt" >"$T/dup_by_kind.txt"
    # (first copy's time, this copy's time, commit LSN) of every extra copy;
    # the mark before this copy, when a kill -9: its time minus the first
    # copy's.
    awk -F '\t' '$1 == prev { print first, $2, $4 } $1 != prev { first = $2 } { prev = $1 }' \
        "$T/copies.tsv" | sort -k2,2n >"$T/dup_pairs.txt"
    # No copy sent again after a kill -9 belongs to a transaction committed
    # before where the offset file said the restart resumes (its acked:
    # everything before it was ACKed). KILL_RESENT_EARLY counts those.
    touch "$T/kill_resume.txt"
    KILL_RESENT_EARLY=$(awk -f "$E2E_LIB_DIR/lsn.awk" -f "$E2E_LIB_DIR/kill_resume.awk" \
        "$T/faults.marks" "$T/kill_resume.txt" "$T/dup_pairs.txt")
    # (A kill -9 inside a broker outage is left out: what was in flight
    # when the broker went away stays unACKed for the outage's whole first
    # half, so its age there is the outage's, not the offset file's.)
    awk 'NR == FNR { t[++n] = $1; k[n] = $2; next }
         { for (i = n; i >= 1 && t[i] > $2; i--) ;
           if (i >= 1 && k[i] == "kill9" && !(i > 1 && k[i - 1] == "broker_outage"))
               print ($1 < t[i] ? t[i] - $1 : 0) }' \
        "$T/faults.marks" "$T/dup_pairs.txt" | sort -n >"$T/kill_ages.txt"
    KILL_AGES=$(awk '{ v[++n] = $1 }
        END { if (!n) { print "copies=0"; exit }
              p = int(n * 0.99); if (p < 1) p = 1
              printf "copies=%d median=%d p99=%d max=%d\n", n, v[int((n + 1) / 2)], v[p], v[n] }' \
        "$T/kill_ages.txt")
    KILL_AGE_MAX=$(tail -n 1 "$T/kill_ages.txt")
    KILL_AGE_MAX=${KILL_AGE_MAX:-0}
    KILL_AGE_MEDIAN=$(awk '{ v[++n] = $1 } END { print n ? v[int((n + 1) / 2)] : 0 }' \
        "$T/kill_ages.txt")
    PER_KILL=$(awk '$1 == "kill9" { print $2 }' "$T/dup_per_mark.txt" | sort -n |
        awk '{ v[++n] = $1; s += $1 }
             END { if (!n) { print "kills=0"; exit }
                   printf "kills=%d min=%d median=%d max=%d total=%d\n", n, v[1], v[int((n + 1) / 2)], v[n], s }')
}

# faults_save_on_exit PATTERN...: with FAULTS_SAVE_DIR set, the files of $T
# matching the PATTERNs (and each Kafka node's server.log) are copied there
# when the test exits, before lib.sh's cleanup removes $T; the test's exit
# status is kept. Without FAULTS_SAVE_DIR it does nothing.
faults_save_on_exit() {
    [[ -n "${FAULTS_SAVE_DIR:-}" ]] || return 0
    FAULTS_SAVE_PATTERNS=("$@")
    trap _faults_save_then_cleanup EXIT
}

_faults_save_then_cleanup() {
    local rc=$? p f
    set +eE
    trap - ERR
    if mkdir -p "$FAULTS_SAVE_DIR"; then
        for p in "${FAULTS_SAVE_PATTERNS[@]}"; do
            # shellcheck disable=SC2086 # the pattern is meant to expand
            cp -p "$T"/$p "$FAULTS_SAVE_DIR"/ 2>/dev/null
        done
        for f in "$T"/kafka/node*/server.log; do
            [[ -f $f ]] && cp -p "$f" "$FAULTS_SAVE_DIR/kafka-$(basename "$(dirname "$f")").log"
        done
    fi
    (exit "$rc")
    _e2e_cleanup
}

# faults_drain: after the load, waits until outboxd has confirmed the
# server's WAL (drain_secs: how long that took), then stops it with SIGTERM,
# which must exit 0.
faults_drain() {
    local t0=$SECONDS
    step "draining"
    wait_caught_up 300
    drain_secs=$((SECONDS - t0))
    outboxd_assert_running
    outboxd_stop 60 || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM after the load, expected 0"
    SIGTERMS=$((SIGTERMS + 1))
}
