#!/usr/bin/env bash
# tests/e2e/failover_repair.sh - a PostgreSQL 15 primary fails over to a
# standby that has no copy of the slot (no failover slots before 17), and
# outboxd closes the gap by itself with [postgres] on_slot_loss = repair
# (deploy/check-verify-repair.md "Gap repair"), on a real Kafka broker.
#
# A primary (track_commit_timestamp = on) and a physical streaming standby
# (standby_lib.sh); outboxd's conninfo names both with
# target_session_attrs=read-write. Three writers (load.sh) write; the
# primary is killed with SIGKILL and the standby promoted. outboxd reaches
# the promoted server, finds the slot missing while its offset file says
# it streamed one, repairs (re-publishes what was committed since the last
# ACKed transaction, from the promoted server's table, and creates the
# slot), and streams on, without exiting. The time from the kill to
# streaming again is measured.
#
# The judge is `outboxd verify` against the PROMOTED server's table: 0
# missing, 0 out of order; duplicates counted. Transactions the writers
# committed on the old primary that never reached the standby (replication
# is asynchronous) are in neither the new table nor, unless outboxd had
# sent them, Kafka: such events are "unknown" to verify. Each unknown event
# must be one of those (its commit_lsn header past what the standby had
# received at the kill), else the test fails; they are reported as their
# own figure (no setting of outboxd can bring back what the promoted server
# does not have; deploy/check-verify-repair.md); so are the order violations
# that follow from them (the writers reuse those events' aggregate
# versions), while order is judged in a run without them.
: "${WRITERS:=3}"
: "${LOAD_BEFORE_S:=8}"
: "${LOAD_AFTER_S:=6}"
: "${LOAD_PAUSE:=0.1}"
export LOAD_PAUSE
export E2E_KAFKA=real
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/load.sh"
source "$(dirname "${BASH_SOURCE[0]}")/faults_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/standby_lib.sh"
e2e_init failover_repair
SLOT=${OUTBOXD_SLOT:-outboxd}
SIGTERMS=0

pg_start
psql_q "ALTER SYSTEM SET track_commit_timestamp = on" >/dev/null
load_setup 200 4
standby_create standby1
standby_start
assert_eq on "$(at "$P2" "SHOW track_commit_timestamp")" "track_commit_timestamp on the standby"

export PGHOST=127.0.0.1,127.0.0.1 PGPORT=$P1,$P2 PGTARGETSESSIONATTRS=read-write
export PG_CONNINFO="host=127.0.0.1,127.0.0.1 port=$P1,$P2 user=postgres dbname=postgres target_session_attrs=read-write"
info "primary 127.0.0.1:$P1, standby 127.0.0.1:$P2; conninfo: $PG_CONNINFO"

broker_start
OUTBOXD_ARGS=(--set postgres.on_slot_loss=repair --set postgres.retry_max_ms=1000
    --set outbox.repair_margin=5s)
outboxd_start "${OUTBOXD_ARGS[@]}"
assert_eq "" "$(at "$P2" "SELECT slot_name FROM pg_replication_slots WHERE slot_name = '$SLOT'")" \
    "no copy of the slot on the PostgreSQL 15 standby"

fault_mark none
load_start "$WRITERS" 600
sleep "$LOAD_BEFORE_S"
load_running || fail "the writers stopped"
wait_for_confirmed_lsn "$(at "$P1" "SELECT pg_current_wal_lsn()")" 60

primary_lsn=$(at "$P1" "SELECT pg_current_wal_lsn()")
step "kill -9 of the primary at $primary_lsn (load $(load_stats))"
fault_mark primary_kill
primary_kill
SB_RECEIVED=$(at "$P2" "SELECT pg_last_wal_receive_lsn()")
info "the standby had received up to $SB_RECEIVED"
standby_promote

# outboxd must stream again from the promoted server, by itself: its slot
# is new there, created by the repair.
while :; do
    outboxd_assert_running
    pid=$(at "$P2" "SELECT coalesce(active_pid::text, '') FROM pg_replication_slots WHERE slot_name = '$SLOT'" || true)
    if [[ -n $pid ]] && grep -q 'repair: slot "'"$SLOT"'" was missing; re-published' "$T/outboxd.log"; then
        break
    fi
    (($(date +%s%3N) - KILL_T < 90000)) ||
        fail "outboxd did not repair and stream from the promoted server within 90s of the kill"
    sleep 0.1
done
back_t=$(date +%s%3N)
info "outboxd repaired and streams from the promoted server (walsender $pid): $((back_t - KILL_T)) ms after the kill, $((back_t - PROMOTE_T)) ms after the promotion"
grep -q 'does not exist on this server' "$T/outboxd.log" ||
    fail "outboxd's log does not say the slot is missing on the promoted server"
repaired=$(sed -n 's/.*repair: slot "[^"]*" was missing; re-published \([0-9]*\) events.*/\1/p' "$T/outboxd.log" | tail -n 1)
info "the repair re-published $repaired events"

sleep "$LOAD_AFTER_S"
load_running || fail "the writers stopped after the failover"
step "stopping the load"
load_stop
stats=$(load_stats)
faults_drain

verify_promoted
# Unknown events (in Kafka, not in the promoted table) fail the test unless
# each is of a transaction whose commit the standby never received: its
# commit_lsn header at or past what the standby had received at the kill
# (less 256 bytes: a commit record that began before that point and ended
# past it). Anything else in Kafka that the table lacks is a defect.
if ((V_UNKNOWN > 0)); then
    KDUMP_TIMEOUT_MS=60000 kdump_all >"$T/all.jsonl"
    at "$P2" "SELECT event_id::text FROM public.outbox_events" | LC_ALL=C sort -u >"$T/rows.ids"
    jq -r '[.headers.event_id // "-", .headers.commit_lsn // ""] | @tsv' "$T/all.jsonl" |
        LC_ALL=C sort -u -t $'\t' -k1,1 >"$T/messages.tsv"
    LC_ALL=C join -t $'\t' -v 1 "$T/messages.tsv" "$T/rows.ids" >"$T/unknown.tsv"
    n_unknown=$(wc -l <"$T/unknown.tsv")
    ((n_unknown > 0)) || fail "verify counted $V_UNKNOWN unknown messages, the dump has no event the table lacks"
    values=$(awk -F '\t' -v q="'" '{ v = ($2 == "") ? "NULL" : q $2 q; printf "%s(%s)", (NR > 1) ? "," : "", v }' \
        "$T/unknown.tsv")
    unexplained=$(at "$P2" "SELECT count(*) FROM (VALUES $values) v(l)
        WHERE l IS NULL OR l::pg_lsn < '$SB_RECEIVED'::pg_lsn - 256")
    info "unknown: $n_unknown events in Kafka the promoted table lacks; $unexplained of them committed before what the standby had received ($SB_RECEIVED)"
    ((unexplained == 0)) ||
        fail "$unexplained events in Kafka are not in the promoted table although the standby had received their commit: $(head -n 5 "$T/unknown.tsv" | tr '\t\n' ' ;')"
fi
step "summary: PostgreSQL $(at "$P2" 'SHOW server_version'), no failover slot, on_slot_loss = repair; kill -> streaming again $((back_t - KILL_T)) ms (promotion -> $((back_t - PROMOTE_T)) ms); repair re-published $repaired; rows=$V_ROWS messages=$V_MESSAGES missing=$V_MISSING unknown(in Kafka, not in the promoted table)=$V_UNKNOWN order_violations=$V_ORDER duplicates=$V_DUPS ($V_DUP_EVENTS events); load $stats"
assert_eq 0 "$V_MISSING" "missing events"
# Without failover slots (and synchronized_standby_slots, 17+) outboxd may
# have published events the standby never received: "unknown" here. The
# writers then reuse their aggregate versions on the promoted server, which
# verify counts as order violations of those keys. So order is judged when
# the two servers did not diverge under outboxd; otherwise it is reported.
if ((V_UNKNOWN == 0)); then
    # (Rehearsal W: 2 violations with 0 unknown, once; the examples were
    # not printed then.)
    ((V_ORDER == 0)) || info "order violations, first examples: $(jq -c '.order_examples[:5]' "$T/verify.json")"
    assert_eq 0 "$V_ORDER" "order violations"
else
    info "the old primary published $V_UNKNOWN events the promoted server does not have (asynchronous replication, deploy/check-verify-repair.md \"Gap repair\"); order violations $V_ORDER, reported, not judged: $(jq -c '.order_examples[:3]' "$T/verify.json")"
fi
e2e_pass
