#!/usr/bin/env bash
# Decoding on a standby while ANOTHER standby is promoted (issue 58 item 2,
# pg17.standby_promote_other; PostgreSQL 16+, the mock broker). Topology:
# primary P, standby S1 (outboxd's conninfo: its slot is created and read
# there), standby S2; both stream from P on physical slots.
#  1. outboxd starts against S1 (creating its slot there waits for a
#     running-transactions record: pg_log_standby_snapshot() on P);
#  2. three writers on P throughout (one long procedure each, cut by P's
#     death); S2 holds a physical slot for S1 (made while S2 was a standby,
#     as a failover manager's permanent slot would be);
#  3. S1 falls behind S2 (P's walsender to S1 stopped for a moment, as a slow
#     network would do: S1 must not have replayed past the point where S2's
#     new timeline forks, or it can never follow S2), P is killed (-9)
#     and S2 promoted (timeline 2);
#  4. S1 is re-pointed at S2 (ALTER SYSTEM primary_conninfo, reload; its
#     primary_slot_name is the slot S2 holds; recovery_target_timeline is
#     'latest' by default): it fetches S2's timeline history, replays the
#     rest of timeline 1 and goes on on timeline 2. outboxd stays connected
#     to S1 throughout; the time from the promotion to the first event
#     committed on S2 being confirmed on S1's slot (so ACKed) is measured;
#     writers go on against S2, and outboxd is killed (-9) and started
#     again on S1 (its offset file names timeline 1, S1 is on 2);
#  5. judged against S2's table: a dump of every topic (check_delivery:
#     each committed event, its headers, per-key order) and outboxd verify
#     (0 missing, 0 unknown, 0 order violations); outboxd has not exited.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/standby_lib.sh"
OUTBOXD_TEST_PLUGIN=pgoutput
# S1_AHEAD=1 (pg17.standby_promote_other_rebuild): S2 falls behind
# instead, so that S1 has replayed past the fork when S2 is promoted and can
# never follow it (asserted from S1's log and its timeline); S1 is rebuilt
# from S2 (a cold copy, so no slot), and outboxd, started with
# on_slot_loss = repair, repairs the gap from the table on the rebuilt S1:
# judged 0 missing, per-key order, and each event in Kafka that S2 lacks
# committed past what S2 had received when P died.
: "${S1_AHEAD:=0}"
e2e_init standby_promote_other
pg_start
(($(psql_q "SHOW server_version_num") >= 160000)) ||
    fail "logical decoding on a standby needs PostgreSQL 16+ (OUTBOXD_PG_VERSION)"
create_load_procedure
broker_start
# S2's slot on P before the cold copy, so that P keeps the WAL S2 needs
psql_q "SELECT pg_create_physical_replication_slot('standby2', true)" >/dev/null
standby_create standby1 "hot_standby_feedback = on"
rm -rf "${SB:?}/pg_replslot/standby2" # P's slot, not S1's
standby_create_second standby2 "hot_standby_feedback = on"
standby_start
info "P on $P1, S1 on $P2 (outboxd's), S2 on $P3"
# S1's physical slot on S2, ready before the failover (a standby may hold
# physical slots for its cascaded or future standbys)
at "$P3" "SELECT pg_create_physical_replication_slot('standby1', true)" >/dev/null

# writers PORT TAG N: three writers against the server at PORT, in the
# background (each N transactions of 1-3 events over 6 keys).
WRITERS=()
writers() {
    local w
    for w in 1 2 3; do
        PGPORT=$1 psql -XAtq -v ON_ERROR_STOP=1 -c "CALL public.load($3, 6, $w, '$2$w')" \
            >>"$T/writers.log" 2>&1 &
        WRITERS+=("$!")
        E2E_BG_PIDS+=("$!")
    done
}
# writers_wait [any]: waits for the writers; with "any", they may have
# failed (their server was killed under them).
writers_wait() {
    local pid
    for pid in "${WRITERS[@]}"; do
        wait "$pid" || [[ ${1:-} == any ]] || fail "a writer failed: $(tail -n 3 "$T/writers.log")"
    done
    WRITERS=()
}

slot_at() { at "$1" "SELECT $2 FROM pg_replication_slots WHERE slot_name = 'outboxd'"; }

step "1. outboxd reads from S1"
PG_CONNINFO="host=127.0.0.1 port=$P2 user=postgres dbname=postgres"
outboxd_start --no-wait --set postgres.monitor_interval_ms=1000
t0=$SECONDS
# active while its creation waits, too: outboxd's own line says it streams
until [[ $(slot_at "$P2" "coalesce(bool_or(active), false)") == t ]] &&
    grep -q 'streaming slot "outboxd" from' "$T/outboxd.log"; do
    ((SECONDS - t0 < 60)) || fail "outboxd's slot on S1 did not stream within 60 s"
    outboxd_assert_running
    at "$P1" "SELECT pg_log_standby_snapshot()" >/dev/null
    sleep 0.2
done
info "outboxd streams from S1's slot after $((SECONDS - t0)) s"

step "2. three writers on P"
writers "$P1" a 5000
wait_until 60 "the writers committing 600 events" \
    eval '[[ $(at "$P1" "SELECT count(*) FROM public.outbox_events") -ge 600 ]]'

# behind BEHIND_NAME BEHIND_PORT AHEAD_PORT: P's walsender to the standby
# BEHIND stopped until the other has replayed past what BEHIND received.
behind() {
    local sender lsn
    sender=$(at "$P1" "SELECT pid FROM pg_stat_replication WHERE application_name = '$1'")
    [[ -n $sender ]] || fail "no walsender streams to $1"
    kill -STOP "$sender"
    lsn=$(at "$2" "SELECT pg_last_wal_receive_lsn()")
    ahead() { [[ $(at "$3" "SELECT pg_last_wal_replay_lsn() > '$lsn'") == t ]]; }
    wait_until 30 "the other standby replaying past $1 ($lsn)" ahead "$@"
}
if ((S1_AHEAD)); then
    step "3. S2 behind S1, P killed (-9), S2 promoted"
    behind standby2 "$P3" "$P2"
else
    step "3. S1 behind S2, P killed (-9), S2 promoted"
    behind standby1 "$P2" "$P3"
fi
primary_kill
writers_wait any
s1_recv=$(at "$P2" "SELECT pg_last_wal_receive_lsn()")
s1_replay=$(at "$P2" "SELECT pg_last_wal_replay_lsn()")
s2_recv=$(at "$P3" "SELECT pg_last_wal_receive_lsn()")
info "at P's death: S1 received $s1_recv, replayed $s1_replay; S2 received $s2_recv; outboxd's slot confirmed $(slot_at "$P2" confirmed_flush_lsn)"
_as_pg "$PG_BINDIR/pg_ctl" -D "$SB2" -w -t 60 promote >>"$T/pg_ctl.log" 2>&1 || fail "pg_ctl promote of S2 failed"
PROMOTE_T=$(date +%s%3N)
assert_eq f "$(at "$P3" "SELECT pg_is_in_recovery()")" "S2 is promoted"
log_at_promotion=$(wc -l <"$T/outboxd.log")

step "4. S1 re-pointed at S2 (primary_conninfo, reload)"
at "$P2" "ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=$P3 user=postgres dbname=postgres application_name=standby1'" >/dev/null
at "$P2" "SELECT pg_reload_conf()" >/dev/null
# the first event committed on S2 (timeline 2), confirmed on S1's slot
marker_lsn=$(at "$P3" "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload) VALUES (gen_random_uuid(), 'Load', 'marker', 1, 'Promoted', '{}') RETURNING pg_current_wal_lsn()")
marker_confirmed() {
    outboxd_assert_running
    [[ $(slot_at "$P2" "confirmed_flush_lsn >= '$marker_lsn'") == t ]]
}
if ((S1_AHEAD)); then
    # S1 replayed past the fork: it cannot follow S2. Its walreceiver
    # fetches S2's history and gives up, every 5 s, naming the fork; S1
    # stays on timeline 1 and outboxd's slot there does not move.
    forked() { grep -q 'new timeline 2 forked off current database system timeline 1 before current recovery point' "$T/standby.log"; }
    wait_until 30 "S1 logging that S2's timeline forked before its recovery point" forked
    info "S1: $(grep -o 'new timeline 2 forked off.*' "$T/standby.log" | head -n 1)"
    assert_eq 1 "$(at "$P2" "SELECT coalesce((SELECT received_tli FROM pg_stat_wal_receiver), 1)")" "S1's timeline"
    assert_eq f "$(slot_at "$P2" "confirmed_flush_lsn > '$s1_replay'")" "outboxd's slot on S1 moved past S1's replay point"
    outboxd_assert_running # nothing tells outboxd: it waits on a standby that replays nothing more
    # what an operator's monitoring of outboxd shows meanwhile (reported)
    http_get /readyz >/dev/null
    info "meanwhile: /readyz $HTTP_STATUS, outboxd_slot_lag_bytes $(metric_value outboxd_slot_lag_bytes), S1's wal receiver $(at "$P2" "SELECT coalesce((SELECT status FROM pg_stat_wal_receiver), 'none')")"
    # outboxd says it: its monitor reads S1's WAL receiver (standby.h),
    # and warns once it has not streamed for 30 s
    outboxd_log_wait 'WARN: the standby this slot is on has received no WAL for [0-9]+ s' 90
    info "outboxd: $(grep -o 'WARN: the standby this slot is on has received no WAL for [0-9]* s ([^)]*)' "$T/outboxd.log" | head -n 1)"

    step "4b. S1 rebuilt from S2 (a cold copy: its slot is gone), outboxd with on_slot_loss = repair"
    outboxd_stop
    _as_pg "$PG_BINDIR/pg_ctl" -D "$SB" -m immediate -w -t 30 stop >>"$T/pg_ctl.log" 2>&1
    _as_pg "$PG_BINDIR/pg_ctl" -D "$SB2" -m fast -w -t 30 stop >>"$T/pg_ctl.log" 2>&1
    rm -rf "${SB:?}"
    cp -a "$SB2" "$SB"
    rm -rf "${SB:?}/pg_replslot/"* "$SB/postmaster.pid"
    cat >>"$SB/postgresql.conf" <<EOF

# S1 again, rebuilt from S2 (standby_promote_other.sh)
port = $P2
unix_socket_directories = '$T/pgsock2'
primary_conninfo = 'host=127.0.0.1 port=$P3 user=postgres dbname=postgres application_name=standby1'
primary_slot_name = 'standby1'
EOF
    touch "$SB/standby.signal"
    [[ $(id -u) -ne 0 ]] || chown postgres "$SB/standby.signal"
    _as_pg "$PG_BINDIR/pg_ctl" -D "$SB2" -l "$T/standby2.log" -w -t 60 -o "$PG_CTL_OPTS" start >>"$T/pg_ctl.log" 2>&1 ||
        fail "S2 did not start again"
    _as_pg "$PG_BINDIR/pg_ctl" -D "$SB" -l "$T/standby.log" -w -t 60 -o "$PG_CTL_OPTS" start >>"$T/pg_ctl.log" 2>&1 ||
        fail "the rebuilt S1 did not start"
    s1_streams() { [[ $(at "$P3" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") == 1 ]]; }
    wait_until 30 "the rebuilt S1 streaming from S2" s1_streams
    writers "$P3" b 150
    # The offset file says outboxd streamed, the slot is missing: repair
    # from S2's table, read on S1 in the new slot's exported snapshot.
    outboxd_start --no-wait --set postgres.on_slot_loss=repair --set outbox.repair_margin=5s
    t0=$(date +%s%3N)
    until [[ $(slot_at "$P2" "coalesce(bool_or(active), false)") == t ]] &&
        (($(grep -c 'streaming slot "outboxd" from' "$T/outboxd.log") > 1)); do
        (($(date +%s%3N) - t0 < 60000)) || fail "outboxd's slot on the rebuilt S1 did not stream within 60 s"
        outboxd_assert_running
        at "$P3" "SELECT pg_log_standby_snapshot()" >/dev/null
        sleep 0.2
    done
    took_ms=$(($(date +%s%3N) - t0))
    outboxd_log_wait 'repair: slot "outboxd" was missing; re-published [0-9]+ events'
    repaired=$(sed -n 's/.*repair: slot "outboxd" was missing; re-published \([0-9]*\) events.*/\1/p' "$T/outboxd.log" | tail -n 1)
    info "outboxd's start on the rebuilt S1 to streaming: $took_ms ms, the repair re-published $repaired events"
    writers_wait
    caught_up_s2() { [[ $(slot_at "$P2" "confirmed_flush_lsn >= '$(at "$P3" "SELECT pg_current_wal_lsn()")'::pg_lsn - 64") == t ]]; }
    wait_until 60 "S1's slot confirmed up to S2's WAL" caught_up_s2
    outboxd_stop

    step "5. judged against S2's table"
    OUTBOXD_ARGS=(--set "postgres.conninfo=host=127.0.0.1 port=$P3 user=postgres dbname=postgres")
    verify_promoted
    assert_eq 0 "$V_MISSING" "events missing from Kafka"
    # Unknown (in Kafka, not in S2's table): only events outboxd sent from
    # S1 past the fork, whose commit S2 never received (their commit_lsn
    # header at or past what S2 had received at P's death, less 256 bytes:
    # a commit record that began before and ended after).
    if ((V_UNKNOWN > 0)); then
        kdump_all >"$T/all.jsonl"
        at "$P3" "SELECT event_id::text FROM public.outbox_events" | LC_ALL=C sort -u >"$T/rows.ids"
        jq -r '[.headers.event_id // "-", .headers.commit_lsn // ""] | @tsv' "$T/all.jsonl" |
            LC_ALL=C sort -u -t $'\t' -k1,1 >"$T/messages.tsv"
        LC_ALL=C join -t $'\t' -v 1 "$T/messages.tsv" "$T/rows.ids" >"$T/unknown.tsv"
        values=$(awk -F '\t' -v q="'" '{ v = ($2 == "") ? "NULL" : q $2 q; printf "%s(%s)", (NR > 1) ? "," : "", v }' "$T/unknown.tsv")
        unexplained=$(at "$P3" "SELECT count(*) FROM (VALUES $values) v(l) WHERE l IS NULL OR l::pg_lsn < '$s2_recv'::pg_lsn - 256")
        assert_eq 0 "$unexplained" "unknown events committed before S2's received position $s2_recv"
    fi
    # The writers on S2 use keys of their own: per-key order is judged.
    assert_eq 0 "$V_ORDER" "per-key order violations"
    info "rows $V_ROWS, messages $V_MESSAGES, unknown $V_UNKNOWN (sent from S1 past the fork), duplicates $V_DUPS; repair re-published $repaired; start on the rebuilt S1 to streaming $took_ms ms"
    e2e_pass
fi
wait_until 60 "S2's first event confirmed on S1's slot" marker_confirmed
took_ms=$(($(date +%s%3N) - PROMOTE_T))
echo "$took_ms" >"$T/takeover_ms"
assert_eq 2 "$(at "$P2" "SELECT received_tli FROM pg_stat_wal_receiver")" "S1's timeline (received)"
reconnects=$(tail -n "+$log_at_promotion" "$T/outboxd.log" | grep -c 'streaming slot "outboxd"' || true)
info "promotion of S2 to its first event confirmed on S1: $took_ms ms ($reconnects reconnects of outboxd meanwhile)"
tail -n "+$log_at_promotion" "$T/outboxd.log" | grep -E 'WARN|ERROR|reconnect|timeline' | head -n 20 >&2 || true
writers "$P3" b 150
# A start on S1 after its switch: the offset file names timeline 1, S1 is
# on 2 (its history read from S1, a standby); kill -9 and start again
# while the writers go on against S2.
wait_until 60 "the writers committing on S2" \
    eval '[[ $(at "$P3" "SELECT count(*) FROM public.outbox_events WHERE aggregate_id LIKE '"'b%'"'") -ge 100 ]]'
kill -KILL "$OUTBOXD_PID"
wait "$OUTBOXD_PID" 2>/dev/null || true
OUTBOXD_PID=
n0=$(grep -c 'streaming slot "outboxd" from' "$T/outboxd.log")
outboxd_start --no-wait --set postgres.monitor_interval_ms=1000
restarted() { (($(grep -c 'streaming slot "outboxd" from' "$T/outboxd.log") > n0)); }
wait_until 60 "outboxd streaming again from S1 after a kill -9" restarted
outboxd_assert_running
info "restarted on S1: $(grep -o 'streaming slot "outboxd" from .*' "$T/outboxd.log" | tail -n 1 | cut -c1-220)"
grep -ao "WARN: the server's timeline is 2, the offset file's 1[^;]*" "$T/outboxd.log" | head -n 1 >&2 || true
writers_wait
caught_up() {
    [[ $(at "$P2" "SELECT confirmed_flush_lsn >= pg_last_wal_replay_lsn() - 64 AND pg_last_wal_replay_lsn() >= '$(at "$P3" "SELECT pg_current_wal_lsn()")'::pg_lsn - 64 FROM pg_replication_slots WHERE slot_name = 'outboxd'") == t ]]
}
wait_until 60 "S1's slot confirmed up to S2's WAL" caught_up
outboxd_stop

step "5. judged against S2's table"
PGPORT=$P3 check_delivery
OUTBOXD_ARGS=(--set "postgres.conninfo=host=127.0.0.1 port=$P3 user=postgres dbname=postgres")
verify_promoted
assert_eq 0 "$V_MISSING" "events missing from Kafka"
assert_eq 0 "$V_UNKNOWN" "messages of no committed row"
assert_eq 0 "$V_ORDER" "per-key order violations"
info "rows $V_ROWS, messages $V_MESSAGES, duplicates $V_DUPS; promotion of S2 to streaming again on S1: $took_ms ms"
e2e_pass
