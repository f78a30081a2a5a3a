#!/usr/bin/env bash
# Gap repair after the slot was lost (deploy/check-verify-repair.md "Gap repair"), on a real Kafka
# broker, judged over the whole run by `outboxd verify` (0 missing, 0
# unknown, 0 order violations; duplicates counted and reported):
#   1. invalidated: outboxd stopped, writers go on, the slot falls behind
#      max_slot_wal_keep_size and a checkpoint invalidates it (wal_status =
#      lost). outboxd must refuse at once (exit 2, the log names the fix) and
#      not retry; `outboxd repair` re-publishes the rows committed since the
#      last ACKed transaction (track_commit_timestamp = on) and creates the
#      slot again; outboxd streams on.
#   2. dropped: pg_drop_replication_slot while outboxd is stopped, writers go
#      on; track_commit_timestamp off, so the boundary is [outbox]
#      repair_column (its default, created_at); the daemon, with [postgres] on_slot_loss
#      = repair, repairs by itself at start and streams on.
#   3. invalidated under the running daemon: SIGSTOP (it reads and
#      confirms nothing), writers, WAL churn until the slot is lost, SIGCONT:
#      the stream is gone, the reconnect finds the slot lost, and with
#      on_slot_loss = repair the daemon repairs and streams on.
#   4. refusals: repair of a usable slot does nothing (exit 0); repair while
#      outboxd streams is refused (exit 2); without a time source it is
#      refused (exit 2) and names both fixes.
# Each phase's writer keeps committing while outboxd is down and after it
# is back, so the events of every side of each loss are in the judgement.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"
e2e_init slot_repair

pg_start
psql_q "ALTER SYSTEM SET track_commit_timestamp = on" >/dev/null
psql_q "ALTER SYSTEM SET max_slot_wal_keep_size = '48MB'" >/dev/null
psql_q "ALTER SYSTEM SET wal_keep_size = 0" >/dev/null
pg_restart
assert_eq on "$(psql_q "SHOW track_commit_timestamp")" "track_commit_timestamp"
create_load_procedure
broker_start

# load N TAG: N one-event-and-more transactions (every 10th rolled back).
load() { psql_q "CALL public.load($1, 50, 3, '$2')" >/dev/null; }

# churn_until_lost: WAL segments switched and checkpointed until the slot
# is invalidated (at most 40 rounds).
churn_until_lost() {
    local i st
    for ((i = 0; i < 40; i++)); do
        st=$(psql_q "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'outboxd'")
        [[ $st == lost ]] && { info "slot invalidated after $i rounds of WAL churn"; return 0; }
        psql_q "INSERT INTO public.other(note) SELECT repeat('x', 200) FROM generate_series(1, 20000)" >/dev/null
        psql_q "SELECT pg_switch_wal()" >/dev/null
        psql_q "CHECKPOINT" >/dev/null
    done
    fail "the slot was not invalidated (wal_status $st)"
}

# repair_cmd ARGS...: runs outboxd repair with the test's configuration;
# output in $T/repair.out, status in REPAIR_RC.
repair_cmd() {
    REPAIR_RC=0
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" repair -c "$T/outboxd.ini" "$@" >"$T/repair.out" \
        2>"$T/repair.err" || REPAIR_RC=$?
    cat "$T/repair.out" "$T/repair.err" >&2
}

create_other_table

# check_line STATUS: outboxd check's "gap repair" line must have STATUS.
check_line() {
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "${@:2}" >"$T/check.out" 2>&1 || true
    grep -E 'gap repair' "$T/check.out" >&2 || true
    grep -qE "^$1 +gap repair" "$T/check.out" || fail "check: the gap repair line is not '$1'"
}

step "phase 1: the slot invalidated while outboxd is stopped"
outboxd_start
check_line ok
grep -qE '^ok +gap repair.*rows are kept \(0 of [0-9]+ inserted deleted\); track_commit_timestamp = on' "$T/check.out" ||
    fail "check does not say the rows are kept and commit timestamps are tracked"
load 200 p1a
sleep 3 # p1a ends more than repair_margin (1 s) before the last ACKed commit
load 20 p1z
wait_caught_up 120
outboxd_stop || fail "outboxd exited $OUTBOXD_RC on SIGTERM"
grep -q '^commit_time=' "$T/outboxd.offset" || fail "the offset file holds no commit_time"
info "offset file: $(grep -E '^(format|lsn|commit_time)=' "$T/outboxd.offset" | tr '\n' ' ')"
load 150 p1b # committed while stopped: only the repair can send these
churn_until_lost
load 100 p1c # after the invalidation too
gap_rows=$(psql_q "SELECT count(*) FROM public.outbox_events WHERE aggregate_id LIKE 'p1b-%' OR aggregate_id LIKE 'p1c-%'")

step "outboxd refuses an invalidated slot at once: halted, /readyz and the metric say why, exit 2, no retry"
t0=$SECONDS
outboxd_start --no-wait --set postgres.halt_linger=4s
for ((i = 0; i < 300; i++)); do
    grep -q 'halted: serving /readyz' "$T/outboxd.log" && [[ -n $(outboxd_http_port) ]] && break
    sleep 0.1
done
# The first snapshot after the halt (published every 500 ms), within the
# linger: polled, not slept for.
for ((i = 0; i < 30; i++)); do
    http_get /readyz >"$T/readyz.out" || true
    [[ $(cat "$T/readyz.out") == *"replication slot is lost"* ]] && break
    sleep 0.1
done
body=$(cat "$T/readyz.out")
assert_eq 503 "$HTTP_STATUS" "/readyz while halted"
[[ $body == *"replication slot is lost"*"outboxd repair"* ]] || fail "/readyz does not say why: $body"
assert_eq 1 "$(metric_value outboxd_slot_lost)" "outboxd_slot_lost while halted"
assert_eq 0 "$(metric_value outboxd_streaming)" "outboxd_streaming while halted"
outboxd_wait_exit 30 || fail "outboxd did not exit on the invalidated slot"
assert_eq 2 "$OUTBOXD_RC" "exit status on an invalidated slot"
((SECONDS - t0 <= 15)) || fail "outboxd took $((SECONDS - t0)) s to give up"
grep -q 'is invalidated (wal_status = lost, reason unknown.*outboxd repair' "$T/outboxd.log" ||
    fail "the log does not name the invalidation and outboxd repair"
[[ $(grep -c 'attempt .* failed, next in' "$T/outboxd.log") -eq 0 ]] ||
    fail "outboxd retried an invalidated slot"

step "outboxd repair"
repair_cmd --set outbox.repair_margin=1s
assert_eq 0 "$REPAIR_RC" "repair exit status"
sent=$(sed -n 's/.*re-published \([0-9]*\) events.*/\1/p' "$T/repair.out")
[[ -n $sent ]] || fail "repair did not say how many events it re-published"
((sent >= gap_rows)) || fail "repair re-published $sent events, fewer than the $gap_rows committed while the slot was lost"
info "repair re-published $sent events; $gap_rows were committed after the stop"
# The boundary is the last ACKed commit (p1z's) less 1 s: p1a, committed
# 3 s before it, is not sent again; what is, is at most p1z and the gap.
p1z_rows=$(psql_q "SELECT count(*) FROM public.outbox_events WHERE aggregate_id LIKE 'p1z-%'")
((sent <= gap_rows + p1z_rows)) ||
    fail "repair re-published $sent events, more than the $gap_rows of the gap and the $p1z_rows of the last ACKed second"
KDUMP_TIMEOUT_MS=30000 kdump_all >"$T/after_repair.jsonl"
p1a_copies=$(jq -r 'select(.headers.aggregate_id // "" | startswith("p1a-")) | .headers.event_id' \
    "$T/after_repair.jsonl" | sort | uniq -d | wc -l)
assert_eq 0 "$p1a_copies" "p1a events (before the boundary) sent twice"
assert_sql "SELECT wal_status <> 'lost' FROM pg_replication_slots WHERE slot_name = 'outboxd'" \
    "the slot is new and usable"
repair_cmd
assert_eq 0 "$REPAIR_RC" "repair of a usable slot"
grep -q 'usable.*nothing to repair' "$T/repair.out" || fail "repair of a usable slot did not say nothing to repair"

outboxd_start
load 100 p1d
wait_caught_up 120

step "repair is refused while outboxd streams the slot"
repair_cmd
assert_eq 2 "$REPAIR_RC" "repair while the slot is in use"
grep -q 'in use by process' "$T/repair.err" || fail "the refusal does not say the slot is in use"
outboxd_stop || fail "outboxd exited $OUTBOXD_RC on SIGTERM"

step "phase 1b: insert order within transactions, after retention and VACUUM, with savepoints"
# Rows that retention deletes once delivered leave free space on early
# pages (VACUUM), which the free-space map hands to new rows: a
# transaction's later rows can land on earlier pages than its first. Three
# writers at once (ordload: 1-200 events per transaction over 6 keys each,
# several per key, every 10th rolled back; versions in insert order); w3's
# first event of each transaction goes in a released savepoint, so it
# carries the subtransaction's xid. The slot is dropped under the stopped
# daemon and repair re-publishes: verify must find every event in its
# key's order (repair orders by [outbox] order_column, seq). The old order
# (commit time, xmin, ctid) gave 0 missing and order violations here.
psql_q <<'SQL'
CREATE SCHEMA app_old;
CREATE PROCEDURE public.ordload(tag text, n int, keys int, sp boolean)
LANGUAGE plpgsql AS $$
DECLARE
    i int; j int; cnt int; v bigint := 0;
BEGIN
    PERFORM setseed(hashtext(tag) / 2147483648.0);
    FOR i IN 1..n LOOP
        cnt := 1 + floor(random() * 200)::int;
        FOR j IN 1..cnt LOOP
            v := v + 1;
            IF sp AND j = 1 THEN
                BEGIN -- a subtransaction, released at END
                    INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
                    VALUES (gen_random_uuid(), 'Ord', tag || '-' || floor(random() * keys)::int, v, 'Tick',
                            jsonb_build_object('i', i, 'j', j, 'pad', repeat('o', 100 + floor(random() * 300)::int)));
                EXCEPTION WHEN others THEN RAISE;
                END;
            ELSE
                INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
                VALUES (gen_random_uuid(), 'Ord', tag || '-' || floor(random() * keys)::int, v, 'Tick',
                        jsonb_build_object('i', i, 'j', j, 'pad', repeat('o', 100 + floor(random() * 300)::int)));
            END IF;
        END LOOP;
        IF i % 10 = 7 THEN ROLLBACK; ELSE COMMIT; END IF;
    END LOOP;
END $$;
SQL
outboxd_start
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
        SELECT gen_random_uuid(), 'Fill', 'fill-' || g % 50, 'Fill', jsonb_build_object('pad', repeat('f', 300))
        FROM generate_series(1, 3000) g" >/dev/null
load 20 p1k # rows after the filler's pages: VACUUM cannot truncate them away
wait_caught_up 120
outboxd_stop || fail "outboxd exited $OUTBOXD_RC on SIGTERM"
psql_q "DELETE FROM public.outbox_events WHERE aggregate_type = 'Fill'" >/dev/null
psql_q "VACUUM public.outbox_events" >/dev/null
info "retention: the delivered filler deleted and VACUUMed ($(psql_q "SELECT pg_relation_size('public.outbox_events') / 8192") pages)"
psql_q "SELECT pg_drop_replication_slot('outboxd')" >/dev/null
pids=()
for w in w1:false w2:false w3:true; do
    psql_q "CALL public.ordload('${w%%:*}', 30, 6, ${w##*:})" >/dev/null &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a writer failed"; done
ord_rows=$(psql_q "SELECT count(*) FROM public.outbox_events WHERE aggregate_type = 'Ord'")
behind=$(psql_q "SELECT count(*) FROM (SELECT ctid < lag(ctid) OVER (PARTITION BY pg_xact_commit_timestamp(xmin) ORDER BY seq) AS back FROM public.outbox_events WHERE aggregate_type = 'Ord') s WHERE back")
info "$ord_rows rows committed by 3 writers; $behind of them sit on an earlier place in the table than the row inserted before them in their transaction"
((behind > 0)) || fail "no row landed before its predecessor: the test does not test the physical order"
repair_cmd --set outbox.repair_margin=1s
assert_eq 0 "$REPAIR_RC" "repair exit status"
grep -q 'no order column' "$T/repair.err" && fail "repair warned of no order column on a table that has seq"
vrc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" --json >"$T/verify_order.json" 2>"$T/verify_order.err" || vrc=$?
info "verify after the repair: rows=$(jq -r .rows "$T/verify_order.json") missing=$(jq -r .missing "$T/verify_order.json") order_violations=$(jq -r .order_violations "$T/verify_order.json") unknown=$(jq -r .unknown "$T/verify_order.json"); first examples: $(jq -c '.order_examples[:3]' "$T/verify_order.json")"
assert_eq 0 "$(jq -r .missing "$T/verify_order.json")" "missing after the repair"
assert_eq 0 "$(jq -r .order_violations "$T/verify_order.json")" "order violations after the repair"
assert_eq 0 "$(jq -r .unknown "$T/verify_order.json")" "unknown messages after the repair"
assert_eq 0 "$vrc" "verify's exit status after the repair"

# check_order ARGS: outboxd check's lines into $T/check.out (its status is
# not judged: the other lines are not this phase's).
check_order() {
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "$@" >"$T/check.out" 2>&1 || true
    grep -E 'repair order' "$T/check.out" >&2 || true
}

step "check's repair order line: ok with seq, warn without, FAIL for a missing column set"
check_line ok
grep -qE '^ok +repair order.*order of seq \(filled from a sequence' "$T/check.out" ||
    fail "check does not name the order column and its sequence"
check_order --set outbox.order_column=aggregate_version
grep -qE '^ok +repair order.*aggregate_version \(not filled from a sequence here: it must grow' "$T/check.out" ||
    fail "check does not say what a column without a sequence must do"
check_order --set outbox.order_column=
grep -qE '^warn +repair order.*no order column.*sql/outbox_order_column.sql' "$T/check.out" ||
    fail "check's warning does not name the risk and the migration"
# A table of the schema before seq, then sql/outbox_order_column.sql (twice:
# idempotent); an application role that may insert gets the sequence.
psql_q "CREATE TABLE app_old.\"Old Outbox\" (LIKE public.outbox_events INCLUDING ALL);
        ALTER TABLE app_old.\"Old Outbox\" DROP COLUMN seq;
        INSERT INTO app_old.\"Old Outbox\" (event_id, aggregate_type, aggregate_id, event_type)
        VALUES (gen_random_uuid(), 'Old', 'o-1', 'Tick');
        CREATE ROLE app_writer;
        GRANT USAGE ON SCHEMA app_old TO app_writer;
        GRANT INSERT ON app_old.\"Old Outbox\" TO app_writer" >/dev/null
check_order --set 'outbox.table=app_old.Old Outbox'
grep -qE '^warn +repair order.*no order column' "$T/check.out" ||
    fail "check does not warn of a table without seq"
for i in 1 2; do
    psql -XAtq -v ON_ERROR_STOP=1 -c "SET outboxd.outbox_table = 'app_old.\"Old Outbox\"'" \
        -f "$E2E_SRC_DIR/sql/outbox_order_column.sql" >"$T/migrate.out" 2>&1 ||
        { cat "$T/migrate.out" >&2; fail "sql/outbox_order_column.sql failed (run $i)"; }
done
grep -q 'already has the column seq' "$T/migrate.out" || fail "the second run of the migration was not a no-op"
psql_q "SET ROLE app_writer;
        INSERT INTO app_old.\"Old Outbox\" (event_id, aggregate_type, aggregate_id, event_type)
        VALUES (gen_random_uuid(), 'Old', 'o-1', 'Tick')" >/dev/null
assert_eq "1 0" "$(psql_q "SELECT count(seq), count(*) - count(seq) - 1 FROM app_old.\"Old Outbox\"" | tr '|' ' ')" \
    "the migrated table numbers new rows (old rows NULL)"
check_order --set 'outbox.table=app_old.Old Outbox'
grep -qE '^ok +repair order.*order of seq \(filled from a sequence' "$T/check.out" ||
    fail "check does not accept the migrated table"
# republish without the column says what it risks; with a missing one set, refuses
rrc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" republish -c "$T/outboxd.ini" --set outbox.order_column= \
    --aggregate Ord:w1-0 --dry-run >"$T/republish.out" 2>&1 || rrc=$?
assert_eq 0 "$rrc" "republish --dry-run without an order column"
grep -q 'WARN: republish: the table .* has no order column.*out of order' "$T/republish.out" ||
    { cat "$T/republish.out" >&2; fail "republish does not warn of a table without an order column"; }
rrc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" republish -c "$T/outboxd.ini" --set outbox.order_column=nosuch \
    --aggregate Ord:w1-0 --dry-run >"$T/republish.out" 2>&1 || rrc=$?
assert_eq 2 "$rrc" "republish with an order_column the table lacks"
check_order --set outbox.order_column=nosuch
grep -qE '^FAIL +repair order.*order_column = nosuch, no such column' "$T/check.out" ||
    fail "check does not fail an order_column the table lacks"

step "phase 2: the slot dropped; track_commit_timestamp off; the daemon repairs at start"
psql_q "ALTER SYSTEM SET track_commit_timestamp = off" >/dev/null
pg_restart
load 100 p2a
psql_q "SELECT pg_drop_replication_slot('outboxd')" >/dev/null
load 100 p2b

check_line warn --set outbox.repair_column=
grep -qE 'repair_column' "$T/check.out" || fail "check's warning does not name repair_column"
check_line ok # the default repair_column, created_at
grep -qE '^ok +gap repair.*repair_column = created_at' "$T/check.out" ||
    fail "check does not name the default repair_column"

step "without a time source, repair is refused and names both fixes"
repair_cmd --set outbox.repair_column=
assert_eq 2 "$REPAIR_RC" "repair without track_commit_timestamp or repair_column"
grep -q 'track_commit_timestamp.*repair_column\|repair_column.*track_commit_timestamp' "$T/repair.err" ||
    fail "the refusal does not name both fixes"

step "the daemon stops on the dropped slot with on_slot_loss = halt (exit 2 at once: halt_linger 0)"
outboxd_start --no-wait --set postgres.halt_linger=0s
outboxd_wait_exit 30 || fail "outboxd did not exit on the dropped slot"
assert_eq 2 "$OUTBOXD_RC" "exit status on a dropped slot"

outboxd_start --set postgres.on_slot_loss=repair --set outbox.repair_margin=30s
# The slot is active from its creation on, while the repair still sends.
for ((i = 0; i < 600; i++)); do
    grep -q 'repair: slot "outboxd" was missing; re-published' "$T/outboxd.log" && break
    outboxd_assert_running
    sleep 0.1
done
grep -q 'repair: slot "outboxd" was missing; re-published' "$T/outboxd.log" ||
    fail "the daemon did not report its repair"
load 100 p2c
wait_caught_up 120

step "phase 3: the slot invalidated while the daemon streams it (stalled: SIGSTOP); on_slot_loss = repair"
kill -STOP "$OUTBOXD_PID"
load 100 p3a # committed while the slot falls behind: read by no one
churn_until_lost
load 50 p3b
kill -CONT "$OUTBOXD_PID"
for ((i = 0; i < 600; i++)); do
    grep -q 'repair: slot "outboxd" was invalidated (wal_status = lost); re-published' \
        "$T/outboxd.log" && break
    outboxd_assert_running
    sleep 0.1
done
grep -q 'repair: slot "outboxd" was invalidated (wal_status = lost); re-published' "$T/outboxd.log" ||
    fail "the daemon did not repair the slot invalidated under it"
grep -q 'the replication slot was lost: repairing' "$T/outboxd.log" ||
    fail "the daemon did not say it repairs a slot lost while running"
load 50 p3c
wait_caught_up 120
outboxd_stop || fail "outboxd exited $OUTBOXD_RC on SIGTERM"

step "the judge: every committed event of the whole run in Kafka"
rows=$(psql_q "SELECT count(*) FROM public.outbox_events")
OUTBOXD_ARGS=()
# (the retention's filler, deleted, is in no row: its topic is not judged)
KDUMP_ARGS="--exclude outbox.event.Fill" KDUMP_TIMEOUT_MS=60000 kdump_all >"$T/all.jsonl"
messages=$(wc -l <"$T/all.jsonl")
faults_verify "$rows" "$messages"
info "$rows events, $messages messages: $VERIFY_NOTE"

step "an outbox whose rows are deleted: check warns that repair cannot bring them back"
psql_q "DELETE FROM public.outbox_events WHERE aggregate_id NOT LIKE 'p1a-%'" >/dev/null
for ((i = 0; i < 150; i++)); do
    [[ $(psql_q "SELECT n_tup_del > 0 FROM pg_stat_user_tables WHERE relid = 'public.outbox_events'::regclass") == t ]] && break
    sleep 0.2
done
check_line warn
grep -qE 'most rows are deleted from the outbox table' "$T/check.out" ||
    fail "check does not say the rows are deleted"
e2e_pass
