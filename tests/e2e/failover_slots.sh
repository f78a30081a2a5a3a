#!/usr/bin/env bash
# tests/e2e/failover_slots.sh - a PostgreSQL 17 primary fails and its
# standby takes over; outboxd follows it on a failover slot (deploy/standby-failover.md,
# "Failover slots (PostgreSQL 17+)").
#
# The set-up: a primary (wal_level = logical) and a physical streaming
# standby made by copying the primary's data directory after a clean stop
# (Debian's pg_basebackup is 15 and refuses a 17 server), on the physical
# slot "standby1" (primary_slot_name), with sync_replication_slots = on,
# hot_standby_feedback = on and a dbname in primary_conninfo; on the
# primary synchronized_standby_slots = 'standby1'. outboxd runs with
# [postgres] failover = on and a conninfo naming both servers
# (host=127.0.0.1,127.0.0.1 port=P1,P2 target_session_attrs=read-write),
# against a real Kafka broker. It must create its slot as a failover slot,
# and `outboxd check` must find the set-up complete on both servers.
#
# Then: three writers (load.sh) write; once the standby holds a synced copy
# of the slot (pg_replication_slots.synced, not temporary, its confirmed
# position recent), the primary's walsender to the standby is stopped
# (SIGSTOP) for LAG_S seconds so that the primary runs ahead of the
# standby, the primary is killed
# with SIGKILL (postmaster and its children: a crash) while the standby
# lags, and the standby promoted (pg_ctl promote). outboxd
# must reconnect to it by itself (never exiting) and stream from the
# synced slot; the writers follow the same way (libpq's multi-host
# PGHOST/PGPORT). The time from the kill to streaming again is measured.
# After the load, outboxd drains and stops, and `outboxd verify` (and, with
# synchronized_standby_slots, the independent consumer of lib.sh's
# check_delivery) judges against the PROMOTED server's table: 0 missing and
# 0 out of order;
# duplicates are counted. Transactions the writers committed on the old
# primary that never reached the standby are in neither the new table nor
# Kafka; events in Kafka that the new table lacks are "unknown" to verify
# and reported as their own figure: with synchronized_standby_slots they
# must be 0 (the walsender sends nothing the standby has not flushed).
#
# --no-standby-slots: the same run WITHOUT synchronized_standby_slots on
# the primary (a documented manual run, not in CI). It documents the risk:
# outboxd may publish events the standby never received; the run reports
# what the judge saw (unknown events, missing ones) instead of failing on
# them. It fails only if outboxd exits or never streams again.
#
# Usage: failover_slots.sh [--no-standby-slots]
# Knobs: WRITERS (3), LOAD_BEFORE_S (12: load before the kill),
# LOAD_AFTER_S (8: load on the promoted server), LOAD_PAUSE (0.1), LAG_S
# (3: the standby's WAL receiver is stopped this long before the kill).
STANDBY_SLOTS=1
while (($#)); do
    case $1 in
    --no-standby-slots) STANDBY_SLOTS=0; shift ;;
    -h | --help) sed -n '2,/^# Knobs/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "failover_slots.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
: "${WRITERS:=3}"
: "${LOAD_BEFORE_S:=12}"
: "${LOAD_AFTER_S:=8}"
: "${LOAD_PAUSE:=0.1}"
: "${LAG_S:=3}"
export LOAD_PAUSE
export E2E_KAFKA=real OUTBOXD_PG_VERSION=17
: "${E2E_TIMEOUT:=300}"
export E2E_TIMEOUT
# The server: the pinned 17 of tests/pg/pg.sh (resolved beforehand).
if [[ -z "${PG_BINDIR:-}" ]]; then
    PG_BINDIR=$(bash "$(dirname "${BASH_SOURCE[0]}")/../pg/pg.sh" bindir 17) || exit 1
    export PG_BINDIR
fi

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/load.sh"
source "$(dirname "${BASH_SOURCE[0]}")/faults_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/standby_lib.sh"
if ((STANDBY_SLOTS)); then e2e_init failover_slots; else e2e_init failover_slots_unsynced; fi
SLOT=${OUTBOXD_SLOT:-outboxd}
PHYS=standby1
SIGTERMS=0 # faults_drain counts its SIGTERM

# ---------------------------------------------------------------- servers

pg_start
load_setup 200 4
standby_create "$PHYS" "hot_standby_feedback = on" "sync_replication_slots = on"
if ((STANDBY_SLOTS)); then
    # Only on the primary: on the promoted standby it would name a slot that
    # does not exist there, and its logical walsenders would wait for it.
    echo "synchronized_standby_slots = '$PHYS'" >>"$T/pgdata/postgresql.conf"
fi
# Kafka first: the standby's slot sync worker naps longer (up to 30 s) the
# longer it has nothing to sync, so outboxd creates its slot soon after
# the standby starts.
broker_start
standby_start

# From here on psql (the writers, lib.sh's helpers) and outboxd follow the
# primary: both hosts listed, the read-write one taken.
export PGHOST=127.0.0.1,127.0.0.1 PGPORT=$P1,$P2 PGTARGETSESSIONATTRS=read-write
export PG_CONNINFO="host=127.0.0.1,127.0.0.1 port=$P1,$P2 user=postgres dbname=postgres target_session_attrs=read-write"
info "primary 127.0.0.1:$P1, standby 127.0.0.1:$P2; conninfo: $PG_CONNINFO"

OUTBOXD_ARGS=(--set postgres.failover=on --set postgres.retry_max_ms=1000)
outboxd_start "${OUTBOXD_ARGS[@]}"
assert_eq t "$(at "$P1" "SELECT failover FROM pg_replication_slots WHERE slot_name = '$SLOT'")" \
    "the slot is a failover slot on the primary"
grep -q "created replication slot \"$SLOT\" (plugin $OUTBOXD_TEST_PLUGIN, failover" "$T/outboxd.log" ||
    fail "outboxd's log does not say it created a failover slot"
for ((i = 0; i < 300; i++)); do
    [[ $(metric_value outboxd_slot_failover) == 1 ]] && break
    sleep 0.1
done
assert_eq 1 "$(metric_value outboxd_slot_failover)" "outboxd_slot_failover"
if ((STANDBY_SLOTS)); then
    ! grep -q "synchronized_standby_slots is empty" "$T/outboxd.log" ||
        fail "outboxd warns of an empty synchronized_standby_slots that is set"
else
    grep -q "WARN: replication slot \"$SLOT\" is a failover slot, but this primary's synchronized_standby_slots is empty" "$T/outboxd.log" ||
        fail "outboxd does not warn of the empty synchronized_standby_slots"
fi

# ---------------------------------------------------------------- load

fault_mark none
load_start "$WRITERS" 600
sleep "$LOAD_BEFORE_S"
load_running || fail "the writers stopped"
step "waiting for the standby's synced copy of slot $SLOT (load $(load_stats))"
t0=$SECONDS
while :; do
    got=$(at "$P2" "SELECT synced AND NOT temporary FROM pg_replication_slots WHERE slot_name = '$SLOT'" || true)
    if [[ $got == t ]]; then
        # The synced position trails the primary's by a sync cycle; wait
        # until it is at most 2 s old.
        ahead=$(at "$P1" "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'")
        sleep 2
        synced=$(at "$P2" "SELECT confirmed_flush_lsn >= '$ahead'::pg_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'")
        [[ $synced == t ]] && break
    fi
    ((SECONDS - t0 < 60)) || fail "the standby had no recent synced copy of slot $SLOT within 60s"
    sleep 0.5
done
info "standby's synced slot: $(at "$P2" "SELECT 'confirmed ' || confirmed_flush_lsn || ', failover ' || failover || ', synced ' || synced FROM pg_replication_slots WHERE slot_name = '$SLOT'") (primary's: $(at "$P1" "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'"))"

# ---------------------------------------------------------------- check

step "outboxd check: the failover set-up (primary and standby, under load)"
crc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "${OUTBOXD_ARGS[@]}" >"$T/check.out" 2>&1 || crc=$?
grep -iE 'failover|standby' "$T/check.out" >&2 || true
grep -qE '^ok +failover slot' "$T/check.out" || fail "check: no ok line for the failover slot"
if ((STANDBY_SLOTS)); then
    grep -qE '^ok +synchronized_standby_slots' "$T/check.out" ||
        fail "check: synchronized_standby_slots not ok on the primary"
else
    grep -qE '^warn +synchronized_standby_slots' "$T/check.out" ||
        fail "check: no warning for an empty synchronized_standby_slots"
fi
grep -qE "^ok +standby 127.0.0.1:$P2" "$T/check.out" ||
    fail "check: the standby at 127.0.0.1:$P2 was not found ready for failover"

# A listed server that does not answer, and a list without
# target_session_attrs (nor PGTARGETSESSIONATTRS): said, not hidden.
dead=$(_free_port)
env -u PGTARGETSESSIONATTRS "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "${OUTBOXD_ARGS[@]}" \
    --set "postgres.conninfo=host=127.0.0.1,127.0.0.1,127.0.0.1 port=$P1,$P2,$dead user=postgres dbname=postgres" \
    >"$T/check2.out" 2>&1 || true
grep -iE 'failover|standby' "$T/check2.out" >&2 || true
grep -qE "^warn +standby 127.0.0.1:$dead: not reachable, so not checked" "$T/check2.out" ||
    fail "check: no warning for the listed server that does not answer"
grep -qE "^ok +standby 127.0.0.1:$P2: " "$T/check2.out" ||
    fail "check: the standby is not checked beside an unreachable server"
grep -qE '^FAIL +standbys: \[postgres\] conninfo lists 3 servers without target_session_attrs' "$T/check2.out" ||
    fail "check: no FAIL for several servers without target_session_attrs"

# ---------------------------------------------------------------- failover

# The standby falls behind (the primary's walsender to it stopped for LAG_S
# seconds, as a slow network would do; stopping the standby's receiver
# instead is not enough: the socket buffers still deliver what was sent)
# while the writers go on: the primary's WAL runs ahead of the standby's.
# With synchronized_standby_slots outboxd cannot receive past the standby
# meanwhile; without it, it can.
sender=$(at "$P1" "SELECT pid FROM pg_stat_replication WHERE application_name = '$PHYS'")
[[ -n $sender ]] || fail "no walsender streams to the standby"
step "stopping the primary's walsender to the standby (pid $sender) for ${LAG_S}s under load"
confirmed_before=$(at "$P1" "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'")
kill -STOP "$sender"
sleep "$LAG_S"
old_sender=$(at "$P1" "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$SLOT'")
primary_lsn=$(at "$P1" "SELECT pg_current_wal_lsn()")
step "kill -9 of the primary at $primary_lsn, outboxd's walsender $old_sender"
fault_mark primary_kill
primary_kill
kill_t=$KILL_T
info "while the standby lagged, the slot's confirmed position moved from $confirmed_before to $(awk -F= '/^lsn=/ { print $2 }' "$T/outboxd.offset") (offset file)"
standby_lsn=$(at "$P2" "SELECT pg_last_wal_receive_lsn()")
file_lsn=$(offset_file_lsn)
info "the standby had received up to $standby_lsn (the primary was at $primary_lsn or later); outboxd's offset file is at $file_lsn"
if ((STANDBY_SLOTS)); then
    # The guarantee of synchronized_standby_slots: nothing past the standby.
    [[ $(at "$P2" "SELECT '$standby_lsn'::pg_lsn >= '$file_lsn'::pg_lsn") == t ]] ||
        fail "outboxd's offset file ($file_lsn) is past what the standby received ($standby_lsn)"
fi

standby_promote
promote_t=$PROMOTE_T
timeline=$(PGTARGETSESSIONATTRS=any psql -XAt "host=127.0.0.1 port=$P2 user=postgres dbname=postgres replication=database" -c IDENTIFY_SYSTEM | cut -d'|' -f2)
assert_eq 2 "$timeline" "the promoted server's timeline"

# outboxd must stream again from the promoted server's slot, by itself.
# Without synchronized_standby_slots it may have ACKed past the fork; it
# then exits 1 to start afresh from there (resume.c): restarted here as
# systemd would, and counted.
FORK_RESTARTS=0
while :; do
    if ((!STANDBY_SLOTS)) && [[ -n $OUTBOXD_PID ]] && ! kill -0 "$OUTBOXD_PID" 2>/dev/null; then
        OUTBOXD_RC=0
        wait "$OUTBOXD_PID" || OUTBOXD_RC=$?
        OUTBOXD_PID=
        [[ $OUTBOXD_RC -eq 1 ]] || fail "outboxd exited with status $OUTBOXD_RC after the failover"
        info "outboxd exited 1 after the failover: $(grep -ao 'ERROR: this process has ACKed[^;]*' "$T/outboxd.log" | tail -n 1 | cut -c1-200)"
        FORK_RESTARTS=$((FORK_RESTARTS + 1))
        outboxd_start --no-wait "${OUTBOXD_ARGS[@]}"
    fi
    outboxd_assert_running
    pid=$(at "$P2" "SELECT coalesce(active_pid::text, '') FROM pg_replication_slots WHERE slot_name = '$SLOT'" || true)
    [[ -n $pid ]] && break
    (($(date +%s%3N) - kill_t < 60000)) ||
        fail "outboxd did not stream from the promoted server within 60s of the kill"
    sleep 0.1
done
back_t=$(date +%s%3N)
info "outboxd streams from the promoted server (walsender $pid): $((back_t - kill_t)) ms after the kill, $((back_t - promote_t)) ms after the promotion"
grep -q "the server's timeline is 2, the offset file's 1" "$T/outboxd.log" ||
    grep -q "on timeline 1, but on this server (promoted: timeline 2)" "$T/outboxd.log" ||
    fail "outboxd's log does not note the new timeline"
FORK_NOTE=$(grep -ao "WARN: the offset file [^ ]* is at [^ ]* on timeline 1, but on this server.*" "$T/outboxd.log" | head -n 1 | cut -c1-400 || true)
[[ -z $FORK_NOTE ]] || info "outboxd: $FORK_NOTE"
if ((STANDBY_SLOTS)) && [[ -n $FORK_NOTE ]]; then
    fail "with synchronized_standby_slots outboxd found its position past the fork"
fi

sleep "$LOAD_AFTER_S"
load_running || fail "the writers stopped after the failover"
step "stopping the load"
load_stop
stats=$(load_stats)
faults_drain

# ---------------------------------------------------------------- judge

verify_promoted
vrc=$V_RC rows=$V_ROWS messages=$V_MESSAGES missing=$V_MISSING unknown=$V_UNKNOWN
order=$V_ORDER dups=$V_DUPS dup_events=$V_DUP_EVENTS
summary="PostgreSQL $(at "$P2" 'SHOW server_version'), synchronized_standby_slots=$( ((STANDBY_SLOTS)) && echo "'$PHYS'" || echo "''"); kill -> streaming again $((back_t - kill_t)) ms (promotion -> streaming $((back_t - promote_t)) ms); rows=$rows messages=$messages missing=$missing unknown(in Kafka, not in the promoted table)=$unknown order_violations=$order duplicates=$dups ($dup_events events); restarts after the fork=$FORK_RESTARTS; load $stats; verify exit $vrc"
step "summary: $summary"
echo "$summary" >"$T/summary.txt"
if ((STANDBY_SLOTS)); then
    # The independent consumer too (lib.sh): every row of the promoted
    # table arrived, nothing else, headers and per-key order.
    check_delivery
    [[ $vrc -eq 0 ]] || { cat "$T/verify.err" >&2; fail "outboxd verify exited $vrc (0 = clean)"; }
    assert_eq 0 "$missing" "missing events"
    assert_eq 0 "$order" "order violations"
    assert_eq 0 "$unknown" "events in Kafka the promoted server does not have"
else
    info "without synchronized_standby_slots: reported, not judged (deploy/standby-failover.md, Failover slots)"
    [[ -n "${FAILOVER_REPORT:-}" ]] && cp "$T/summary.txt" "$T/verify.json" "$T/outboxd.log" "$FAILOVER_REPORT"/ 2>/dev/null
fi
e2e_pass
