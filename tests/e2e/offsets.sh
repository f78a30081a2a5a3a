#!/usr/bin/env bash
# The offset file knows its stream (issue 15, item 1): outboxd refuses to
# start, with exit 2 (needs an operator; systemd does not restart it), a
# message naming both sides and the way out, and without moving the slot:
#  - beyond_wal: a file holding FFFFFFFF/FFFFFFFF on the same cluster;
#  - other_slot: the file of slot A used with an older slot B of the same
#    database;
#  - slot_ahead: the slot moved past the file by pg_replication_slot_advance;
#    then `outboxd accept-slot` rewrites the file and a restart streams from
#    the slot;
#  - v1: a bare-LSN file (what older versions wrote) is accepted and
#    rewritten with its identity (format 4, with the ACKed commit time);
#  - corrupt: a corrupt file exits 2 (it used to exit 1 and be restarted);
#  - lost_slot: the file's slot does not exist on this server: exit 2, the
#    message says what is known (not "was dropped"), the slot is not
#    re-created;
#  - other_cluster: the file of another cluster (a fresh initdb with more
#    WAL behind it), with a slot of the same name there (other_cluster) and
#    without (failover).
# `outboxd check` FAILs with the same explanation in each refused case.
# OFFSETS_ONLY="a b" runs only those scenarios (after the common start), to
# run each one against another build (OUTBOXD_BUILD_DIR=/work/main/build).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init offsets
pg_start
broker_start
create_other_table

want() { [[ -z "${OFFSETS_ONLY:-}" || " $OFFSETS_ONLY " == *" $1 "* ]]; }

# event: inserts one outbox event, prints its event_id.
event() {
    psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
            VALUES (gen_random_uuid(), 'Order', 'o-1', 1, 'Created', '{}') RETURNING event_id"
}

confirmed_of() { psql_q "SELECT coalesce((SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '$1'), 'none')"; }

# expect_exit RC REGEX [outboxd_start args]: starts outboxd, which must exit
# with RC within 30 s and log a line matching REGEX (grep -E).
expect_exit() {
    local want=$1 re=$2 from i
    shift 2
    from=$(wc -l <"$T/outboxd.log" 2>/dev/null || echo 0)
    # A lost slot halts for halt_linger (deploy/check-verify-repair.md "Gap repair"): at once here.
    outboxd_start --no-wait --set postgres.halt_linger=0s "$@"
    for ((i = 0; i < 300; i++)); do
        kill -0 "$OUTBOXD_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$OUTBOXD_PID" 2>/dev/null; then
        info "slot ${OUTBOXD_SLOT:-outboxd} is confirmed at $(confirmed_of "${OUTBOXD_SLOT:-outboxd}") (server at $(current_lsn))"
        outboxd_stop 20 || true
        fail "outboxd was still running 30 s after its start: expected it to exit with $want"
    fi
    OUTBOXD_RC=0
    wait "$OUTBOXD_PID" || OUTBOXD_RC=$?
    OUTBOXD_PID=
    tail -n +"$((from + 1))" "$T/outboxd.log" >"$T/last.log"
    assert_eq "$want" "$OUTBOXD_RC" "outboxd's exit status"
    grep -Eq -- "$re" "$T/last.log" || fail "no log line of this start matches /$re/"
    info "ok: exit $OUTBOXD_RC and /$re/"
}

# expect_check RC REGEX [--set ...]: `outboxd check` on the last outboxd.ini
# exits RC and prints a line matching REGEX.
expect_check() {
    local want=$1 re=$2 rc=0
    shift 2
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "$@" >"$T/check.out" 2>&1 || rc=$?
    sed 's/^/        | /' "$T/check.out" >&2
    assert_eq "$want" "$rc" "outboxd check's exit status"
    grep -Eq -- "$re" "$T/check.out" || fail "no check line matches /$re/"
}

in_kafka() { kdump_all | jq -r '.headers.event_id // empty' | grep -x "$1" >/dev/null; }

step "common start: outboxd streams slot outboxd, writes its offset file"
outboxd_start
e1=$(event)
wait_caught_up 60
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
cp "$T/outboxd.offset" "$T/good.offset"
sed 's/^/        | /' "$T/outboxd.offset" >&2

if want v1; then
    step "v1: a bare-LSN file is read, then rewritten with its identity (format 4: an event was ACKed, its commit time is kept)"
    offset_file_lsn "$T/good.offset" >"$T/outboxd.offset"
    outboxd_start
    e2=$(event)
    wait_caught_up 60
    outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
    grep -q 'has format 1 (a bare LSN' "$T/outboxd.log" || fail "no log line says the file has format 1"
    grep -qx 'format=4' "$T/outboxd.offset" || fail "the file was not rewritten in format 4: $(cat "$T/outboxd.offset")"
    grep -qE '^commit_time=20[0-9]{2}-[0-9]{2}-[0-9]{2} [0-9:.]{15}\+00$' "$T/outboxd.offset" ||
        fail "the rewritten file has no commit_time: $(cat "$T/outboxd.offset")"
    grep -qx 'slot=outboxd' "$T/outboxd.offset" || fail "the rewritten file names no slot"
    lsn_ge "$(offset_file_lsn)" "$(confirmed_of outboxd)" || fail "the rewritten file is behind the slot"
    in_kafka "$e2" || fail "event $e2 did not arrive"
    cp "$T/outboxd.offset" "$T/good.offset"
fi

if want beyond_wal; then
    step "beyond_wal: FFFFFFFF/FFFFFFFF on the same cluster"
    before=$(confirmed_of outboxd)
    echo "FFFFFFFF/FFFFFFFF" >"$T/outboxd.offset"
    expect_exit 2 "holds FFFFFFFF/FFFFFFFF, beyond this server's current WAL position [0-9A-F]+/[0-9A-F]+.*accept-slot"
    assert_eq "$before" "$(confirmed_of outboxd)" "the slot's confirmed position (not moved)"
    expect_check 1 '^FAIL offset file .*: the offset file .* holds FFFFFFFF/FFFFFFFF, beyond this server.s current WAL position'
    cp "$T/good.offset" "$T/outboxd.offset"
fi

if want other_slot; then
    step "other_slot: the file of slot A with an older slot B of the same database"
    psql_q "SELECT pg_create_logical_replication_slot('slot_b', 'pgoutput')" >/dev/null
    OUTBOXD_SLOT=slot_a outboxd_start --set "offsets.file=$T/a.offset"
    e3=$(event)
    OUTBOXD_SLOT=slot_a wait_caught_up 60
    outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
    before=$(confirmed_of slot_b)
    OUTBOXD_SLOT=slot_b expect_exit 2 'belongs to another stream \(the slot differs\): the file says [0-9A-F]+/[0-9A-F]+ on system [0-9]+/database postgres/slot slot_a .*slot slot_b .*Point \[offsets\] file' \
        --set "offsets.file=$T/a.offset"
    assert_eq "$before" "$(confirmed_of slot_b)" "slot_b's confirmed position (not moved)"
    expect_check 1 '^FAIL offset file .*belongs to another stream \(the slot differs\)' --set "offsets.file=$T/a.offset"
    psql_q "SELECT pg_drop_replication_slot('slot_a'), pg_drop_replication_slot('slot_b')" >/dev/null
fi

if want corrupt; then
    step "corrupt: exit 2, not a restart loop"
    echo "garbage" >"$T/outboxd.offset"
    expect_exit 2 'offset file .* is corrupt or unreadable: .*move it away'
    expect_check 1 '^FAIL offset file .*is corrupt'
    cp "$T/good.offset" "$T/outboxd.offset"
fi

if want lost_slot; then
    step "lost_slot: the file's slot does not exist on this server (a mistyped slot name)"
    cp "$T/good.offset" "$T/ghost.offset"
    OUTBOXD_SLOT=ghost expect_exit 2 'replication slot "ghost" does not exist on this server \(system [0-9]+, database postgres\), but the offset file .* says outboxd streamed up to [0-9A-F]+/[0-9A-F]+ on system [0-9]+.*mistyped' \
        --set "offsets.file=$T/ghost.offset"
    grep -q 'was dropped' "$T/last.log" && fail "the message still says the slot was dropped"
    assert_eq none "$(confirmed_of ghost)" "slot ghost (not created)"
fi

if want slot_ahead; then
    step "slot_ahead: pg_replication_slot_advance moved the slot past the file"
    file_lsn=$(offset_file_lsn)
    e4=$(event) # never streamed: the slot is advanced past it
    psql_q "SELECT pg_replication_slot_advance('outboxd', pg_current_wal_lsn())" >/dev/null
    ahead=$(confirmed_of outboxd)
    expect_exit 2 "replication slot \"outboxd\" is confirmed up to $ahead, ahead of the offset file .* at $file_lsn .*may never have been sent.*outboxd accept-slot -c "
    assert_eq "$ahead" "$(confirmed_of outboxd)" "the slot's confirmed position"
    expect_check 1 "^FAIL offset file .*: replication slot \"outboxd\" is confirmed up to $ahead, ahead of the offset file"
    step "outboxd accept-slot"
    rc=0
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" accept-slot -c "$T/outboxd.ini" >"$T/accept.out" 2>&1 || rc=$?
    sed 's/^/        | /' "$T/accept.out" >&2
    assert_eq 0 "$rc" "accept-slot's exit status"
    grep -q "now $ahead on system" "$T/accept.out" || fail "accept-slot did not say what it wrote"
    assert_eq "$ahead" "$(offset_file_lsn)" "the file's LSN after accept-slot"
    expect_check 0 "^ok   offset file .*: $ahead on system .*slot confirmed $ahead \(the same\)"
    outboxd_start
    e5=$(event)
    wait_caught_up 60
    outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
    in_kafka "$e5" || fail "event $e5 (after accept-slot) did not arrive"
    in_kafka "$e4" && fail "event $e4 (skipped by the advance) arrived: the test is wrong"
    cp "$T/outboxd.offset" "$T/good.offset"
fi

if want other_cluster || want failover; then
    step "other_cluster: the file of this cluster, used on a fresh one"
    # More WAL here than the fresh cluster will have.
    for i in 1 2 3; do
        psql_q "INSERT INTO public.other (note) VALUES ('x')"
        psql_q "SELECT pg_switch_wal()" >/dev/null
    done
    outboxd_start
    e6=$(event)
    wait_caught_up 60
    outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
    cp "$T/outboxd.offset" "$T/cluster1.offset"
    old_system=$(psql_q "SELECT system_identifier FROM pg_control_system()")
    pg_stop
    mv "$T/pgdata" "$T/pgdata1"
    pg_start
    new_system=$(psql_q "SELECT system_identifier FROM pg_control_system()")
    info "old system $old_system at $(offset_file_lsn "$T/cluster1.offset"), new system $new_system at $(current_lsn)"
    cp "$T/cluster1.offset" "$T/outboxd.offset"
fi
if want failover; then
    step "failover: the new cluster has no slot of that name"
    expect_exit 2 "replication slot \"outboxd\" does not exist on this server \(system $new_system, database postgres\), but the offset file .* says outboxd streamed up to [0-9A-F]+/[0-9A-F]+ on system $old_system.*\(another system\).*failover"
    assert_eq none "$(confirmed_of outboxd)" "slot outboxd on the new cluster (not created)"
fi
if want other_cluster; then
    step "other_cluster: the new cluster has a (new) slot of that name"
    psql_q "SELECT pg_create_logical_replication_slot('outboxd', 'pgoutput')" >/dev/null
    before=$(confirmed_of outboxd)
    expect_exit 2 "belongs to another stream \(the system identifier differs\): the file says .* on system $old_system.* system $new_system"
    assert_eq "$before" "$(confirmed_of outboxd)" "the new cluster's slot (not moved)"
    expect_check 1 '^FAIL offset file .*belongs to another stream \(the system identifier differs\)'
fi

e2e_pass
