#!/usr/bin/env bash
# Both ways of reading the replication stream (src/stream/stream.c) deliver the
# same events: through libpq ([postgres] direct_read = false) and from the
# socket directly (the default). The direct reader's buffer is 256 kB:
# messages several times larger than it arrive whole, in one transaction
# with small ones, and the reader goes on with small messages after it.
# A walsender terminated under the direct reader is reported with the
# server's own message, and outboxd resumes without loss. A clean stop
# ends the copy and confirms what was ACKed under both readers. An SSL
# connection is read through libpq even with direct_read on.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init stream_reader
pg_start
broker_start

# insert_big AGG N KB: N events of aggregate AGG with ~KB kB payloads, plus
# two small ones, in one transaction.
insert_big() {
    psql_q <<SQL
BEGIN;
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
SELECT gen_random_uuid(), 'Doc', '$1', k, 'Uploaded',
       jsonb_build_object('k', k, 'blob', (SELECT string_agg(md5(i::text || k::text || random()::text), '')
                                           FROM generate_series(1, $3 * 32) AS i))
FROM generate_series(1, $2) AS k;
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
VALUES (gen_random_uuid(), 'Doc', '$1', $2 + 1, 'Small', '{}'), (gen_random_uuid(), 'Doc', '$1', $2 + 2, 'Small', '[]');
COMMIT;
SQL
}

# small_events AGG N: N single-row transactions.
small_events() {
    for i in $(seq 1 "$2"); do
        echo "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload) VALUES (gen_random_uuid(), 'Order', '$1', $i, 'Tick', '{\"n\": $i}');"
    done | psql_q
}

# sizes_match AGG: every message of AGG carries its row's payload, byte for byte.
sizes_match() {
    local want got
    want=$(psql_q "SELECT string_agg(octet_length(payload::text)::text, ' ' ORDER BY aggregate_version) FROM public.outbox_events WHERE aggregate_id = '$1'")
    got=$(jq -rs "[.[] | select(.key == \"$1\")] | sort_by(.headers.aggregate_version | tonumber) | map(.value_hex | length / 2 | tostring) | join(\" \")" "$T/check.dump.jsonl")
    assert_eq "$want" "$got" "payload sizes of $1 in version order"
}

step "through libpq"
outboxd_start --set postgres.direct_read=false
outboxd_log_wait "reading the replication stream through libpq \(\[postgres\] direct_read = false\)"
small_events libpq-1 20
insert_big libpq-big 2 600
wait_caught_up 120
check_delivery --exactly-once
sizes_match libpq-big
outboxd_stop || fail "outboxd (libpq reader) exited with $OUTBOXD_RC"
grep -q "confirmed .*; produced 24 events, 24 ACKed" "$T/outboxd.log" ||
    fail "the libpq reader's last line does not say 24 produced and ACKed: $(grep 'produced' "$T/outboxd.log" | tail -1)"

step "from the socket directly: messages larger than the reader's buffer"
outboxd_start
outboxd_log_wait "reading the replication stream from the socket directly"
insert_big direct-big 3 700
small_events direct-after 30
wait_caught_up 120
check_delivery --exactly-once
sizes_match direct-big
assert_eq 30 "$(jq -r 'select(.key == "direct-after") | .key' "$T/check.dump.jsonl" | wc -l)" \
    "small events after the big ones"

step "walsender terminated under the direct reader"
pid=$(psql_q "SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'outboxd'")
assert_eq t "$(psql_q "SELECT pg_terminate_backend($pid)")" "pg_terminate_backend($pid)"
for ((i = 0; i < 300; i++)); do
    new=$(psql_q "SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = 'outboxd'")
    [[ "$new" != 0 && "$new" != "$pid" ]] && break
    outboxd_assert_running
    sleep 0.1
done
[[ "$new" != 0 && "$new" != "$pid" ]] || fail "outboxd did not reconnect after its walsender was terminated"
grep -q "replication stream ended: FATAL:  terminating connection due to administrator command" "$T/outboxd.log" ||
    fail "the server's message is not in the log: $(grep -i 'stream' "$T/outboxd.log" | tail -3)"
small_events direct-resumed 15
insert_big direct-big2 1 500
wait_caught_up 120
check_delivery
sizes_match direct-big2
assert_eq 15 "$(jq -r 'select(.key == "direct-resumed") | .headers.event_id' "$T/check.dump.jsonl" | sort -u | wc -l)" \
    "events after the reconnect"

step "clean stop under the direct reader"
before=$(current_lsn)
outboxd_stop || fail "outboxd (direct reader) exited with $OUTBOXD_RC"
lsn_ge "$(slot_confirmed_lsn)" "$before" ||
    fail "after a clean stop the slot confirmed $(slot_confirmed_lsn), less than $before"

step "an SSL connection is read through libpq"
# Only libpq can read TLS records: the direct reader must step aside.
pg_enable_ssl
plain_conninfo=$PG_CONNINFO
PG_CONNINFO="$plain_conninfo sslmode=require"
outboxd_start
PG_CONNINFO=$plain_conninfo
assert_eq t "$(psql_q "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_replication_slots r ON s.pid = r.active_pid WHERE r.slot_name = 'outboxd'")" \
    "the walsender's connection uses SSL"
outboxd_log_wait "reading the replication stream through libpq \(the connection is encrypted\)"
small_events ssl-1 10
insert_big ssl-big 1 400
wait_caught_up 120
check_delivery
sizes_match ssl-big
assert_eq 10 "$(jq -r 'select(.key == "ssl-1") | .headers.event_id' "$T/check.dump.jsonl" | sort -u | wc -l)" \
    "events over SSL"
outboxd_stop || fail "outboxd (SSL, libpq reader) exited with $OUTBOXD_RC"
e2e_pass
