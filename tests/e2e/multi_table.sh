#!/usr/bin/env bash
# Several outbox tables in one relay ([outbox.NAME] sections), on real
# Kafka, with OUTBOXD_TEST_PLUGIN (real.pgoutput.multi_table in CI; the
# wal2json copy is full_only):
#  - three tables, each its own section (set through OUTBOXD_OUTBOX_<NAME>_*
#    variables): orders (public.outbox_events), audit (app.audit_outbox,
#    same columns) and billing (app.billing_outbox: other column names, a
#    text payload, headers under other names); orders and audit route to
#    the same topic template, billing to its own;
#  - `outboxd config` names every section and its sources (one key by
#    --set outbox.NAME.key); `outboxd check` prints the per-table lines
#    once per section, named;
#  - interleaved transactions from two sessions writing to all three
#    tables (some to two in one transaction), and one aggregate whose
#    events alternate between orders and audit (one transaction writing
#    to both): every row arrives once, byte for byte (topic, key, value,
#    every header); the events of an aggregate are in version order in its
#    partition across the two tables, commit_lsn never goes backwards in a
#    partition, and the two events of one transaction share one commit_lsn;
#  - outboxd verify reads every table: clean, then, with rows written to
#    audit and billing while outboxd is stopped, exactly those missing;
#  - a restart resumes from the one offset file: those rows arrive, none
#    twice, and verify is clean again;
#  - the slot lost while rows go to all three tables: on_slot_loss = repair
#    re-publishes from every table (created_at), merged in commit order;
#    verify is clean;
#  - pgoutput: one of the tables dropped from the publication stops outboxd
#    (the membership proof covers every table).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init multi_table
pg_start

step "creating app.audit_outbox and app.billing_outbox, publishing them"
psql_q "CREATE SCHEMA app;
CREATE TABLE app.audit_outbox (LIKE public.outbox_events INCLUDING ALL);
CREATE TABLE app.billing_outbox (
    id uuid PRIMARY KEY, kind text NOT NULL, ref text NOT NULL, ver bigint,
    etype text NOT NULL, body text, created_at timestamptz NOT NULL DEFAULT now());
ALTER PUBLICATION outboxd_pub ADD TABLE app.audit_outbox, app.billing_outbox;
-- Version ver of the aggregate Order ord-(v % 3): in app.audit_outbox
-- (OrderAudited) or public.outbox_events (OrderChanged).
CREATE FUNCTION public.ord_event(v int, ver int, audited bool) RETURNS void
LANGUAGE plpgsql AS \$\$ BEGIN
    IF audited THEN
        INSERT INTO app.audit_outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        VALUES (gen_random_uuid(), 'Order', 'ord-' || (v % 3), ver, 'OrderAudited', jsonb_build_object('v', ver));
    ELSE
        INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        VALUES (gen_random_uuid(), 'Order', 'ord-' || (v % 3), ver, 'OrderChanged', jsonb_build_object('v', ver));
    END IF;
END \$\$;"

# The sections, as environment variables (outboxd, check and verify alike).
export OUTBOXD_OUTBOX_ORDERS_TABLE=public.outbox_events
export OUTBOXD_OUTBOX_ORDERS_TOPIC='orders.${aggregate_type}'
export OUTBOXD_OUTBOX_AUDIT_TABLE=app.audit_outbox
export OUTBOXD_OUTBOX_AUDIT_TOPIC='orders.${aggregate_type}'
export OUTBOXD_OUTBOX_BILLING_TABLE=app.billing_outbox
export OUTBOXD_OUTBOX_BILLING_TOPIC='billing.${kind}'
export OUTBOXD_OUTBOX_BILLING_COLUMN_EVENT_ID=id
export OUTBOXD_OUTBOX_BILLING_COLUMN_AGGREGATE_TYPE=kind
export OUTBOXD_OUTBOX_BILLING_COLUMN_AGGREGATE_ID=ref
export OUTBOXD_OUTBOX_BILLING_COLUMN_AGGREGATE_VERSION=ver
export OUTBOXD_OUTBOX_BILLING_COLUMN_EVENT_TYPE=etype
export OUTBOXD_OUTBOX_BILLING_COLUMN_PAYLOAD=body
export OUTBOXD_OUTBOX_BILLING_HEADERS='event_id:eid, event_type, aggregate_id:ref, commit_lsn'

broker_start --partitions 3
outboxd_start

step "outboxd config: every section, with its sources"
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" config -c "$T/outboxd.ini" \
    --set outbox.billing.column.aggregate_version=ver >"$T/config.out"
for want in '^\[outbox\.orders\]$' '^\[outbox\.audit\]$' '^\[outbox\.billing\]$' \
    '^table = app\.billing_outbox  ; environment$' '^column\.aggregate_version = ver  ; --set$' \
    '^column\.payload = body  ; environment$'; do
    grep -qE "$want" "$T/config.out" || { cat "$T/config.out" >&2; fail "config: no line $want"; }
done
info "ok: config names the three sections and their sources"

step "outboxd check: the per-table lines, once per section"
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" >"$T/check.out" 2>&1 || rc=$?
for want in \
    '^ok   outbox table public\.outbox_events \[outbox\.orders\]: ' \
    '^ok   outbox table app\.audit_outbox \[outbox\.audit\]: ' \
    '^ok   outbox table app\.billing_outbox \[outbox\.billing\]: ' \
    '^ok   role "postgres" \[outbox\.billing\]: superuser, SELECT on app\.billing_outbox' \
    '^ok   publication( "outboxd_pub")? \[outbox\.audit\]' \
    '^ok   publication( "outboxd_pub")? \[outbox\.billing\]' \
    '^ok   gap repair \[outbox\.audit\]: rows are kept.*repair_column = created_at' \
    '^ok   topics \[outbox\.billing\]: '; do
    grep -qE "$want" "$T/check.out" || { cat "$T/check.out" >&2; fail "check: no line $want"; }
done
! grep -q '^FAIL' "$T/check.out" || { cat "$T/check.out" >&2; fail "check: a FAIL line"; }
info "ok: check covers every table (exit $rc)"

step "interleaved transactions over three tables from two sessions, and one aggregate over two tables"
# Session a: orders (Cart), every third transaction also a billing row.
psql_q "DO \$\$ BEGIN FOR i IN 1..60 LOOP
    INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
    VALUES (gen_random_uuid(), 'Cart', 'cart-' || (i % 7), i, 'CartChanged',
            jsonb_build_object('n', i, 's', 'grüße €', 'q', 'a\"b'));
    IF i % 3 = 0 THEN
        INSERT INTO app.billing_outbox (id, kind, ref, ver, etype, body)
        VALUES (gen_random_uuid(), 'Invoice', 'inv-' || i, NULL, 'InvoiceOpened', 'from a ' || i || E' \u00e9\t\"x\"');
    END IF;
    COMMIT;
END LOOP; END \$\$;" &
pid_a=$!
# Session b: billing, every fourth transaction also an audit row.
psql_q "DO \$\$ BEGIN FOR i IN 1..60 LOOP
    INSERT INTO app.billing_outbox (id, kind, ref, ver, etype, body)
    VALUES (gen_random_uuid(), 'Payment', 'pay-' || (i % 5), i, 'PaymentTaken',
            CASE WHEN i % 10 = 0 THEN NULL ELSE repeat('p', i) END);
    IF i % 4 = 0 THEN
        INSERT INTO app.audit_outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        VALUES (gen_random_uuid(), 'Audit', 'aud-' || i, NULL, 'Seen', '[1, 2]');
    END IF;
    COMMIT;
END LOOP; END \$\$;" &
pid_b=$!
# The aggregate Order ord-N: version 2v in orders or audit by v's parity,
# and every fifth v 2v in orders then 2v+1 in audit, in one transaction.
psql_q "DO \$\$ BEGIN FOR v IN 1..45 LOOP
    IF v % 5 = 0 THEN
        PERFORM public.ord_event(v, 2 * v, false);
        PERFORM public.ord_event(v, 2 * v + 1, true);
    ELSE
        PERFORM public.ord_event(v, 2 * v, v % 2 = 1);
    END IF;
    COMMIT;
END LOOP; END \$\$;"
wait "$pid_a" || fail "session a failed"
wait "$pid_b" || fail "session b failed"
wait_caught_up 60

# expected_lines: one line per row of the three tables, as the message
# must be: topic, key hex, value hex, "name=value hex" of every header in
# byte order (commit_lsn's value as *).
expected_lines() {
    psql -XAtq -v ON_ERROR_STOP=1 -F $'\t' <<'EOF'
CREATE FUNCTION pg_temp.h(t text) RETURNS text LANGUAGE sql AS
  $$ SELECT encode(convert_to(t, 'UTF8'), 'hex') $$;
CREATE FUNCTION pg_temp.hs(a text[]) RETURNS text LANGUAGE sql AS
  $$ SELECT string_agg(x, ',' ORDER BY x COLLATE "C") FROM unnest(a) x $$;
SELECT 'orders.' || aggregate_type, pg_temp.h(aggregate_id), coalesce(pg_temp.h(payload::text), '-'),
       pg_temp.hs(ARRAY['event_id=' || pg_temp.h(event_id::text), 'event_type=' || pg_temp.h(event_type),
                        'aggregate_type=' || pg_temp.h(aggregate_type), 'aggregate_id=' || pg_temp.h(aggregate_id),
                        'commit_lsn=*']
                  || CASE WHEN aggregate_version IS NULL THEN '{}'::text[]
                          ELSE ARRAY['aggregate_version=' || pg_temp.h(aggregate_version::text)] END)
FROM (SELECT * FROM public.outbox_events UNION ALL SELECT * FROM app.audit_outbox) r
UNION ALL
SELECT 'billing.' || kind, pg_temp.h(ref), coalesce(pg_temp.h(body), '-'),
       pg_temp.hs(ARRAY['eid=' || pg_temp.h(id::text), 'event_type=' || pg_temp.h(etype),
                        'ref=' || pg_temp.h(ref), 'commit_lsn=*'])
FROM app.billing_outbox;
EOF
}

# message_lines DUMP: the same from a dump.
message_lines() {
    jq -r '[.topic, (.key_hex // "-"), (.value_hex // "-"),
            ([.headers_list[][0] as $n | "\($n)=" + (if $n == "commit_lsn" then "*"
               else (.headers_hex[$n] // "-") end)] | sort | join(","))] | @tsv' <"$1"
}

# compare_all: every row once, byte for byte, and the order properties.
compare_all() {
    local dump=$T/dump.$1.jsonl
    kdump_all >"$dump" 2>"$T/kdump.err" || { cat "$T/kdump.err" >&2; fail "kdump failed"; }
    expected_lines | sort >"$T/expected.$1.tsv"
    message_lines "$dump" | sort >"$T/messages.$1.tsv"
    if ! diff "$T/expected.$1.tsv" "$T/messages.$1.tsv" >"$T/diff.$1" 2>&1; then
        head -n 20 "$T/diff.$1" >&2
        fail "$1: messages differ from the rows (< rows, > messages; $T/diff.$1)"
    fi
    info "ok: $(wc -l <"$T/expected.$1.tsv") rows of three tables, each exactly once, byte for byte"
    # In offset order per partition: commit_lsn (zero-padded X/Y) never
    # goes backwards; per Order key the versions are 2, 3, 4, ... in order.
    jq -sr '
      def lsn: split("/") | map(("00000000" + .)[-8:]) | join("/");
      (group_by([.topic, .partition])[] | sort_by(.offset) | [.[].headers.commit_lsn | lsn] as $l
        | select($l != ($l | sort)) | "commit_lsn goes backwards in \(.[0].topic) [\(.[0].partition)]"),
      ([.[] | select(.topic == "orders.Order")] | group_by(.key)[] | sort_by(.offset)
        | [.[].headers.aggregate_version | tonumber] as $v
        | select($v != ($v | sort) or ($v | length) != ($v | unique | length))
        | "versions of \(.[0].key) out of order: \($v)")' "$dump" >"$T/order.$1"
    [[ ! -s "$T/order.$1" ]] || { cat "$T/order.$1" >&2; fail "$1: order across tables broken"; }
    local n
    n=$(jq -r 'select(.topic == "orders.Order") | .key' "$dump" | wc -l)
    assert_eq 54 "$n" "$1: events of the Order aggregate (45 + 9 two-table transactions)"
    # the two events of a two-table transaction (versions 2v, 2v+1 with v
    # divisible by 5) carry one commit_lsn; different transactions do not
    jq -sr '[.[] | select(.topic == "orders.Order")
             | {v: (.headers.aggregate_version | tonumber), l: .headers.commit_lsn}]
            | group_by(.l)[] | [.[].v] | sort | map(tostring) | join(",")' "$dump" |
        awk -F, 'NF > 2 || (NF == 2 && !($1 % 10 == 0 && $2 == $1 + 1)) { print "shared commit_lsn: " $0; bad = 1 }
                 NF == 2 { pairs++ } END { if (pairs != 9) print "two-table transactions: " pairs " of 9"; exit bad || pairs != 9 }' >&2 ||
        fail "$1: commit_lsn of the two-table transactions"
    info "ok: order follows commit order across tables; one commit_lsn per transaction"
}
compare_all first

# run_verify RC NAME: outboxd verify --json must exit RC.
run_verify() {
    local rc=0
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" --json --timeout 30s \
        >"$T/v.$2.out" 2>"$T/v.$2.err" || rc=$?
    [[ $rc -eq $1 ]] || { cat "$T/v.$2.out" "$T/v.$2.err" >&2; fail "verify $2: exit $rc, expected $1"; }
}
step "outboxd verify over the three tables"
run_verify 0 clean
rows=$(psql_q "SELECT (SELECT count(*) FROM public.outbox_events) + (SELECT count(*) FROM app.audit_outbox) + (SELECT count(*) FROM app.billing_outbox)")
assert_eq "$rows" "$(jq .rows "$T/v.clean.out")" "verify: rows of all three tables"
assert_eq 0 "$(jq .missing "$T/v.clean.out")" "verify: missing"
assert_eq "app.audit_outbox app.billing_outbox public.outbox_events" \
    "$(jq -r '.table | split(", ") | sort | join(" ")' "$T/v.clean.out")" "verify: tables"

step "rows written while outboxd is stopped: verify finds them missing"
outboxd_stop
[[ -s "$T/outboxd.offset" ]] || fail "no offset file"
psql_q "INSERT INTO app.audit_outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        VALUES ('00000000-0000-4000-8000-00000000a001', 'Audit', 'late-a', NULL, 'Late', '{}');
        INSERT INTO app.billing_outbox (id, kind, ref, ver, etype, body)
        VALUES ('00000000-0000-4000-8000-00000000b001', 'Invoice', 'late-b', 1, 'Late', 'late');"
run_verify 1 stopped
assert_eq 2 "$(jq .missing "$T/v.stopped.out")" "verify while stopped: missing"
jq -r '.missing_examples[] | tostring' "$T/v.stopped.out" >"$T/missing.txt"
grep -q '00000000-0000-4000-8000-00000000a001' "$T/missing.txt" || fail "audit's row is not reported missing"
grep -q '00000000-0000-4000-8000-00000000b001' "$T/missing.txt" || fail "billing's row is not reported missing"

step "restart: resumes from the offset file, nothing twice"
outboxd_start
wait_caught_up 60
compare_all restarted
run_verify 0 restarted
assert_eq 0 "$(jq .missing "$T/v.restarted.out")" "verify after the restart: missing"

step "the slot lost: on_slot_loss = repair re-publishes every table's rows, merged in commit order"
outboxd_stop
psql_q "SELECT pg_drop_replication_slot('outboxd')" >/dev/null
psql_q "DO \$\$ BEGIN FOR v IN 46..55 LOOP
    PERFORM public.ord_event(v, 2 * v, v % 2 = 1);
    INSERT INTO app.billing_outbox (id, kind, ref, ver, etype, body)
    VALUES (gen_random_uuid(), 'Payment', 'lost-' || v, v, 'PaymentTaken', 'lost ' || v);
    COMMIT;
END LOOP; END \$\$;"
outboxd_start --set postgres.on_slot_loss=repair
grep -q 're-publishing the rows of .*app.billing_outbox' "$T/outboxd.log" ||
    fail "repair did not run over every table"
wait_caught_up 60
run_verify 0 repaired
assert_eq 0 "$(jq .missing "$T/v.repaired.out")" "verify after the repair: missing"
kdump_all >"$T/dump.repaired.jsonl"
# the events committed while the slot was gone (versions 92-110; 91 and
# below were sent before, and again by the repair margin), each once
# and in version order per aggregate, across the two tables
jq -sr '[.[] | select(.topic == "orders.Order" and (.headers.aggregate_version | tonumber) > 91)]
        | group_by(.key)[] | sort_by(.offset) | [.[].headers.aggregate_version | tonumber] as $v
        | select($v != ($v | sort) or ($v | length) != ($v | unique | length))
        | "\(.[0].key): \($v)"' "$T/dump.repaired.jsonl" >"$T/order.repaired"
[[ ! -s "$T/order.repaired" ]] || { cat "$T/order.repaired" >&2; fail "repair: order across tables"; }
assert_eq 10 "$(jq -r 'select(.topic == "orders.Order" and (.headers.aggregate_version | tonumber) > 91) | .offset' "$T/dump.repaired.jsonl" | wc -l)" \
    "repaired Order events (each once)"
info "ok: the repair covered every table, in commit order"

if [[ $OUTBOXD_TEST_PLUGIN == pgoutput ]]; then
    step "one table dropped from the publication: outboxd stops, saying so"
    psql_q "ALTER PUBLICATION outboxd_pub DROP TABLE app.audit_outbox"
    psql_q "INSERT INTO app.billing_outbox (id, kind, ref, ver, etype, body)
            VALUES ('00000000-0000-4000-8000-00000000b002', 'Invoice', 'after-drop', 1, 'Late', 'x')"
    outboxd_wait_exit 20
    assert_eq 1 "$OUTBOXD_RC" "exit status when one table left the publication"
    grep -q 'one of the outbox tables .*app.audit_outbox.* is no longer published by publication "outboxd_pub"' \
        "$T/outboxd.log" || fail "no 'one of the outbox tables ... no longer published' error"
    info "ok: $(grep -o 'one of the outbox tables [^(]*' "$T/outboxd.log" | tail -n 1)"
else
    outboxd_stop
fi
e2e_pass
