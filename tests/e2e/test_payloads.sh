#!/usr/bin/env bash
# Values and keys byte for byte: NULL payload -> null value; NULL
# aggregate_version -> no header; a ~100 KB (TOASTed) payload arrives whole;
# non-ASCII keys, payloads and header values; JSON escapes. (An empty
# aggregate_id is a poison event: see test_poison.sh.)
#
# Then a second outbox table whose payload is bytea, on the same slot:
# every byte value (NUL included) arrives byte for byte, an empty bytea is
# an empty value and NULL a null one, although the database says
# bytea_output = escape (outboxd sets hex on its stream); two other
# columns placed in headers under the outboxd preset, NULL giving no
# header; [outbox] timestamp = commit gives each record its transaction's
# pg_xact_commit_timestamp in ms (on a real broker under exactly_once:
# the transactional producer carries it too), and the default, produce,
# a time after outboxd started, later than the commit.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init payloads
pg_start
psql_q "ALTER SYSTEM SET track_commit_timestamp = on" >/dev/null
pg_restart
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

step "a bytea payload table: rows written while outboxd is stopped"
psql_q <<'SQL'
CREATE TABLE public.outbox_bin (
    event_id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
    aggregate_version bigint, event_type text NOT NULL, payload bytea,
    trace_id text, tenant text);
ALTER PUBLICATION outboxd_pub ADD TABLE public.outbox_bin;
ALTER DATABASE postgres SET bytea_output = 'escape';
SQL
# bin_rows N: three transactions of rows into public.outbox_bin, ids from N.
bin_rows() {
    psql_q <<SQL
INSERT INTO public.outbox_bin VALUES
  ('00000000-0000-4000-8000-0000000001$1', 'Bin', 'all-bytes', 1, 'Blob',
   (SELECT decode(string_agg(lpad(to_hex(i), 2, '0'), '' ORDER BY i), 'hex')
    FROM generate_series(0, 255) AS i), 'tr-$1', NULL),
  ('00000000-0000-4000-8000-0000000002$1', 'Bin', 'nul', 2, 'Blob', '\x00', NULL, 'acme');
INSERT INTO public.outbox_bin VALUES
  ('00000000-0000-4000-8000-0000000003$1', 'Bin', 'empty', 3, 'Blob', '', NULL, NULL),
  ('00000000-0000-4000-8000-0000000004$1', 'Bin', 'null', 4, 'Blob', NULL, 'tr-n', NULL);
INSERT INTO public.outbox_bin VALUES
  ('00000000-0000-4000-8000-0000000005$1', 'Bin', 'avro', 5, 'Blob',
   '\x0000000001'::bytea || decode(md5('$1'), 'hex') || '\x5c785c0000'::bytea, 'tr-a', 'x');
SQL
}
bin_rows 10
assert_eq "\\000" "$(psql_q "SELECT payload FROM public.outbox_bin WHERE aggregate_id = 'nul'")" \
    "the database prints bytea in the escape format"

# bin_check TIMESTAMP_MODE T0_MS TOPIC N: every row of public.outbox_bin
# written by bin_rows N, once on TOPIC: value bytes = payload (null for NULL), headers trace-id and
# tenant only when the column is not NULL; the timestamp the commit's
# (commit) or from T0_MS to now and later than the commit (produce).
bin_check() {
    local mode=$1 t0=$2 topic=$3 n=$4 now
    KAFKA_DUMP=$T/$topic.jsonl
    "$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" -b "$KAFKA_BOOTSTRAP" -t "$topic" \
        --timeout-ms 60000 >"$KAFKA_DUMP" || fail "outboxd-kdump $topic failed"
    now=$(date +%s%3N)
    psql_q "SELECT event_id, coalesce(encode(payload, 'hex'), '-'), coalesce(trace_id, '-'),
                   coalesce(tenant, '-'),
                   floor(extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000)::bigint
            FROM public.outbox_bin WHERE right(event_id::text, 2) = '$n'
            ORDER BY event_id" >"$T/bin.rows"
    jq -r '[.headers.event_id, (.value_hex // "-"), (.headers["trace-id"] // "-"),
            (.headers.tenant // "-"), (.timestamp | tostring)] | join("|")' "$KAFKA_DUMP" |
        sort >"$T/bin.msgs"
    info "$(wc -l <"$T/bin.rows") rows, $(wc -l <"$T/bin.msgs") messages ($mode)"
    if [[ $mode == commit ]]; then
        diff "$T/bin.rows" "$T/bin.msgs" >&2 || fail "$topic differs from public.outbox_bin (commit times)"
    else
        diff <(cut -d'|' -f1-4 "$T/bin.rows") <(cut -d'|' -f1-4 "$T/bin.msgs") >&2 ||
            fail "$topic differs from public.outbox_bin"
        paste -d'|' "$T/bin.rows" "$T/bin.msgs" | awk -F'|' -v t0="$t0" -v now="$now" '
            $10 < t0 || $10 > now || $10 <= $5 { print "timestamp " $10 " of " $1 ": not in [" t0 ", " now "] after the commit " $5; bad = 1 }
            END { exit bad }' >&2 || fail "produce timestamps"
    fi
    assert_eq "$(printf '%02x' {0..255} | tr -d '\n')" \
        "$(jq -r --arg n "$n" 'select(.key == "all-bytes" and .headers.event_id == "00000000-0000-4000-8000-0000000001\($n)") | .value_hex' "$KAFKA_DUMP")" \
        "all 256 byte values"
    assert_eq '00' "$(jq -r 'select(.key == "nul") | .value_hex' "$KAFKA_DUMP" | head -n 1)" "a lone NUL byte"
    assert_eq '[]' "$(jq -c 'select(.key == "empty") | .headers | keys - ["event_id","event_type","aggregate_type","aggregate_id","aggregate_version","commit_lsn"]' "$KAFKA_DUMP" | head -n 1)" \
        "no trace-id or tenant header for NULL columns"
}

eos=()
if [[ "${E2E_KAFKA:-mock}" == real ]]; then
    eos=(--set delivery.mode=exactly_once --set delivery.txn_max_ms=50ms)
fi
bin_cfg=(--set outbox.table=public.outbox_bin --set 'outbox.topic=bin.${aggregate_type}'
    --set 'outbox.additional_placement=trace_id:header:trace-id,tenant:header')
outboxd_start "${bin_cfg[@]}" --set outbox.timestamp=commit "${eos[@]}"
wait_caught_up 60
bin_check commit 0 bin.Bin 10
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"

step "timestamp = produce (the default): the time outboxd sent them"
bin_rows 20
t0=$(date +%s%3N)
outboxd_start "${bin_cfg[@]}" --set 'outbox.topic=bin2.${aggregate_type}'
wait_caught_up 60
bin_check produce "$t0" bin2.Bin 20
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
e2e_pass
