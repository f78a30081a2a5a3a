#!/usr/bin/env bash
# Kafka over TLS and SASL/SCRAM-SHA-512 over TLS, against one real Kafka
# broker (the suite's 4.4; 3.9.1 in kafka39.kafka_security) with three
# listeners: PLAINTEXT (the test's own dumps and the broker's internal
# traffic), SSL and SASL_SSL. A throw-away CA and the
# broker's certificate (SAN IP:127.0.0.1) are made with openssl here; the
# broker reads them as PEM (ssl.keystore.type = PEM); the SCRAM credential
# is added when the storage is formatted. E2E_KAFKA=real always.
#  1. TLS: outboxd with deploy/security.md's settings delivers every event.
#  2. SASL_SSL with SCRAM-SHA-512: the same; the password appears in no
#     output (log, outboxd check, /metrics). With a librdkafka before 2.6.1
#     against Kafka 4 (rdkafka202.kafka_security): exit 2, the refusal, the
#     start-up warning and outboxd check naming librdkafka#4895 instead.
#  3. a wrong password: exit 2 with a line naming the authentication
#     failure, the slot not advanced, no password in the output;
#  4. an untrusted certificate (outboxd given another CA): exit 2 with a
#     line naming the certificate verification failure, the slot not
#     advanced.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export E2E_KAFKA=real
e2e_init kafka_security
pg_start

step "a throw-away CA, the broker's certificate, and a second CA nobody uses"
TLS=$T/tls
tls_throwaway "$TLS"
# and a CA that signed nothing of this broker's
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TLS/rogue-ca.key" -out "$TLS/rogue-ca.pem" \
    -days 2 -subj "/CN=outboxd test rogue-ca" >>"$T/openssl.log" 2>&1 ||
    fail "openssl failed: $(tail -5 "$T/openssl.log")"
grep -q 'BEGIN PRIVATE KEY' "$TLS/broker.pem" || fail "openssl did not write a PKCS#8 key"

PASSWORD='Scram-pw-4711-kafka'
WRONG='Wrong-pw-0815-kafka'
cat >"$T/broker.properties" <<EOF
ssl.keystore.type=PEM
ssl.keystore.location=$TLS/broker.pem
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
EOF
KAFKA_EXTRA_LISTENERS="SSL SASL_SSL" \
    KAFKA_FORMAT_ARGS="--add-scram SCRAM-SHA-512=[name=outboxd,password=$PASSWORD]" \
    E2E_KAFKA_PROPERTIES=$T/broker.properties broker_start
KAFKA_SH=$E2E_SRC_DIR/tests/kafka/kafka.sh
SSL_SERVERS=$("$KAFKA_SH" bootstrap "$E2E_KAFKA_DIR" SSL)
SASL_SERVERS=$("$KAFKA_SH" bootstrap "$E2E_KAFKA_DIR" SASL_SSL)
info "SSL listener $SSL_SERVERS, SASL_SSL listener $SASL_SERVERS"

cols="event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload"
insert() { # TAG N
    psql_q "INSERT INTO public.outbox_events ($cols) SELECT gen_random_uuid(), 'Sec', '$1-' || i, 1, '$1', '{}' FROM generate_series(1, $2) AS i"
}
tls=(--set kafka.security.protocol=ssl --set "kafka.ssl.ca.location=$TLS/ca.pem")
sasl=(--set "kafka.bootstrap.servers=$SASL_SERVERS" --set kafka.security.protocol=sasl_ssl
      --set "kafka.ssl.ca.location=$TLS/ca.pem" --set kafka.sasl.mechanism=SCRAM-SHA-512
      --set kafka.sasl.username=outboxd)

# no_password WHERE FILE...: neither password is in FILE (but for the
# test's own "===== e2e: start" lines, which quote outboxd's command line).
no_password() {
    local w=$1
    shift
    if cat "$@" | grep -v '^===== e2e: start' | grep -F -e "$PASSWORD" -e "$WRONG" >/dev/null; then
        fail "a password appears in $w: $(cat "$@" | grep -v '^===== e2e: start' | grep -F -e "$PASSWORD" -e "$WRONG" | head -2 | cut -c1-300)"
    fi
    info "ok: no password in $w"
}

step "1. TLS (security.protocol = ssl, the test CA)"
outboxd_start --set "kafka.bootstrap.servers=$SSL_SERVERS" "${tls[@]}"
insert tls 20
wait_caught_up 60
check_delivery --exactly-once
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"

# refused CASE WHAT REGEX ARGS...: outboxd must exit 2 within 60 s with a
# log line matching REGEX, and confirm nothing past the events it could
# not deliver.
refused() {
    local what=$1 re=$2 before t0
    shift 2
    step "$what"
    before=$(slot_confirmed_lsn)
    insert refused 3
    t0=$SECONDS
    outboxd_start --no-wait "$@"
    outboxd_wait_exit 60
    info "outboxd exited $OUTBOXD_RC after $((SECONDS - t0)) s"
    assert_eq 2 "$OUTBOXD_RC" "exit status ($what)"
    grep -E "$re" "$T/outboxd.log" >/dev/null ||
        fail "no log line says '$re': $(grep -E 'ERROR|WARN' "$T/outboxd.log" | tail -3 | cut -c1-300)"
    info "ok: $(grep -E "$re" "$T/outboxd.log" | tail -1 | cut -c1-300)"
    assert_eq "$before" "$(slot_confirmed_lsn)" "slot position after '$what'"
}

# librdkafka before 2.6.1 (Debian 12's 2.0.2: the rdkafka202.* copy) sends a
# SCRAM proof Kafka 4 refuses as invalid credentials (librdkafka#4895).
# There, outboxd must say so: a warning at start, and the refusal naming
# the cause and the fix. Elsewhere SCRAM must work.
rdk=$("${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" --version | sed -n 's/^librdkafka //p')
kver=$(cat "$E2E_KAFKA_DIR/version")
scram_bug=
if [[ "$(printf '%s\n' "$rdk" 2.6.1 | sort -V | head -1)" != 2.6.1 && ${kver%%.*} -ge 4 ]]; then
    scram_bug=1
fi
if [[ -z $scram_bug ]]; then
    step "2. SASL_SSL with SCRAM-SHA-512"
    outboxd_start "${sasl[@]}" --set "kafka.sasl.password=$PASSWORD"
    insert sasl 20
    wait_caught_up 60
    check_delivery --exactly-once
    http_get /metrics >"$T/metrics.txt"
    [[ "$HTTP_STATUS" == 200 ]] || fail "/metrics answered $HTTP_STATUS"
    outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
    rc=0
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "${sasl[@]}" \
        --set "kafka.sasl.password=$PASSWORD" >"$T/check.out" 2>&1 || rc=$?
    grep -E '^ok +kafka broker' "$T/check.out" >/dev/null ||
        fail "outboxd check did not reach the broker over SASL_SSL: $(grep -i kafka "$T/check.out")"
    info "ok: outboxd check over SASL_SSL: $(grep -E '^ok +kafka broker' "$T/check.out")"
    no_password "the log, /metrics and outboxd check" "$T/outboxd.log" "$T/metrics.txt" "$T/check.out"
    if grep -F 'Kafka 4 brokers refuse' "$T/outboxd.log" >/dev/null; then
        fail "a warning about librdkafka's SCRAM and Kafka 4 with librdkafka $rdk (fixed in 2.6.1)"
    fi
else
    refused "2. SASL_SSL with SCRAM-SHA-512, librdkafka $rdk against Kafka $kver: refused, and said why" \
        'ERROR: kafka: the broker refused the connection for good: _AUTHENTICATION: .*librdkafka#4895.*deploy/librdkafka.sh' \
        "${sasl[@]}" --set "kafka.sasl.password=$PASSWORD"
    grep -E "WARN: \[kafka\] sasl.mechanism = SCRAM-SHA-512 with librdkafka $rdk: Kafka 4 brokers refuse" \
        "$T/outboxd.log" >/dev/null || fail "no warning at start about librdkafka $rdk's SCRAM and Kafka 4"
    info "ok: the start-up warning names librdkafka#4895"
    rc=0
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "${sasl[@]}" \
        --set "kafka.sasl.password=$PASSWORD" >"$T/check.out" 2>&1 || rc=$?
    grep -E '^FAIL +kafka broker' "$T/check.out" | grep -F 'librdkafka#4895' >/dev/null ||
        fail "outboxd check does not name librdkafka#4895: $(grep -i kafka "$T/check.out" | cut -c1-400)"
    info "ok: outboxd check names librdkafka#4895"
    : >"$T/metrics.txt"
    no_password "the log and outboxd check" "$T/outboxd.log" "$T/check.out"
fi

: >"$T/outboxd.log.before-refused"
refused "3. a wrong SCRAM password" 'ERROR: kafka: the broker refused the connection for good: _AUTHENTICATION: .*SASL authentication error.*correct \[kafka\] sasl.username' \
    "${sasl[@]}" --set "kafka.sasl.password=$WRONG"
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "${sasl[@]}" \
    --set "kafka.sasl.password=$WRONG" >"$T/check-wrong.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "outboxd check passed with a wrong password"
grep -E '^FAIL +kafka broker.*(uthentication)' "$T/check-wrong.out" >/dev/null ||
    fail "outboxd check does not name the authentication failure: $(grep -i kafka "$T/check-wrong.out" | cut -c1-300)"
info "ok: $(grep -E '^FAIL +kafka broker' "$T/check-wrong.out" | cut -c1-300)"
refused "4. an untrusted broker certificate" 'ERROR: kafka: the broker refused the connection for good: _SSL: .*certificate verify failed.*ssl.ca.location' \
    --set "kafka.bootstrap.servers=$SSL_SERVERS" --set kafka.security.protocol=ssl \
    --set "kafka.ssl.ca.location=$TLS/rogue-ca.pem"
no_password "the log and outboxd check" "$T/outboxd.log" "$T/check-wrong.out"
e2e_pass
