#!/usr/bin/env bash
# tests/e2e/failover_slots.sh - a PostgreSQL 17 primary fails and its
# standby takes over; outboxd follows it on a failover slot (README,
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
# After the load, outboxd drains and stops, and `outboxd verify` judges
# against the PROMOTED server's table: 0 missing and 0 out of order;
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
if ((STANDBY_SLOTS)); then e2e_init failover_slots; else e2e_init failover_slots_unsynced; fi
SLOT=${OUTBOXD_SLOT:-outboxd}
PHYS=standby1
SIGTERMS=0 # faults_drain counts its SIGTERM
SB=$T/standby

# The standby is stopped at exit as well as the primary (lib.sh's cleanup).
_failover_cleanup() {
    local rc=$?
    set +eE
    trap - ERR
    if [[ -f "$SB/postmaster.pid" ]]; then
        _as_pg "$PG_BINDIR/pg_ctl" -D "$SB" -m immediate -w -t 30 stop >/dev/null 2>&1
    fi
    (exit "$rc")
    _e2e_cleanup
}
trap _failover_cleanup EXIT

# at PORT SQL: one query on the server at PORT (not following the primary).
at() { PGTARGETSESSIONATTRS=any psql -XAtq -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -c "$2"; }

# ---------------------------------------------------------------- servers

pg_start
P1=$PGPORT
load_setup 200 4
at "$P1" "SELECT pg_create_physical_replication_slot('$PHYS', true)" >/dev/null
pg_stop

step "copying the primary's data directory to the standby"
cp -a "$T/pgdata" "$SB"
rm -rf "$SB/pg_replslot/$PHYS" "$SB/postmaster.pid" # the primary's own slot
mkdir -p "$T/pgsock2"
[[ $(id -u) -ne 0 ]] || chown postgres "$T/pgsock2"
P2=$(_free_port)
while [[ $P2 == "$P1" ]]; do P2=$(_free_port); done
cat >>"$SB/postgresql.conf" <<EOF

# the standby (failover_slots.sh)
port = $P2
unix_socket_directories = '$T/pgsock2'
primary_conninfo = 'host=127.0.0.1 port=$P1 user=postgres dbname=postgres application_name=standby1'
primary_slot_name = '$PHYS'
hot_standby = on
hot_standby_feedback = on
sync_replication_slots = on
EOF
touch "$SB/standby.signal"
[[ $(id -u) -ne 0 ]] || chown postgres "$SB/standby.signal"
if ((STANDBY_SLOTS)); then
    # Only on the primary: on the promoted standby it would name a slot that
    # does not exist there, and its logical walsenders would wait for it.
    echo "synchronized_standby_slots = '$PHYS'" >>"$T/pgdata/postgresql.conf"
fi
_as_pg "$PG_BINDIR/pg_ctl" -D "$T/pgdata" -l "$T/postgres.log" -w -t 60 -o "$PG_CTL_OPTS" \
    start >>"$T/pg_ctl.log" 2>&1 || fail "the primary did not start again"
_as_pg "$PG_BINDIR/pg_ctl" -D "$SB" -l "$T/standby.log" -w -t 60 -o "$PG_CTL_OPTS" \
    start >>"$T/pg_ctl.log" 2>&1 || { tail -n 20 "$T/standby.log" >&2; fail "the standby did not start"; }
for ((i = 0; i < 100; i++)); do
    [[ $(at "$P1" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") == 1 ]] && break
    sleep 0.2
done
assert_eq 1 "$(at "$P1" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" \
    "standbys streaming from the primary"
assert_eq t "$(at "$P2" "SELECT pg_is_in_recovery()")" "the standby is in recovery"

# From here on psql (the writers, lib.sh's helpers) and outboxd follow the
# primary: both hosts listed, the read-write one taken.
export PGHOST=127.0.0.1,127.0.0.1 PGPORT=$P1,$P2 PGTARGETSESSIONATTRS=read-write
export PG_CONNINFO="host=127.0.0.1,127.0.0.1 port=$P1,$P2 user=postgres dbname=postgres target_session_attrs=read-write"
info "primary 127.0.0.1:$P1, standby 127.0.0.1:$P2; conninfo: $PG_CONNINFO"

broker_start
OUTBOXD_ARGS=(--set postgres.failover=on --set postgres.retry_max_ms=1000)
outboxd_start "${OUTBOXD_ARGS[@]}"
assert_eq t "$(at "$P1" "SELECT failover FROM pg_replication_slots WHERE slot_name = '$SLOT'")" \
    "the slot is a failover slot on the primary"
grep -q "created replication slot \"$SLOT\" (plugin $OUTBOXD_TEST_PLUGIN, failover" "$T/outboxd.log" ||
    fail "outboxd's log does not say it created a failover slot"

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
"$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "${OUTBOXD_ARGS[@]}" >"$T/check.out" 2>&1 || crc=$?
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
old_pm=$(head -n 1 "$T/pgdata/postmaster.pid")
old_sender=$(at "$P1" "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$SLOT'")
primary_lsn=$(at "$P1" "SELECT pg_current_wal_lsn()")
step "kill -9 of the primary (postmaster $old_pm and its children) at $primary_lsn, outboxd's walsender $old_sender"
fault_mark primary_kill
kill_t=$(date +%s%3N)
# shellcheck disable=SC2046 # the children's pids, one word each
kill -KILL "$old_pm" $(pgrep -P "$old_pm") 2>/dev/null || true
for ((i = 0; i < 50; i++)); do kill -0 "$old_pm" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$old_pm" 2>/dev/null || fail "the primary's postmaster survived SIGKILL"
info "while the standby lagged, the slot's confirmed position moved from $confirmed_before to $(awk -F= '/^lsn=/ { print $2 }' "$T/outboxd.offset") (offset file)"
standby_lsn=$(at "$P2" "SELECT pg_last_wal_receive_lsn()")
file_lsn=$(offset_file_lsn)
info "the standby had received up to $standby_lsn (the primary was at $primary_lsn or later); outboxd's offset file is at $file_lsn"
if ((STANDBY_SLOTS)); then
    # The guarantee of synchronized_standby_slots: nothing past the standby.
    [[ $(at "$P2" "SELECT '$standby_lsn'::pg_lsn >= '$file_lsn'::pg_lsn") == t ]] ||
        fail "outboxd's offset file ($file_lsn) is past what the standby received ($standby_lsn)"
fi

step "promoting the standby"
_as_pg "$PG_BINDIR/pg_ctl" -D "$SB" -w -t 60 promote >>"$T/pg_ctl.log" 2>&1 || fail "pg_ctl promote failed"
promote_t=$(date +%s%3N)
assert_eq f "$(at "$P2" "SELECT pg_is_in_recovery()")" "the standby is promoted"
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

step "outboxd verify against the promoted server's table"
vrc=0
"$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" "${OUTBOXD_ARGS[@]}" --json >"$T/verify.json" \
    2>"$T/verify.err" || vrc=$?
jq -c '{rows, messages, missing, duplicates, duplicate_events, unknown, order_violations, ok}' \
    "$T/verify.json" >&2 || { cat "$T/verify.err" >&2; fail "outboxd verify gave no JSON (exit $vrc)"; }
rows=$(jq -r .rows "$T/verify.json")
messages=$(jq -r .messages "$T/verify.json")
missing=$(jq -r .missing "$T/verify.json")
unknown=$(jq -r .unknown "$T/verify.json")
order=$(jq -r .order_violations "$T/verify.json")
dups=$(jq -r .duplicates "$T/verify.json")
dup_events=$(jq -r .duplicate_events "$T/verify.json")
summary="PostgreSQL $(at "$P2" 'SHOW server_version'), synchronized_standby_slots=$( ((STANDBY_SLOTS)) && echo "'$PHYS'" || echo "''"); kill -> streaming again $((back_t - kill_t)) ms (promotion -> streaming $((back_t - promote_t)) ms); rows=$rows messages=$messages missing=$missing unknown(in Kafka, not in the promoted table)=$unknown order_violations=$order duplicates=$dups ($dup_events events); restarts after the fork=$FORK_RESTARTS; load $stats; verify exit $vrc"
step "summary: $summary"
echo "$summary" >"$T/summary.txt"
if ((STANDBY_SLOTS)); then
    [[ $vrc -eq 0 ]] || { cat "$T/verify.err" >&2; fail "outboxd verify exited $vrc (0 = clean)"; }
    assert_eq 0 "$missing" "missing events"
    assert_eq 0 "$order" "order violations"
    assert_eq 0 "$unknown" "events in Kafka the promoted server does not have"
else
    info "without synchronized_standby_slots: reported, not judged (README, Failover slots)"
    [[ -n "${FAILOVER_REPORT:-}" ]] && cp "$T/summary.txt" "$T/verify.json" "$T/outboxd.log" "$FAILOVER_REPORT"/ 2>/dev/null
fi
e2e_pass
