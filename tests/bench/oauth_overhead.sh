#!/usr/bin/env bash
# tests/bench/oauth_overhead.sh - what SASL_SSL with OAUTHBEARER (OIDC
# client credentials) costs against PLAINTEXT (issue 57), in one run, on
# the same Kafka 4.4 broker: one broker with both listeners (PLAINTEXT,
# and SASL_SSL taking OAUTHBEARER tokens validated against Keycloak's JWKS
# with ACLs by principal, as real.oauth_oidc sets it up: a throw-away CA,
# tests/keycloak/keycloak.sh, tests/kafka/kafka.sh), the token endpoint
# HTTPS with that CA. For each listener, with a fresh slot:
#  - the drain: EVENTS events committed while outboxd is stopped (bench_lib's
#    bench_load: 300-byte payloads, half in 10-event transactions), then
#    outboxd started: events/s from its start to the slot confirming the
#    last commit (timed by the server, bench_lib's slot_wait_bg), the
#    token's fetch and the TLS handshakes included;
#  - the steady state: pgbench at RATE events/s for SECS seconds; outboxd's
#    commit-to-ACK line at its stop (p50, p99, max; src/base/latency.c).
# The two listeners' lines are printed side by side. Tokens live 300 s:
# a refresh or two within a phase, as in production. Not a CI test: run
# it alone, under `flock /tmp/outboxd-heavy.lock`, on a quiet machine.
#
#   tests/bench/oauth_overhead.sh [EVENTS] [RATE] [SECONDS]   (200000, 5000, 30)
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
export E2E_KAFKA=real
EVENTS=${1:-200000}
RATE=${2:-5000}
SECS=${3:-30}
E2E_TIMEOUT=$((2 * SECS + EVENTS / 500 + 600))
e2e_init oauth_overhead
KC_SH=$E2E_SRC_DIR/tests/keycloak/keycloak.sh
KAFKA_SH=$E2E_SRC_DIR/tests/kafka/kafka.sh

step "a throw-away CA, the certificate of the broker and of Keycloak's HTTPS"
TLS=$T/tls
tls_throwaway "$TLS"

step "Keycloak: realm outboxd, client outboxd (audience kafka, tokens live 300 s)"
E2E_KEYCLOAK_DIR=$T/keycloak
KC=$("$KC_SH" start "$E2E_KEYCLOAK_DIR" "$TLS/broker.crt" "$TLS/broker.key") ||
    fail "Keycloak did not start (above)"
ISSUER=$("$KC_SH" https-url "$E2E_KEYCLOAK_DIR")/realms/outboxd
SECRET=bench-$(head -c 9 /dev/urandom | od -An -tx1 | tr -d ' \n')
jq -n --arg s "$SECRET" '{realm: "outboxd", enabled: true, accessTokenLifespan: 300,
    clients: [{clientId: "outboxd", secret: $s, publicClient: false,
        serviceAccountsEnabled: true, standardFlowEnabled: false,
        directAccessGrantsEnabled: false, clientAuthenticatorType: "client-secret",
        protocolMappers: [{name: "audience kafka", protocol: "openid-connect",
            protocolMapper: "oidc-audience-mapper",
            config: {"included.custom.audience": "kafka", "access.token.claim": "true",
                     "id.token.claim": "false"}}]}]}' >"$T/realm.json"
code=$(curl -s -o "$T/realm.out" -w '%{http_code}' -H "Authorization: Bearer $("$KC_SH" token "$E2E_KEYCLOAK_DIR")" \
    -H 'Content-Type: application/json' -d @"$T/realm.json" "$KC/admin/realms")
[[ $code == 201 ]] || fail "creating the realm: HTTP $code: $(cat "$T/realm.out")"

bench_pg_start
psql_q "$(bench_schema public.outbox_events "event_id, aggregate_type, aggregate_id, event_type, payload")" >/dev/null
bench_writer public.outbox_events "event_id, aggregate_type, aggregate_id, event_type, payload" Order
JWKS=$KC/realms/outboxd/protocol/openid-connect/certs
cat >"$T/broker.properties" <<EOF
ssl.keystore.type=PEM
ssl.keystore.location=$TLS/broker.pem
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:ANONYMOUS
sasl.enabled.mechanisms=OAUTHBEARER
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
sasl.oauthbearer.jwks.endpoint.url=$JWKS
sasl.oauthbearer.expected.issuer=$ISSUER
sasl.oauthbearer.expected.audience=kafka
sasl.oauthbearer.sub.claim.name=azp
connections.max.reauth.ms=300000
EOF
KAFKA_EXTRA_LISTENERS="SASL_SSL" KAFKA_AUTO_CREATE=false \
    KAFKA_JVM_OPTS="-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=$JWKS" \
    E2E_KAFKA_PROPERTIES=$T/broker.properties broker_start
PLAIN_SERVERS=$KAFKA_BOOTSTRAP
SASL_SERVERS=$("$KAFKA_SH" bootstrap "$E2E_KAFKA_DIR" SASL_SSL)
"$KAFKA_SH" admin "$E2E_KAFKA_DIR" topic:outbox.event.Order:6 topic:outboxd.progress:1:cleanup.policy=compact \
    'allow:User:outboxd:ALL:*' 'allow:User:outboxd:ALL:group/*' >"$T/admin.log" 2>&1 ||
    fail "creating the topic and ACLs failed: $(cat "$T/admin.log")"
printf '%s\n' "$SECRET" >"$T/oidc.secret"
chmod 600 "$T/oidc.secret"
OAUTH=(--set "kafka.bootstrap.servers=$SASL_SERVERS" --set kafka.security.protocol=sasl_ssl
    --set "kafka.ssl.ca.location=$TLS/ca.pem" --set kafka.sasl.mechanism=OAUTHBEARER
    --set kafka.sasl.oauthbearer.method=oidc --set kafka.sasl.oauthbearer.client.id=outboxd
    --set "kafka.sasl.oauthbearer.client.secret_file=$T/oidc.secret"
    --set "kafka.sasl.oauthbearer.token.endpoint.url=$ISSUER/protocol/openid-connect/token"
    --set kafka.sasl.oauthbearer.sub.claim.name=azp --set "kafka.https.ca.location=$TLS/ca.pem")
PLAIN=(--set "kafka.bootstrap.servers=$PLAIN_SERVERS")
info "PLAINTEXT $PLAIN_SERVERS, SASL_SSL $SASL_SERVERS (OAUTHBEARER; token endpoint $ISSUER)"

# drain NAME ARGS...: EVENTS events behind a fresh slot, then outboxd
# (ARGS) from its start to the slot confirming the last.
drain() {
    local name=$1 end t0 t1
    shift
    step "$name: the drain of $EVENTS events"
    export OUTBOXD_SLOT=drain_$name
    rm -f "$T/outboxd.offset"
    psql_q "SELECT pg_create_logical_replication_slot('$OUTBOXD_SLOT', '$OUTBOXD_TEST_PLUGIN')" >/dev/null
    psql_q "CALL bench_load($EVENTS, 0)" >/dev/null
    end=$(psql_q "SELECT pg_current_wal_lsn()")
    slot_wait_bg "$OUTBOXD_SLOT" "confirmed_flush_lsn >= '$end'" "$T/drain.$name.end"
    t0=$(date +%s.%N)
    outboxd_start --no-wait --set log.level=info "$@"
    wait "$SLOT_WAITER" || fail "$name: the slot did not confirm $end: $(cat "$T/drain.$name.end")"
    t1=$(cat "$T/drain.$name.end")
    outboxd_stop || fail "$name: outboxd exited $OUTBOXD_RC"
    DRAIN[$name]=$(awk -v n="$EVENTS" -v a="$t0" -v b="$t1" 'BEGIN { printf "%d events in %.2f s: %.0f events/s", n, b - a, n / (b - a) }')
    info "$name: drain: ${DRAIN[$name]}"
    psql_q "SELECT pg_drop_replication_slot('$OUTBOXD_SLOT')" >/dev/null
}

# steady NAME ARGS...: outboxd (ARGS) on a fresh slot, pgbench at RATE
# events/s for SECS s, outboxd's commit-to-ACK line once it caught up.
steady() {
    local name=$1 end
    shift
    step "$name: $RATE events/s for $SECS s"
    export OUTBOXD_SLOT=steady_$name
    rm -f "$T/outboxd.offset"
    outboxd_start --set log.level=info "$@"
    "$PG_BINDIR/pgbench" -n -c 4 -j 2 \
        -R "$(bench_tps "$RATE")" -T "$SECS" -f "$T/one.sql@10" -f "$T/ten.sql@1" \
        >"$T/pgbench.$name.log" 2>&1 || fail "$name: pgbench failed: $(tail -3 "$T/pgbench.$name.log")"
    end=$(psql_q "SELECT pg_current_wal_lsn()")
    caught() { [[ $(psql_q "SELECT confirmed_flush_lsn >= '$end' FROM pg_replication_slots WHERE slot_name = '$OUTBOXD_SLOT'") == t ]]; }
    wait_until 120 "$name: the slot confirmed past the load's end $end" caught
    outboxd_stop || fail "$name: outboxd exited $OUTBOXD_RC"
    LINE[$name]=$(outboxd_log_last_start | grep 'commit-to-ACK latency over' | tail -n 1 | sed 's/.*INFO: //')
    [[ -n "${LINE[$name]}" ]] || fail "$name: outboxd logged no latency line"
    info "$name: ${LINE[$name]}"
    psql_q "SELECT pg_drop_replication_slot('$OUTBOXD_SLOT')" >/dev/null
}
declare -A DRAIN LINE
drain plaintext "${PLAIN[@]}"
drain oauthbearer "${OAUTH[@]}"
steady plaintext "${PLAIN[@]}"
steady oauthbearer "${OAUTH[@]}"
step "PLAINTEXT against SASL_SSL/OAUTHBEARER, the same broker, one run"
printf '  drain, PLAINTEXT:            %s\n  drain, SASL_SSL/OAUTHBEARER: %s\n' \
    "${DRAIN[plaintext]}" "${DRAIN[oauthbearer]}" >&2
printf '  steady, PLAINTEXT:            %s\n  steady, SASL_SSL/OAUTHBEARER: %s\n' \
    "${LINE[plaintext]}" "${LINE[oauthbearer]}" >&2
e2e_pass
