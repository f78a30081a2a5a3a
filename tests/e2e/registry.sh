#!/usr/bin/env bash
# Schema Registry converters (issue 42) against a real registry and real
# consumers' deserializers: Apicurio Registry 3.0.9 (its Confluent-
# compatible API, /apis/ccompat/v7) and Apicurio's Kafka deserializers in a
# Java KafkaConsumer (tests/registry/registry.sh), on a real Kafka broker.
#
# Three outbox sections, one per converter, each on its own table:
#   orders     value_converter = avro: jsonb payloads encoded with the
#              registered Avro schema (unions, an enum, an array, a double,
#              a field left out that the schema makes optional)
#   customers  json_schema, value_validate = true: text payloads checked
#              against the registered JSON Schema and framed; one that is
#              not JSON and one without a required member are poison events
#   shipments  protobuf: bytea payloads, Protobuf bytes made in SQL,
#              framed with the message index
# Checked:
#   - every row is read back by the deserializer of its topic and equals
#     the row's payload field by field (compared as jsonb in PostgreSQL),
#     carries the registered schema's id, its event_id header and its key;
#   - an order that does not fit the Avro schema, a customer payload that
#     is not JSON and one that its JSON Schema refuses go to the
#     dead-letter topic as SCHEMA_MISMATCH, with
#     their payloads as they were, and nothing else is lost;
#   - a subject that is not registered holds the stream (the slot is not
#     confirmed past it, /readyz says which subject after not_ready_after)
#     until it is registered, then every event behind it goes on;
#   - with the registry hung (SIGSTOP), cached subjects keep flowing; an
#     event of an uncached subject waits (/readyz says why) and goes once
#     the registry answers again;
#   - the registry metrics count hits, fetches and failures;
#   - a section whose converter does not match its subject's schema type
#     halts, without confirming past the event;
#   - `outboxd check` finds every subject the rows name, and names the one
#     that is missing;
#   - behind nginx with TLS and basic auth, the subjects are found with the
#     right password and CA, and a wrong password and an unknown CA are
#     reported;
#   - polling mode: rows wait for a subject registered after them (/readyz
#     says so), then are sent and read back equal; one that does not fit
#     is QUARANTINED with SCHEMA_MISMATCH.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/polling_lib.sh"
E2E_TIMEOUT=${E2E_TIMEOUT:-600}
# DELIVERY_MODE=exactly_once runs the logical part in Kafka transactions (by
# hand; CI runs at_least_once).
e2e_init registry
REG=$E2E_SRC_DIR/tests/registry/registry.sh

pg_start
broker_start

step "starting Apicurio Registry"
REG_URL=$(bash "$REG" start "$T/registry")
E2E_BG_PIDS+=("$(cat "$T/registry/registry.pid")") # stopped with the test
CCOMPAT=$REG_URL/apis/ccompat/v7
info "registry at $REG_URL"

# register SUBJECT TYPE SCHEMA_TEXT: prints the id the registry gave.
register() {
    local body
    body=$(jq -n --arg t "$2" --arg s "$3" '{schemaType: $t, schema: $s}')
    curl -sf -X POST -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
        --data "$body" "$CCOMPAT/subjects/$1/versions" | jq -r .id
}

step "tables and schemas"
psql_q "
CREATE TABLE public.orders_outbox (LIKE public.outbox_events INCLUDING ALL);
CREATE TABLE public.customers_outbox (LIKE public.outbox_events INCLUDING ALL);
ALTER TABLE public.customers_outbox ALTER COLUMN payload TYPE text;
CREATE TABLE public.shipments_outbox (LIKE public.outbox_events INCLUDING ALL);
ALTER TABLE public.shipments_outbox ALTER COLUMN payload TYPE bytea USING NULL,
    ADD COLUMN expect jsonb;
ALTER PUBLICATION outboxd_pub ADD TABLE public.orders_outbox, public.customers_outbox,
    public.shipments_outbox;" >/dev/null

ORDER_AVRO='{"type":"record","name":"Order","namespace":"com.acme","fields":[
 {"name":"id","type":"string"},{"name":"qty","type":"int"},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"price","type":"double"},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID","SHIPPED"]}},
 {"name":"total_cents","type":"long"}]}'
CUSTOMER_JSON='{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
 "properties":{"id":{"type":"string"},"name":{"type":"string"},"vip":{"type":"boolean"}},
 "required":["id","name"]}'
SHIPMENT_PROTO=$(cat "$E2E_SRC_DIR/tests/registry/src/main/proto/shipment.proto")
ID_ORDER=$(register outbox.event.order-value AVRO "$ORDER_AVRO")
ID_CUSTOMER=$(register outbox.event.customer-value JSON "$CUSTOMER_JSON")
ID_SHIPMENT=$(register outbox.event.shipment-value PROTOBUF "$SHIPMENT_PROTO")
[[ "$ID_ORDER" =~ ^[0-9]+$ && "$ID_CUSTOMER" =~ ^[0-9]+$ && "$ID_SHIPMENT" =~ ^[0-9]+$ ]] ||
    fail "registering the schemas failed (ids: $ID_ORDER $ID_CUSTOMER $ID_SHIPMENT)"
info "registered: order $ID_ORDER (AVRO), customer $ID_CUSTOMER (JSON), shipment $ID_SHIPMENT (PROTOBUF)"

SECTIONS=(--set outbox.orders.table=public.orders_outbox
    --set outbox.orders.value_converter=avro
    --set outbox.customers.table=public.customers_outbox
    --set outbox.customers.value_converter=json_schema
    --set outbox.customers.value_validate=true
    --set outbox.shipments.table=public.shipments_outbox
    --set outbox.shipments.value_converter=protobuf
    --set registry.url="$CCOMPAT" --set registry.timeout=1s --set registry.retry=300ms
    --set registry.not_ready_after=2s --set errors.policy=dlq
    --set delivery.mode="${DELIVERY_MODE:-at_least_once}")

# orders N FROM [AGGREGATE_TYPE]: N orders with varied payloads, ids o-FROM...
orders() {
    psql_q "INSERT INTO public.orders_outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
        SELECT gen_random_uuid(), '${3:-order}', 'o-' || i, 'OrderPlaced',
               jsonb_build_object('id', 'o-' || i, 'qty', i, 'price', i * 1.25,
                   'tags', CASE WHEN i % 3 = 0 THEN '[]'::jsonb ELSE jsonb_build_array('t' || i, 'x') END,
                   'status', (ARRAY['NEW','PAID','SHIPPED'])[1 + i % 3],
                   'total_cents', i::bigint * 100000000)
               || CASE WHEN i % 4 = 0 THEN '{}'::jsonb
                       WHEN i % 4 = 1 THEN '{\"note\": null}'::jsonb
                       ELSE jsonb_build_object('note', 'n\"ä' || i) END
        FROM generate_series($2, $2 + $1 - 1) i"
}

outboxd_start "${SECTIONS[@]}"

step "a workload: 60 orders, 40 customers, 30 shipments, 3 poison events"
orders 60 1
psql_q "INSERT INTO public.customers_outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
    SELECT gen_random_uuid(), 'customer', 'c-' || i, 'CustomerCreated',
           json_build_object('id', 'c-' || i, 'name', 'Name ' || i, 'vip', i % 2 = 0)::text
    FROM generate_series(1, 40) i"
# message Shipment { string id = 1; int32 qty = 2; repeated string items = 3; }:
# tag 0x0a, length, id; tag 0x10, varint qty (< 128); tag 0x1a per item.
psql_q "INSERT INTO public.shipments_outbox (event_id, aggregate_type, aggregate_id, event_type, payload, expect)
    SELECT gen_random_uuid(), 'shipment', 's-' || i, 'Shipped',
           '\\x0a'::bytea || set_byte('\\x00'::bytea, 0, length('s-' || i)) || convert_to('s-' || i, 'UTF8')
           || '\\x10'::bytea || set_byte('\\x00'::bytea, 0, i)
           || '\\x1a'::bytea || set_byte('\\x00'::bytea, 0, length('box' || i)) || convert_to('box' || i, 'UTF8'),
           jsonb_build_object('id', 's-' || i, 'qty', i, 'items', jsonb_build_array('box' || i))
    FROM generate_series(1, 30) i"
psql_q "INSERT INTO public.orders_outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
        VALUES ('00000000-0000-0000-0000-00000000bad1', 'order', 'o-bad', 'OrderPlaced',
                '{\"id\": \"o-bad\", \"qty\": \"many\", \"price\": 1, \"tags\": [], \"status\": \"NEW\", \"total_cents\": 1}');
        INSERT INTO public.customers_outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
        VALUES ('00000000-0000-0000-0000-00000000bad2', 'customer', 'c-bad', 'CustomerCreated', 'not json {'),
               ('00000000-0000-0000-0000-00000000bad3', 'customer', 'c-bad', 'CustomerCreated',
                '{\"id\": \"c-x\", \"vip\": \"yes\"}');"

step "every event read back by the consumers' deserializers"
wait_caught_up 120
decode() { # COUNT [TOPIC=FORMAT...]: the records of the three topics (and
    # those given) as the consumer decodes them, into $T/decoded.jsonl
    local n=$1
    shift
    bash "$REG" decode "$KAFKA_BOOTSTRAP" "$REG_URL/apis/registry/v3" "$n" 120 \
        outbox.event.order=avro outbox.event.customer=json outbox.event.shipment=protobuf "$@" \
        >"$T/decoded.jsonl" 2>"$T/decode.err" ||
        fail "the consumer read $(wc -l <"$T/decoded.jsonl") of $n records: $(tail -5 "$T/decode.err")"
}
decode 130
# assert_count N SQL: SQL's count is N.
assert_count() {
    local got
    got=$(psql_q "$2") || fail "query failed: $2"
    [[ "$got" == "$1" ]] || fail "expected $1 rows, got $got: $2"
}
psql_q "CREATE TABLE public.decoded (line jsonb)"
load_decoded() {
    psql_q "TRUNCATE public.decoded"
    psql -XAtq -v ON_ERROR_STOP=1 -c "\\copy public.decoded (line) FROM '$T/decoded.jsonl' WITH (FORMAT csv, QUOTE e'\\x01', DELIMITER e'\\x02')"
}
load_decoded
assert_sql "SELECT count(*) = 0 FROM public.decoded WHERE line ? 'error'"
assert_sql "SELECT count(*) = 130 FROM public.decoded"
# Each row of a table: exactly one record, equal field by field.
assert_count 60 "SELECT count(*) FROM public.orders_outbox o JOIN public.decoded d
             ON d.line->'headers'->>'event_id' = o.event_id::text
            WHERE d.line->>'topic' = 'outbox.event.order' AND d.line->>'key' = o.aggregate_id
              AND (d.line->>'schema_id')::int = $ID_ORDER
              AND d.line->'value' = (o.payload || CASE WHEN o.payload ? 'note' THEN '{}'::jsonb
                                                       ELSE '{\"note\": null}' END)"
assert_count 40 "SELECT count(*) FROM public.customers_outbox c JOIN public.decoded d
             ON d.line->'headers'->>'event_id' = c.event_id::text
            WHERE d.line->>'topic' = 'outbox.event.customer' AND d.line->>'key' = c.aggregate_id
              AND (d.line->>'schema_id')::int = $ID_CUSTOMER AND d.line->'value' = c.payload::jsonb
              AND c.aggregate_id <> 'c-bad'"
assert_count 30 "SELECT count(*) FROM public.shipments_outbox s JOIN public.decoded d
             ON d.line->'headers'->>'event_id' = s.event_id::text
            WHERE d.line->>'topic' = 'outbox.event.shipment' AND d.line->>'key' = s.aggregate_id
              AND (d.line->>'schema_id')::int = $ID_SHIPMENT AND d.line->'value' = s.expect"
info "ok: 60 Avro, 40 JSON Schema and 30 Protobuf records equal their rows"

step "the poison events are dead-lettered as SCHEMA_MISMATCH"
KDUMP_ARGS="-t outbox.dlq" "$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" -b "$KAFKA_BOOTSTRAP" \
    -t outbox.dlq --timeout-ms 60000 >"$T/dlq.jsonl"
assert_eq 3 "$(wc -l <"$T/dlq.jsonl")" "dead letters"
jq -e -s 'all(.headers.dlq_error == "SCHEMA_MISMATCH")' "$T/dlq.jsonl" >/dev/null ||
    fail "a dead letter's dlq_error is not SCHEMA_MISMATCH: $(jq -c .headers "$T/dlq.jsonl")"
jq -e -s 'map(select(.headers.event_id == "00000000-0000-0000-0000-00000000bad2"))[0].value == "not json {"' \
    "$T/dlq.jsonl" >/dev/null || fail "the non-JSON customer's dead letter does not hold its payload"
jq -e -s 'map(select(.headers.event_id == "00000000-0000-0000-0000-00000000bad1"))[0].headers.dlq_reason | test("qty: a string where the schema has int")' \
    "$T/dlq.jsonl" >/dev/null ||
    fail "the bad order's dead letter does not say why: $(jq -c .headers "$T/dlq.jsonl")"
jq -e -s 'map(select(.headers.event_id == "00000000-0000-0000-0000-00000000bad3"))[0].headers.dlq_reason | test("JSON Schema of subject .*required member \"name\" is missing")' \
    "$T/dlq.jsonl" >/dev/null ||
    fail "the customer without a name was not refused by its JSON Schema: $(jq -c .headers "$T/dlq.jsonl")"
info "ok: 3 dead letters, SCHEMA_MISMATCH, payloads kept, reasons named"

step "an unregistered subject holds the stream until it is registered"
psql_q "INSERT INTO public.orders_outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
        VALUES (gen_random_uuid(), 'refund', 'r-1', 'Refunded',
                '{\"id\": \"r-1\", \"qty\": 1, \"price\": 9.5, \"tags\": [], \"status\": \"PAID\", \"total_cents\": 950}')"
held_lsn=$(current_lsn)
orders 5 101 # behind it in the stream
wait_until 30 "/readyz names the missing subject" \
    bash -c "curl -s http://127.0.0.1:$(outboxd_http_port)/readyz | grep -q 'outbox.event.refund-value.*subject not found'"
lsn_ge "$(slot_confirmed_lsn)" "$held_lsn" && fail "the slot was confirmed past the held event"
info "ok: not ready, slot confirmed $(slot_confirmed_lsn) < $held_lsn"
ID_REFUND=$(register outbox.event.refund-value AVRO "$ORDER_AVRO")
wait_caught_up 60
outboxd_log_wait 'the schema of subject "outbox.event.refund-value" is known' 10
wait_until 10 "/readyz ready once the subject exists" \
    curl -sf -o /dev/null "http://127.0.0.1:$(outboxd_http_port)/readyz"
info "ok: registered (id $ID_REFUND), the stream went on"

step "a hung registry: cached subjects flow, a new one waits"
register outbox.event.return-value AVRO "$ORDER_AVRO" >/dev/null
kill -STOP "$(cat "$T/registry/registry.pid")"
orders 10 201
wait_caught_up 60
info "ok: 10 orders of a cached subject delivered with the registry stopped"
orders 1 301 return
held_lsn=$(current_lsn)
wait_until 30 "/readyz says the event waits for outbox.event.return-value" \
    bash -c "curl -s http://127.0.0.1:$(outboxd_http_port)/readyz | grep -q 'outbox.event.return-value'"
lsn_ge "$(slot_confirmed_lsn)" "$held_lsn" && fail "the slot was confirmed past the waiting event"
kill -CONT "$(cat "$T/registry/registry.pid")"
wait_caught_up 60
info "ok: the event waited for the registry, then went"

step "all of it, read back"
decode 147 outbox.event.refund=avro outbox.event.return=avro # 130 + 1 + 5 + 10 + 1
load_decoded
assert_sql "SELECT count(*) = 0 FROM public.decoded WHERE line ? 'error'"
assert_count 77 "SELECT count(*) FROM public.orders_outbox o JOIN public.decoded d
             ON d.line->'headers'->>'event_id' = o.event_id::text
            WHERE d.line->'value' = (o.payload || CASE WHEN o.payload ? 'note' THEN '{}'::jsonb
                                                       ELSE '{\"note\": null}' END)"
kdump_all >"$T/all.jsonl"
assert_eq 2 "$(jq -s '[.[] | select(.topic | startswith("outbox.event.refund") or startswith("outbox.event.return"))] | length' "$T/all.jsonl")" \
    "refund and return events"

step "the registry metrics"
hits=$(metric_value 'outboxd_registry_lookups_total{result="hit"}')
fetched=$(metric_value 'outboxd_registry_lookups_total{result="fetched"}')
failed=$(metric_value 'outboxd_registry_lookups_total{result="failed"}')
notfound=$(metric_value outboxd_registry_not_found_total)
info "hits $hits, fetched $fetched, failed $failed, not found $notfound"
# A hit per event that reached its encoding (147 sent, 3 mismatched); one
# fetch per subject (5); the waits failed at least once each.
((hits == 150 && fetched == 5 && failed >= 2 && notfound >= 1)) ||
    fail "registry metrics: hits $hits (want 150), fetched $fetched (want 5), failed $failed (>= 2), not found $notfound (>= 1)"
outboxd_stop
assert_eq 0 "$OUTBOXD_RC" "outboxd's exit status"

step "a converter that does not match the subject's schema type halts"
outboxd_start "${SECTIONS[@]}" --set outbox.orders.value_converter=json_schema
orders 1 401
held_lsn=$(current_lsn)
outboxd_wait_exit 60
[[ "$OUTBOXD_RC" != 0 ]] || fail "outboxd exited 0 on a schema type mismatch"
grep -qE 'SCHEMA_TYPE.*subject "outbox.event.order-value" \(version 1, id [0-9]+\) holds a schema of type AVRO, but value_converter = json_schema needs JSON' \
    "$T/outboxd.log" || fail "outboxd did not say why it halted: $(outboxd_log_last_start | tail -5)"
lsn_ge "$(slot_confirmed_lsn)" "$held_lsn" && fail "the slot was confirmed past the halted event"
info "ok: halted (exit $OUTBOXD_RC), the slot not confirmed past the event"

step "outboxd check names the subjects"
psql_q "INSERT INTO public.orders_outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
        VALUES (gen_random_uuid(), 'invoice', 'i-1', 'Invoiced', '{}')"
cat >"$T/check.ini" <<EOF
[postgres]
conninfo = $PG_CONNINFO
[kafka]
bootstrap.servers = $KAFKA_BOOTSTRAP
EOF
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/check.ini" "${SECTIONS[@]}" >"$T/check.out" 2>&1 || rc=$?
grep 'schema registry' "$T/check.out" >&2 || fail "outboxd check printed no schema registry line: $(cat "$T/check.out")"
grep -q "FAIL.*schema registry.*1 of 4 subjects have no version latest: outbox.event.invoice-value" "$T/check.out" ||
    fail "outboxd check did not name the missing subject outbox.event.invoice-value"
grep -q "ok.*schema registry.*json_schema: outbox.event.customer-value v1 id $ID_CUSTOMER" "$T/check.out" ||
    fail "outboxd check did not find subject outbox.event.customer-value"
grep -q "ok.*schema registry.*protobuf: outbox.event.shipment-value v1 id $ID_SHIPMENT" "$T/check.out" ||
    fail "outboxd check did not find subject outbox.event.shipment-value"
((rc != 0)) || fail "outboxd check exited 0 with a subject missing"
info "ok: check found the subjects and named the missing one (exit $rc)"

step "the registry behind TLS and basic auth (nginx), through outboxd check"
# nginx terminates TLS with a throw-away certificate for 127.0.0.1 and asks
# for a password, in front of the same registry: what registries behind a
# company proxy look like. outboxd check makes the lookups the daemon's
# lookup thread makes (registry_fetch()).
mkdir -p "$T/nginx"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$T/nginx/key.pem" -out "$T/nginx/cert.pem" \
    2>/dev/null || fail "openssl could not make a certificate"
printf 'outboxd:%s\n' "$(openssl passwd -apr1 's3cret')" >"$T/nginx/htpasswd"
printf 's3cret\n' >"$T/nginx/password"
printf 'wrong\n' >"$T/nginx/wrong"
chmod 600 "$T/nginx/password" "$T/nginx/wrong"
TLS_PORT=$(free_port)
cat >"$T/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log;
events { worker_connections 64; }
http {
    access_log $T/nginx/access.log;
    client_body_temp_path $T/nginx/body;
    proxy_temp_path $T/nginx/proxy;
    fastcgi_temp_path $T/nginx/fastcgi;
    uwsgi_temp_path $T/nginx/uwsgi;
    scgi_temp_path $T/nginx/scgi;
    server {
        listen 127.0.0.1:$TLS_PORT ssl;
        ssl_certificate $T/nginx/cert.pem;
        ssl_certificate_key $T/nginx/key.pem;
        auth_basic "registry";
        auth_basic_user_file $T/nginx/htpasswd;
        location / { proxy_pass $REG_URL; }
    }
}
EOF
nginx -c "$T/nginx/nginx.conf" -p "$T/nginx" -e "$T/nginx/error.log" &
E2E_BG_PIDS+=($!)
wait_until 30 "nginx answers on $TLS_PORT" \
    curl -s -o /dev/null --cacert "$T/nginx/cert.pem" "https://127.0.0.1:$TLS_PORT/"
TLS_SET=(--set registry.url="https://127.0.0.1:$TLS_PORT/apis/ccompat/v7"
    --set registry.user=outboxd --set registry.ca_file="$T/nginx/cert.pem")
# registry_check NAME [--set ...]: outboxd check with the TLS registry, its
# output into $T/NAME.out (its schema registry lines shown).
registry_check() {
    local name=$1
    shift
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/check.ini" "${SECTIONS[@]}" "${TLS_SET[@]}" "$@" \
        >"$T/$name.out" 2>&1 || true
    grep 'schema registry' "$T/$name.out" >&2 || true
}
registry_check tls_ok --set registry.password_file="$T/nginx/password"
grep -q "ok.*schema registry.*json_schema: outbox.event.customer-value v1 id $ID_CUSTOMER" "$T/tls_ok.out" ||
    fail "no subject found through TLS and basic auth: $(grep -i registry "$T/tls_ok.out")"
registry_check tls_wrong --set registry.password_file="$T/nginx/wrong"
grep -q "FAIL.*schema registry.*HTTP 401" "$T/tls_wrong.out" ||
    fail "a wrong password was not reported as HTTP 401: $(grep -i registry "$T/tls_wrong.out")"
registry_check tls_noca --set registry.password_file="$T/nginx/password" --set registry.ca_file=
grep -qi "FAIL.*schema registry.*certificate" "$T/tls_noca.out" ||
    fail "an unverifiable certificate was not reported: $(grep -i registry "$T/tls_noca.out")"
info "ok: found through TLS and basic auth; a wrong password and an unknown CA reported"

step "polling mode: rows wait for their subject, then go; one that does not fit is quarantined"
polling_schema # the logical table and publication give way to sql/outbox_polling.sql's
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
    SELECT gen_random_uuid(), 'porder', 'p-' || i, 'OrderPlaced',
           jsonb_build_object('id', 'p-' || i, 'qty', i, 'note', 'p' || i, 'price', i * 0.5,
                              'tags', jsonb_build_array('a'), 'status', 'NEW', 'total_cents', i)
    FROM generate_series(1, 20) i;
    INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
    VALUES ('00000000-0000-0000-0000-00000000bad4', 'porder', 'p-bad', 'OrderPlaced',
            '{\"id\": \"p-bad\", \"qty\": 1, \"price\": 1, \"tags\": [], \"status\": \"LOST\", \"total_cents\": 1}')"
relay_start p --set outbox.value_converter=avro --set registry.url="$CCOMPAT" \
    --set registry.timeout=1s --set registry.retry=300ms --set registry.not_ready_after=1s
wait_until 30 "the polling relay logs its HTTP port" bash -c "[[ -n \"\$(grep -o 'port [0-9]*)' '$T/relay.p.log')\" ]]"
P_PORT=$(outboxd_http_port "$T/relay.p.log")
wait_until 30 "the polling relay's /readyz names outbox.event.porder-value" \
    bash -c "curl -s http://127.0.0.1:$P_PORT/readyz | grep -q 'outbox.event.porder-value.*subject not found'"
assert_eq 0 "$(psql_q "SELECT count(*) FROM public.outbox_events WHERE status IN ('SENT', 'QUARANTINED')")" \
    "rows sent or quarantined before the subject exists"
ID_PORDER=$(register outbox.event.porder-value AVRO "$ORDER_AVRO")
wait_rows "status = 'SENT'" 20 60
wait_rows "status = 'QUARANTINED' AND last_error LIKE 'SCHEMA_MISMATCH: %\"LOST\" is not a symbol of enum Status%'" 1 30
bash "$REG" decode "$KAFKA_BOOTSTRAP" "$REG_URL/apis/registry/v3" 20 120 outbox.event.porder=avro \
    >"$T/decoded.jsonl" 2>"$T/decode.err" || fail "the consumer did not read the 20 polling events: $(tail -3 "$T/decode.err")"
load_decoded
assert_count 20 "SELECT count(*) FROM public.outbox_events o JOIN public.decoded d
             ON d.line->'headers'->>'event_id' = o.event_id::text
            WHERE d.line->>'key' = o.aggregate_id AND (d.line->>'schema_id')::int = $ID_PORDER
              AND d.line->'value' = o.payload"
relay_stop p
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/relay.p.ini" --set outbox.value_converter=avro \
    --set registry.url="$CCOMPAT" >"$T/check_polling.out" 2>&1 || true
grep -q "ok.*schema registry: avro: outbox.event.porder-value v1 id $ID_PORDER" "$T/check_polling.out" ||
    fail "outboxd check in polling mode did not find the subject: $(grep -i registry "$T/check_polling.out")"
info "ok: polling mode waited for the subject, sent 20 events that read back equal, quarantined 1; check found the subject"

e2e_pass
