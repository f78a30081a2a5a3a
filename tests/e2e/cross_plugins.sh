#!/usr/bin/env bash
# One workload, decoded twice: through a pgoutput slot and through a wal2json
# slot created before it, so both decode the same WAL. Each plugin's run
# publishes to its own topic prefix; the two sets of messages must be
# byte-identical: same partitions, same order, same key, value and every
# header (name, value, order).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init cross_plugins
pg_start
broker_start

step "creating both slots before any write"
psql_q "SELECT pg_create_logical_replication_slot('s_pg', 'pgoutput')" >/dev/null
psql_q "SELECT pg_create_logical_replication_slot('s_w2j', 'wal2json')" >/dev/null
create_other_table

step "workload"
psql_q <<'SQL'
-- several transactions, keys and sizes
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
SELECT gen_random_uuid(), 'Order', 'o-' || (i % 7), i, 'Created',
       jsonb_build_object('i', i, 'total', 10.50 + i, 'tags', jsonb_build_array('a', i))
FROM generate_series(1, 50) AS i;
BEGIN;
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
VALUES (gen_random_uuid(), 'Doc', 'Ünïcødé-ключ-🔑', 9223372036854775807, 'Créé',
        '{"text": "日本語 ✓", "esc": "q\"b\\n\nt\tu\u0001", "num": 1.50, "big": 123456789012345678901234567890}'),
       (gen_random_uuid(), 'Doc', 'null-payload', NULL, 'Deleted', NULL),
       (gen_random_uuid(), 'Doc', 'scalar', -5, 'Scalar', '"just a string"');
INSERT INTO public.other (note) VALUES ('ignored');
COMMIT;
BEGIN;
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
VALUES (gen_random_uuid(), 'Doc', 'rolled-back', 1, 'Never', '{}');
ROLLBACK;
-- a TOASTed payload
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
SELECT gen_random_uuid(), 'Doc', 'big', 1, 'Uploaded',
       jsonb_build_object('blob', string_agg(md5(i::text), ''))
FROM generate_series(1, 3000) AS i;
-- the outbox changes layout mid-stream
ALTER TABLE public.outbox_events ADD COLUMN tenant text DEFAULT 't1';
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, tenant)
VALUES (gen_random_uuid(), 'Order', 'o-1', 1000, 'AfterAlter', '{"after": true}', 't2');
SQL
end_lsn=$(current_lsn)

run_plugin() { # PLUGIN SLOT PREFIX
    OUTBOXD_TEST_PLUGIN=$1 OUTBOXD_SLOT=$2
    outboxd_start --set "outbox.topic=$3.\${aggregate_type}" --set "offsets.file=$T/$1.offset"
    wait_for_confirmed_lsn "$end_lsn" 60 || fail "$1 did not confirm $end_lsn"
    outboxd_stop || fail "outboxd ($1) exited with $OUTBOXD_RC"
}
run_plugin pgoutput s_pg pg
run_plugin wal2json s_w2j wj

step "comparing the two streams"
kdump_all >"$T/all.jsonl"
# One line per message: topic without its prefix, partition, offset, then
# the bytes of key, value and the ordered header list.
project() { # PREFIX
    jq -r --arg p "$1." 'select(.topic | startswith($p))
        | [(.topic | ltrimstr($p)), .partition, .offset, (.key_hex // "null"),
           (.value_hex // "null"), (.headers_list | tojson)] | @tsv' "$T/all.jsonl" |
        sort -t $'\t' -k1,1 -k2,2n -k3,3n
}
project pg >"$T/pg.tsv"
project wj >"$T/wj.tsv"
n=$(wc -l <"$T/pg.tsv")
assert_eq 55 "$n" "messages through pgoutput (50 + 3 + 1 big + 1 after ALTER)"
[[ "$n" -eq $(psql_q "SELECT count(*) FROM public.outbox_events") ]] ||
    fail "pgoutput produced $n messages for $(psql_q "SELECT count(*) FROM public.outbox_events") rows"
if ! diff -u "$T/pg.tsv" "$T/wj.tsv" >"$T/diff.txt"; then
    head -c 3000 "$T/diff.txt" >&2
    fail "pgoutput and wal2json produced different messages"
fi
info "$n messages, byte-identical through both plugins"
e2e_pass
