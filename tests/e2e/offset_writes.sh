#!/usr/bin/env bash
# Writes of the offset file (issue 15, item 9 and "Also found"):
#  - rate: only another table busy for LOAD_S seconds (pgbench, many small
#    transactions): the walsender's keepalives move the flush position all
#    the time, but the file is written at most once per status_interval_ms
#    (+ a small margin). Counted twice: renames of the offset file seen by
#    strace (works for any build: the old code renamed it ~40 times a
#    second) and outboxd_offset_writes_total. The slot is still confirmed
#    past the load's start (keepalive advances are written, just not each).
#  - full file system: a small tmpfs holds the offset file; once it is full
#    `outboxd check` FAILs the offset file (it writes real bytes), and the
#    daemon's next write fails: it exits with exactly one log line for it.
# OFFSET_WRITES_ONLY="rate" or "fullfs" runs one part.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init offset_writes
LOAD_S=${LOAD_S:-10}
INTERVAL_MS=1000

want() { [[ -z "${OFFSET_WRITES_ONLY:-}" || " $OFFSET_WRITES_ONLY " == *" $1 "* ]]; }

event() {
    psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
            VALUES (gen_random_uuid(), 'Order', 'o-1', 1, 'Created', '{}') RETURNING event_id"
}

pg_start
broker_start
create_other_table

if want rate; then
    step "rate: only public.other busy for ${LOAD_S}s"
    command -v strace >/dev/null || fail "strace is needed to count the renames"
    outboxd_start --set "postgres.status_interval_ms=$INTERVAL_MS"
    event >/dev/null
    wait_caught_up 60
    sleep 1
    w0=$(metric_value outboxd_offset_writes_total)
    before=$(current_lsn)
    strace -f -qq -e trace=rename,renameat,renameat2 -o "$T/strace.out" -p "$OUTBOXD_PID" &
    strace_pid=$!
    E2E_BG_PIDS+=("$strace_pid")
    sleep 0.5
    echo "INSERT INTO public.other (note) VALUES ('x');" >"$T/other.sql"
    pgbench -n -f "$T/other.sql" -c 2 -T "$LOAD_S" >"$T/pgbench.out" 2>&1 ||
        { cat "$T/pgbench.out" >&2; fail "pgbench failed"; }
    sleep 0.5
    kill -INT "$strace_pid" 2>/dev/null || true
    wait "$strace_pid" 2>/dev/null || true
    w1=$(metric_value outboxd_offset_writes_total)
    renames=$(grep -c 'outboxd.offset' "$T/strace.out" || true)
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$T/pgbench.out" | head -n 1)
    max=$(( (LOAD_S + 1) * 1000 / INTERVAL_MS + 3 ))
    info "pgbench: $tps transactions/s on public.other for ${LOAD_S}s; offset file renamed $renames times (strace); outboxd_offset_writes_total ${w0:-absent} -> ${w1:-absent}; allowed at most $max"
    ((renames <= max)) || fail "the offset file was renamed $renames times in ${LOAD_S}s (at most $max allowed at status_interval_ms=$INTERVAL_MS)"
    [[ -n "$w0" && -n "$w1" ]] || fail "no outboxd_offset_writes_total metric"
    (( w1 - w0 <= max )) || fail "outboxd_offset_writes_total grew by $((w1 - w0)) in ${LOAD_S}s (at most $max)"
    (( w1 - w0 >= 1 )) || fail "the keepalive advances were never written"
    wait_for_confirmed_lsn "$before" 30 || fail "the slot was not confirmed past the load's start"
    # An event is still confirmed (written at once, not held back like the
    # keepalive advances). The wait is a deadline, not a measurement: a
    # 2 s bound here told nothing a 1 s interval would not also pass, and
    # failed nothing but a loaded machine.
    e=$(event)
    lsn=$(current_lsn)
    wait_for_confirmed_lsn "$lsn" 30 || fail "an event was not confirmed within 30 s"
    outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
fi

if want fullfs; then
    step "fullfs: the offset file on a small tmpfs"
    mkdir -p "$T/small"
    mount -t tmpfs -o size=256k tmpfs "$T/small" ||
        fail "cannot mount a tmpfs here (needs root): this test cannot run"
    trap 'rc=$?; set +eE; trap - ERR; umount -l "$T/small" 2>/dev/null; (exit $rc); _e2e_cleanup' EXIT
    outboxd_start --set "offsets.file=$T/small/outboxd.offset"
    event >/dev/null
    wait_caught_up 60
    [[ -s "$T/small/outboxd.offset" ]] || fail "no offset file on the tmpfs"
    dd if=/dev/zero of="$T/small/fill" bs=4k 2>/dev/null || true
    from=$(wc -l <"$T/outboxd.log")
    event >/dev/null
    outboxd_wait_exit 30 # a full file system must stop it
    assert_eq 1 "$OUTBOXD_RC" "outboxd's exit status after the failed write"
    n=$(tail -n +"$((from + 1))" "$T/outboxd.log" | grep -c 'cannot write offset file' || true)
    tail -n +"$((from + 1))" "$T/outboxd.log" | grep 'cannot write offset file' | sed 's/^/        | /' >&2
    assert_eq 1 "$n" "log lines about the failed offset write"
    rc=0
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" --set "offsets.file=$T/small/outboxd.offset" >"$T/check.out" 2>&1 || rc=$?
    sed 's/^/        | /' "$T/check.out" >&2
    assert_eq 1 "$rc" "outboxd check's exit status on a full file system"
    grep -Eq '^FAIL offset file .*: its directory .* does not take a write: .*No space left on device' "$T/check.out" ||
        fail "check did not FAIL the offset file on a full file system"
    umount -l "$T/small" || true
fi

e2e_pass
