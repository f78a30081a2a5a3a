#!/usr/bin/env bash
# Values and keys byte for byte: NULL payload -> null value; NULL
# aggregate_version -> no header; a ~100 KB (TOASTed) payload arrives whole;
# non-ASCII keys, payloads and header values; JSON escapes. (An empty
# aggregate_id is a poison event: see test_poison.sh.)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init payloads
pg_start
broker_start
outboxd_start

step "NULL payload and NULL aggregate_version"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        VALUES ('00000000-0000-4000-8000-00000000000a', 'Doc', 'doc-null', NULL, 'Deleted', NULL)"
wait_caught_up 60
check_delivery --exactly-once
m=$(jq -c 'select(.key == "doc-null")' "$T/check.dump.jsonl")
assert_eq null "$(jq -r '.value_hex' <<<"$m")" "value of a NULL payload (null, not empty)"
assert_eq false "$(jq -r '.headers | has("aggregate_version")' <<<"$m")" "aggregate_version header present for NULL version"

step "~100 KB payload (TOASTed)"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        SELECT '00000000-0000-4000-8000-00000000000b', 'Doc', 'doc-big', 1, 'Uploaded',
               jsonb_build_object('blob', string_agg(md5(i::text || random()::text), ''), 'n', 3200)
        FROM generate_series(1, 3200) AS i"
toast=$(psql_q "SELECT reltoastrelid::regclass FROM pg_class WHERE oid = 'public.outbox_events'::regclass")
assert_sql "SELECT count(*) > 0 FROM $toast" "the big payload is stored out of line in $toast"
assert_sql "SELECT octet_length(payload::text) > 100000 FROM public.outbox_events WHERE aggregate_id = 'doc-big'" "payload text > 100000 bytes"
wait_caught_up 60
check_delivery --exactly-once
big=$(jq -r 'select(.key == "doc-big") | .value_hex | length / 2' "$T/check.dump.jsonl")
assert_eq "$(psql_q "SELECT octet_length(payload::text) FROM public.outbox_events WHERE aggregate_id = 'doc-big'")" "$big" "bytes of the big value"

step "two big payloads and small ones in one transaction"
psql_q <<'SQL'
BEGIN;
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
SELECT gen_random_uuid(), 'Doc', 'doc-big2', k, 'Uploaded',
       jsonb_build_object('k', k, 'blob', (SELECT string_agg(md5(i::text || k::text || random()::text), '') FROM generate_series(1, 3000) AS i))
FROM generate_series(1, 2) AS k;
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
VALUES (gen_random_uuid(), 'Doc', 'doc-big2', 3, 'Small', '{}'), (gen_random_uuid(), 'Doc', 'doc-big2', 4, 'Small', '[]');
COMMIT;
SQL
wait_caught_up 60
check_delivery --exactly-once

step "non-ASCII keys, payloads and header values"
psql_q <<'SQL'
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
VALUES ('00000000-0000-4000-8000-00000000000c', 'Doc', 'Ünïcødé-ключ-キー-🔑', 1, 'Créé',
        '{"text": "日本語 ✓ Ελληνικά", "emoji": "😀👍", "mixed": "a\u00e9b"}'),
       ('00000000-0000-4000-8000-00000000000d', 'Doc', 'Ünïcødé-ключ-キー-🔑', 2, 'Geändert',
        '"just a string ü"'),
       ('00000000-0000-4000-8000-00000000000e', 'Doc', 'tab	and space', 1, 'Escapes',
        '{"quote": "\"", "backslash": "\\", "newline": "line1\nline2", "tab": "a\tb", "ctrl": "\u0001", "slash": "/"}'),
       ('00000000-0000-4000-8000-00000000000f', 'Doc', 'scalars', 1, 'Scalars', '12345.678'),
       ('00000000-0000-4000-8000-000000000010', 'Doc', 'scalars', 2, 'Scalars', 'null'),
       ('00000000-0000-4000-8000-000000000011', 'Doc', 'scalars', 3, 'Scalars', 'true');
SQL
wait_caught_up 60
check_delivery --exactly-once
assert_eq "Ünïcødé-ключ-キー-🔑" "$(jq -r 'select(.headers.event_type == "Créé") | .key' "$T/check.dump.jsonl")" "non-ASCII key"
assert_eq "Créé" "$(jq -r 'select(.headers.event_id == "00000000-0000-4000-8000-00000000000c") | .headers.event_type' "$T/check.dump.jsonl")" "non-ASCII event_type header"
assert_eq '"null"' "$(jq -c 'select(.headers.event_id == "00000000-0000-4000-8000-000000000010") | .value' "$T/check.dump.jsonl")" "JSON null payload is the text null, not a null value"

outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
e2e_pass
