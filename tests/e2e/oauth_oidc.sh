#!/usr/bin/env bash
# OAUTHBEARER with OIDC client credentials (issue 57) against a real OIDC
# provider and a real broker validating its tokens:
#  - Keycloak (tests/keycloak/keycloak.sh; Java 21+): a realm "outboxd"
#    whose access tokens live OIDC_TOKEN_LIFESPAN seconds (default 60),
#    with events on (each token issued is a CLIENT_LOGIN event, which is
#    how the test counts outboxd's token fetches), two confidential clients
#    with the client-credentials grant, "outboxd" and "reader", whose
#    tokens carry the audience "kafka", and "stranger", whose tokens carry
#    "billing"; its token endpoint HTTPS with a certificate of a throw-away
#    CA (outboxd's https.ca.location; the issuer the broker expects is
#    that URL), its admin API and JWKS plain HTTP;
#  - Kafka 4.4 with a SASL_SSL listener (a throw-away CA, as in
#    kafka_security.sh) taking OAUTHBEARER tokens validated against
#    Keycloak's JWKS (OAuthBearerValidatorCallbackHandler: issuer,
#    audience kafka, the principal from the azp claim, i.e. the client id;
#    the JWKS URL allowed by the JVM property Kafka 4 requires),
#    connections.max.reauth.ms so that a connection must re-authenticate
#    before its token expires (KIP-368), StandardAuthorizer with ACLs by
#    principal: User:outboxd may do everything on topics and groups and
#    write its transactional id; User:reader may read and describe every
#    topic and write only outbox.event.Other (so the broker gives it a
#    producer id: an idempotent producer needs WRITE on some topic);
#    the PLAINTEXT listener (the broker's own traffic, the test's dumps) is
#    the super user ANONYMOUS.
# Then:
#  1. outboxd check: "kafka token" shows principal outboxd (claim azp) and
#     the expiry; the broker answers; `outboxd config` masks the secret.
#  2. at_least_once under a steady load until Keycloak has issued
#     OIDC_REFRESHES (default 3; 2 at least) more tokens to outboxd than the
#     first: every event delivered exactly once (check_delivery), no failed
#     event, the secret in no output. Inside the first refresh window the
#     provider goes down (its HTTPS port refusing connections) until a
#     refresh failed, while the token held is still valid: deliveries go
#     on (no delivery over 5 s), the failed fetches are one ERROR line and
#     a recovery line, and the refreshes resume.
#  3. exactly_once (its own slot, transactional id outboxd-oidc) the same.
#  4. a wrong secret (in a file readable by others: warned): check FAILs
#     with the endpoint's 401 and its error; outboxd exits 2 naming it; the
#     slot does not move past the unsent events.
#  5. the token endpoint unreachable: check FAILs saying it did not
#     answer; outboxd keeps running (librdkafka tries again; a token it
#     has would last), logs each failed fetch, confirms nothing past the
#     unsent events.
#  6. the principal reader (no WRITE on the outbox's topic): check is ok
#     up to the broker; outboxd stops with exit 1 naming the event and
#     TOPIC_AUTHORIZATION_FAILED; the slot does not move past the unsent
#     events.
#  7. no https.ca.location (the system's CAs do not know the test's): check
#     FAILs naming the certificate problem; outboxd exits 2 naming it and
#     the setting; the slot does not move.
#  8. the principal stranger, whose token has the wrong audience: check's
#     token line is ok and shows audience billing, its broker line FAILs
#     saying the broker rejected the token; outboxd exits 2 saying the
#     same; the slot does not move (the broker's audience check is all
#     that stops it: stranger has the ACLs outboxd has).
# E2E_KAFKA=real always. Needs root (iptables, for the provider's outage).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export E2E_KAFKA=real
e2e_init oauth_oidc
KC_SH=$E2E_SRC_DIR/tests/keycloak/keycloak.sh
KAFKA_SH=$E2E_SRC_DIR/tests/kafka/kafka.sh
LIFESPAN=${OIDC_TOKEN_LIFESPAN:-60}
REFRESHES=${OIDC_REFRESHES:-3}

step "a throw-away CA and the certificate of the broker and of Keycloak's HTTPS"
TLS=$T/tls
tls_throwaway "$TLS"

step "Keycloak"
E2E_KEYCLOAK_DIR=$T/keycloak
KC=$("$KC_SH" start "$E2E_KEYCLOAK_DIR" "$TLS/broker.crt" "$TLS/broker.key") ||
    fail "Keycloak did not start (above)"
REALM=$KC/realms/outboxd
# outboxd's tokens come from the HTTPS endpoint (a certificate of the
# test's CA): their issuer is that URL, the one the broker expects
KC_HTTPS=$("$KC_SH" https-url "$E2E_KEYCLOAK_DIR")
ISSUER=$KC_HTTPS/realms/outboxd
TOKEN_URL=$ISSUER/protocol/openid-connect/token
SECRET=oidc-$(head -c 9 /dev/urandom | od -An -tx1 | tr -d ' \n')
READER_SECRET=reader-$(head -c 9 /dev/urandom | od -An -tx1 | tr -d ' \n')
STRANGER_SECRET=stranger-$(head -c 9 /dev/urandom | od -An -tx1 | tr -d ' \n')
client_json() { # ID SECRET [AUDIENCE]
    jq -n --arg id "$1" --arg s "$2" --arg aud "${3:-kafka}" '{clientId: $id, secret: $s, publicClient: false,
        serviceAccountsEnabled: true, standardFlowEnabled: false,
        directAccessGrantsEnabled: false, clientAuthenticatorType: "client-secret",
        protocolMappers: [{name: "audience kafka", protocol: "openid-connect",
            protocolMapper: "oidc-audience-mapper",
            config: {"included.custom.audience": $aud, "access.token.claim": "true",
                     "id.token.claim": "false"}}]}'
}
jq -n --argjson life "$LIFESPAN" --argjson a "$(client_json outboxd "$SECRET")" \
    --argjson b "$(client_json reader "$READER_SECRET")" \
    --argjson c "$(client_json stranger "$STRANGER_SECRET" billing)" \
    '{realm: "outboxd", enabled: true, accessTokenLifespan: $life, eventsEnabled: true,
      enabledEventTypes: ["CLIENT_LOGIN", "CLIENT_LOGIN_ERROR"], clients: [$a, $b, $c]}' \
    >"$T/realm.json"
code=$(curl -s -o "$T/realm.out" -w '%{http_code}' -H "Authorization: Bearer $("$KC_SH" token "$E2E_KEYCLOAK_DIR")" \
    -H 'Content-Type: application/json' -d @"$T/realm.json" "$KC/admin/realms")
[[ $code == 201 ]] || fail "creating the realm: HTTP $code: $(cat "$T/realm.out")"
info "realm outboxd at $REALM and $ISSUER: tokens live $LIFESPAN s; clients outboxd and reader (audience kafka), stranger (audience billing)"
# tokens_issued CLIENT SINCE_MS: "TOKENS ROUNDS LAST": how many tokens
# Keycloak issued to CLIENT since SINCE_MS (epoch ms), in how many rounds,
# and when the last (epoch ms, 0: none) (a gap
# of more than a quarter of the lifespan starts a new one: each of
# outboxd's librdkafka handles fetches its own token, at start and at each
# refresh, so a round is one start or one refresh).
tokens_issued() {
    curl -sf -H "Authorization: Bearer $("$KC_SH" token "$E2E_KEYCLOAK_DIR")" \
        "$KC/admin/realms/outboxd/events?client=$1&type=CLIENT_LOGIN&max=100000" |
        jq -r --argjson since "$2" --argjson gap "$((LIFESPAN * 250))" \
            '[.[].time | select(. >= $since)] | sort
             | "\(length) \(if length == 0 then 0 else
                 ([range(1; length) as $i | select(.[$i] - .[$i - 1] > $gap)] | length) + 1 end) \(.[-1] // 0)"'
}


pg_start
judge_slot
create_load_procedure
cat >"$T/broker.properties" <<EOF
ssl.keystore.type=PEM
ssl.keystore.location=$TLS/broker.pem
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:ANONYMOUS
sasl.enabled.mechanisms=OAUTHBEARER
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
sasl.oauthbearer.jwks.endpoint.url=$REALM/protocol/openid-connect/certs
sasl.oauthbearer.expected.issuer=$ISSUER
sasl.oauthbearer.expected.audience=kafka
sasl.oauthbearer.sub.claim.name=azp
connections.max.reauth.ms=$((LIFESPAN * 1000))
EOF
KAFKA_EXTRA_LISTENERS="SASL_SSL" KAFKA_AUTO_CREATE=false \
    KAFKA_JVM_OPTS="-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=$REALM/protocol/openid-connect/certs" \
    E2E_KAFKA_PROPERTIES=$T/broker.properties broker_start
SASL_SERVERS=$("$KAFKA_SH" bootstrap "$E2E_KAFKA_DIR" SASL_SSL)
step "topics and ACLs by principal"
"$KAFKA_SH" admin "$E2E_KAFKA_DIR" topic:outbox.event.Load:4 topic:outbox.event.Neg:2 \
    topic:outboxd.progress:1:cleanup.policy=compact \
    'allow:User:outboxd:WRITE:*' 'allow:User:outboxd:READ:*' 'allow:User:outboxd:DESCRIBE:*' \
    'allow:User:outboxd:DESCRIBE_CONFIGS:*' \
    'allow:User:outboxd:READ:group/*' 'allow:User:outboxd:DESCRIBE:group/*' \
    allow:User:outboxd:WRITE:transactional_id/outboxd-oidc \
    allow:User:outboxd:DESCRIBE:transactional_id/outboxd-oidc \
    'allow:User:reader:DESCRIBE:*' 'allow:User:reader:READ:*' \
    'allow:User:stranger:ALL:*' 'allow:User:stranger:ALL:group/*' \
    allow:User:reader:WRITE:outbox.event.Other >"$T/admin.log" 2>&1 ||
    fail "creating topics and ACLs failed: $(cat "$T/admin.log")"
info "SASL_SSL listener $SASL_SERVERS (OAUTHBEARER, JWKS $REALM/protocol/openid-connect/certs)"

printf '%s\n' "$SECRET" >"$T/oidc.secret"
printf '%s\n' "$READER_SECRET" >"$T/reader.secret"
printf '%s\n' "$STRANGER_SECRET" >"$T/stranger.secret"
chmod 600 "$T/oidc.secret" "$T/reader.secret" "$T/stranger.secret"
# oidc CLIENT SECRET_FILE [TOKEN_URL [CA]]: the --set options of an OIDC
# login (the token endpoint's CA: https.ca.location; "-": none)
oidc() {
    printf '%s\n' --set "kafka.bootstrap.servers=$SASL_SERVERS" --set kafka.security.protocol=sasl_ssl \
        --set "kafka.ssl.ca.location=$TLS/ca.pem" --set kafka.sasl.mechanism=OAUTHBEARER \
        --set kafka.sasl.oauthbearer.method=oidc --set "kafka.sasl.oauthbearer.client.id=$1" \
        --set "kafka.sasl.oauthbearer.client.secret_file=$2" \
        --set "kafka.sasl.oauthbearer.token.endpoint.url=${3:-$TOKEN_URL}" \
        --set kafka.sasl.oauthbearer.sub.claim.name=azp
    [[ ${4:-} == - ]] || printf '%s\n' --set "kafka.https.ca.location=${4:-$TLS/ca.pem}"
}
mapfile -t OIDC < <(oidc outboxd "$T/oidc.secret")
# no_secret WHERE FILE...: no client secret is in FILE.
no_secret() {
    local w=$1
    shift
    if cat "$@" | grep -F -e "$SECRET" -e "$READER_SECRET" -e "$STRANGER_SECRET" >/dev/null; then
        fail "a client secret appears in $w"
    fi
    info "ok: no client secret in $w"
}
# run_check NAME ARGS...: outboxd check into $T/NAME.out (its status in CHECK_RC).
run_check() {
    local name=$1
    shift
    CHECK_RC=0
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "$@" >"$T/$name.out" 2>&1 || CHECK_RC=$?
    info "outboxd check ($name) exited $CHECK_RC: $(grep -E '^(ok|FAIL|warn|skip) +kafka' "$T/$name.out" | cut -c1-400 | tr '\n' '|')"
}

# outboxd_start writes $T/outboxd.ini; check runs with the same file.
step "1. outboxd check"
OUTBOXD_SLOT=outboxd outboxd_start "${OIDC[@]}"
outboxd_stop || fail "outboxd exited $OUTBOXD_RC"
run_check check_ok "${OIDC[@]}"
grep -E "^ok +kafka token: principal outboxd \(claim azp\) from $TOKEN_URL; the token expires [0-9T:-]+Z \(in [0-9]+ s\)" \
    "$T/check_ok.out" >/dev/null || fail "no ok 'kafka token' line naming principal outboxd and the expiry: $(grep -i token "$T/check_ok.out")"
grep -E '^ok +kafka broker' "$T/check_ok.out" >/dev/null ||
    fail "outboxd check did not reach the broker over SASL_SSL/OAUTHBEARER: $(grep -i kafka "$T/check_ok.out")"
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" config -c "$T/outboxd.ini" "${OIDC[@]}" >"$T/config.out" 2>&1 ||
    fail "outboxd config failed: $(tail -3 "$T/config.out")"
grep -E '^sasl\.oauthbearer\.client\.secret = \*{8} ' "$T/config.out" >/dev/null ||
    fail "outboxd config does not mask the client secret: $(grep -F oauthbearer.client "$T/config.out")"
grep -F "sasl.oauthbearer.client.secret_file = $T/oidc.secret" "$T/config.out" >/dev/null ||
    fail "outboxd config does not show the secret file"
info "ok: outboxd config: $(grep -F 'sasl.oauthbearer.client.secret' "$T/config.out" | tr '\n' '|')"

# provider_outage: Keycloak's HTTPS port refuses every new connection (a
# TCP reset, what a stopped Keycloak's port answers) until outboxd has
# logged a failed token fetch, then takes them again. Called 60 % into a
# token's life: librdkafka's refresh (at 80 %) fails, and its next try (10
# s later, before the token expires) must find the provider back. A
# real stop and start of Keycloak takes it 10-20 s here, more than a 60 s
# token leaves: the port is cut instead (root; iptables, as
# tests/e2e/netns_lib.sh).
KC_HTTPS_PORT=${KC_HTTPS##*:}
OUTAGE_RULE=(INPUT -i lo -p tcp --dport "$KC_HTTPS_PORT" --syn -j REJECT --reject-with tcp-reset)
# (then lib.sh's cleanup, with the test's status; errexit off: a rule
# already gone must not end the trap before it)
trap 'e2e_rc=$?; set +e; trap - ERR; iptables -w -D "${OUTAGE_RULE[@]}" 2>/dev/null; (exit $e2e_rc); _e2e_cleanup' EXIT
TOKEN_FAILED_RE='kafka: OIDC: .*Failed to retrieve OIDC token from'
failed_fetches() { grep -cE -- "$TOKEN_FAILED_RE" "$T/outboxd.log" || true; }
provider_outage() {
    local before t0=$SECONDS
    before=$(failed_fetches)
    iptables -w -I "${OUTAGE_RULE[@]}" || fail "iptables could not cut Keycloak's HTTPS port"
    info "the provider down: $TOKEN_URL refuses connections"
    while (($(failed_fetches) <= before)); do
        ((SECONDS - t0 < LIFESPAN)) || fail "no failed token fetch logged within $LIFESPAN s of the provider going down"
        outboxd_assert_running
        sleep 0.2
    done
    iptables -w -D "${OUTAGE_RULE[@]}"
    info "the provider back after $((SECONDS - t0)) s: outboxd logged $(grep -E -- "$TOKEN_FAILED_RE" "$T/outboxd.log" | tail -n 1 | cut -c1-300)"
}

# under_load WHAT REFRESHES ARGS...: outboxd (ARGS) under a steady load until
# Keycloak issued it tokens in REFRESHES rounds after its start; then
# caught up. With OUTAGE=1, provider_outage 60 % into the first round's
# tokens (REFRESHES >= 2: the round after it, the refreshes resumed).
under_load() {
    local what=$1 want=$2 since n rounds last t0 cut=
    shift 2
    since=$(date +%s%3N)
    outboxd_start "$@"
    rm -f "$T/load.stop"
    e2e_bg bash -c 'i=0; while [[ ! -e $1/load.stop ]]; do
        psql -XAtq -v ON_ERROR_STOP=1 -c "CALL public.load(50, 16, 2, '"'"'$2-$i'"'"')" >/dev/null || exit 1
        i=$((i + 1)); sleep 0.5; done' _ "$T" "$what"
    LOAD_PID=$E2E_BG_PID
    t0=$SECONDS
    while :; do
        read -r n rounds last < <(tokens_issued outboxd "$since")
        ((rounds >= want + 1)) && break
        if [[ ${OUTAGE:-} == 1 && -z $cut ]] && ((want >= 2 && rounds == 1 &&
            $(date +%s%3N) - last >= LIFESPAN * 600)); then
            provider_outage
            cut=$SECONDS
        fi
        ((SECONDS - t0 < (want + 2) * LIFESPAN)) ||
            fail "$what: Keycloak issued outboxd $n token(s) in $rounds round(s) in $((SECONDS - t0)) s, expected $((want + 1)) rounds (tokens live $LIFESPAN s)"
        outboxd_assert_running
        sleep 2
    done
    touch "$T/load.stop"
    wait "$LOAD_PID" || fail "the load failed"
    info "$what: Keycloak issued outboxd $n tokens in $rounds rounds (its start and $((rounds - 1)) refreshes) in $((SECONDS - t0)) s under load ($(psql_q "SELECT count(*) FROM public.outbox_events") committed events so far)"
    wait_caught_up 120
    http_get /metrics >"$T/metrics.$what.txt"
    local failed
    failed=$(awk '$1 ~ /^outboxd_events_failed_total/ { s += $2 } END { print s + 0 }' "$T/metrics.$what.txt")
    assert_eq 0 "$failed" "$what: outboxd_events_failed_total"
    info "$what: acked $(awk '$1 ~ /^outboxd_events_acked_total/ { s += $2 } END { print s + 0 }' "$T/metrics.$what.txt") events, 0 failed"
    # (the provider's outage: its failed fetches, said by the lines checked
    # below)
    if outboxd_log_last_start | grep -vE -- "$TOKEN_FAILED_RE" |
        grep -E 'ERROR|refused|_AUTHENTICATION' >"$T/errors.$what.txt"; then
        fail "$what: outboxd logged errors: $(head -3 "$T/errors.$what.txt" | cut -c1-300)"
    fi
    outboxd_stop || fail "outboxd exited $OUTBOXD_RC"
    # No delivery waited for a token: the slowest commit-to-ACK of the run
    # (outboxd's summary at its stop) stays below 5 s.
    local lat max
    lat=$(outboxd_log_last_start | grep -o 'commit-to-ACK latency over .*' | tail -n 1)
    max=$(sed -n 's/.* max \([0-9]*\) us.*/\1/p' <<<"$lat")
    [[ -n "$max" ]] || fail "$what: no commit-to-ACK summary in the log"
    ((max < 5000000)) || fail "$what: a delivery took $max us from commit to ACK: $lat"
    info "$what: $lat"
    REFRESHED="$((rounds - 1)) refreshes ($n tokens)"
    if [[ ${OUTAGE:-} == 1 && -z $cut ]]; then
        info "$what: no provider outage (OIDC_REFRESHES < 2: by hand only)"
        return 0
    fi
    [[ -n $cut ]] || return 0
    # The outage's failed fetches, folded: one line at once (ERROR), one
    # more per 30 s at most while they fail (here one refresh failed: none),
    # one when none failed for 45 s; librdkafka's error callback's copy a
    # debug line.
    outboxd_log_last_start | grep -E -- 'kafka: OIDC: ' >"$T/outage.$what.txt" || true
    local said
    said=$(grep -cE 'ERROR|WARN' "$T/outage.$what.txt") || true
    ((said == 1)) ||
        fail "$what: the provider's outage took $said warning/error lines (folded: 1): $(cut -c1-200 "$T/outage.$what.txt")"
    grep -E 'INFO.*kafka: OIDC: recovered after .* \([0-9]+ failed attempts?\); no fetch failed in the 45 s since: the identity provider answers again' \
        "$T/outage.$what.txt" >/dev/null ||
        fail "$what: no line saying the token fetches recovered: $(cut -c1-200 "$T/outage.$what.txt")"
    info "$what: the provider's outage in the log: $(grep -E 'ERROR|WARN|INFO' "$T/outage.$what.txt" | cut -c1-260 | tr '\n' '|')"
}

step "2. at_least_once under load across token refreshes"
OUTAGE=1 OUTBOXD_SLOT=outboxd under_load alo "$REFRESHES" "${OIDC[@]}"
ALO_REFRESHED=$REFRESHED
check_delivery --exactly-once

step "3. exactly_once under load across token refreshes"
export OUTBOXD_SLOT=eos
under_load eos "$REFRESHES" "${OIDC[@]}" --set delivery.mode=exactly_once \
    --set delivery.transactional_id=outboxd-oidc --set "offsets.file=$T/eos.offset"
EOS_REFRESHED=$REFRESHED
check_delivery --exactly-once
no_secret "the log, /metrics, outboxd check and outboxd config" "$T/outboxd.log" \
    "$T"/metrics.*.txt "$T/check_ok.out" "$T/config.out"
export OUTBOXD_SLOT=outboxd

# refused WHAT CODE REGEX ARGS...: 3 events, then outboxd (ARGS) must exit
# CODE within 90 s with a log line matching REGEX, the slot not moved.
cols="event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload"
insert_neg() {
    psql_q "INSERT INTO public.outbox_events ($cols) SELECT gen_random_uuid(), 'Neg', '$1-' || i, 1, 'Neg', '{}' FROM generate_series(1, 3) AS i"
}
refused() {
    local what=$1 rc=$2 re=$3 before
    shift 3
    step "$what"
    before=$(slot_confirmed_lsn)
    insert_neg "$what"
    outboxd_start --no-wait "$@"
    outboxd_wait_exit 90
    assert_eq "$rc" "$OUTBOXD_RC" "exit status ($what)"
    outboxd_log_last_start | grep -E "$re" >/dev/null ||
        fail "no log line says '$re': $(outboxd_log_last_start | grep -E 'ERROR|WARN' | tail -3 | cut -c1-300)"
    info "ok: $(outboxd_log_last_start | grep -E "$re" | tail -1 | cut -c1-400)"
    assert_eq "$before" "$(slot_confirmed_lsn)" "slot position after '$what'"
}

step "4. a wrong client secret"
printf 'not-the-secret\n' >"$T/wrong.secret"
chmod 644 "$T/wrong.secret"
mapfile -t WRONG < <(oidc outboxd "$T/wrong.secret")
run_check check_wrong "${WRONG[@]}"
grep -E "^FAIL +kafka token: the token endpoint $TOKEN_URL refused the client credentials of client outboxd: HTTP 401: unauthorized_client: Invalid client or Invalid client credentials" \
    "$T/check_wrong.out" >/dev/null || fail "check does not FAIL naming the endpoint's 401: $(grep -i token "$T/check_wrong.out")"
refused "4. a wrong client secret: exit 2" 2 \
    'ERROR: kafka: the identity provider refused the token request for good: _AUTHENTICATION: Failed to acquire SASL OAUTHBEARER token: .*unauthorized_client' \
    "${WRONG[@]}"
outboxd_log_last_start | grep -F "$T/wrong.secret holds the OIDC client secret" >/dev/null ||
    fail "no warning that the secret file is readable by others"
info "ok: $(outboxd_log_last_start | grep -F "$T/wrong.secret holds" | cut -c1-300)"

step "5. the token endpoint unreachable"
DEAD_URL=http://127.0.0.1:$(free_port)/realms/outboxd/protocol/openid-connect/token
mapfile -t DEAD < <(oidc outboxd "$T/oidc.secret" "$DEAD_URL")
run_check check_dead "${DEAD[@]}"
grep -E "^FAIL +kafka token: the token endpoint $DEAD_URL did not answer; client outboxd: .*(Couldn't connect|Connection refused)" \
    "$T/check_dead.out" >/dev/null || fail "check does not FAIL saying the endpoint did not answer: $(grep -i token "$T/check_dead.out")"
before=$(slot_confirmed_lsn)
insert_neg dead
outboxd_start "${DEAD[@]}"
# the first failure an error at once, the next ones (every 10 s) folded:
# debug lines
outboxd_log_wait "ERROR: kafka: OIDC: Failed to retrieve OIDC token from \"$DEAD_URL\": .*\(repeats are folded" 30
outboxd_log_wait "DEBUG: kafka: OIDC: .*Failed to retrieve OIDC token from \"$DEAD_URL\"" 30
wait_statuses 2
n=$(outboxd_log_last_start | grep -cE 'ERROR|WARN.*OIDC') || true
assert_eq 1 "$n" "error or warning lines with the token endpoint unreachable, 2 fetches failed"
assert_eq "$before" "$(slot_confirmed_lsn)" "slot position with the token endpoint unreachable"
outboxd_assert_running
info "ok: outboxd keeps trying: $(outboxd_log_last_start | grep -cE 'Failed to retrieve OIDC token') failed fetches logged, 1 as an error"
outboxd_stop || info "outboxd exited $OUTBOXD_RC on SIGTERM with events unsent"
assert_eq "$before" "$(slot_confirmed_lsn)" "slot position after stopping"

step "6. the principal reader, without WRITE"
mapfile -t READER < <(oidc reader "$T/reader.secret")
run_check check_reader "${READER[@]}"
grep -E '^ok +kafka token: principal reader \(claim azp\)' "$T/check_reader.out" >/dev/null ||
    fail "no ok token line for reader: $(grep -i token "$T/check_reader.out")"
refused "6. the principal reader, without WRITE: exit 1" 1 \
    'ERROR: .*TOPIC_AUTHORIZATION_FAILED' "${READER[@]}"

step "7. the token endpoint's certificate not trusted (no https.ca.location)"
mapfile -t NOCA < <(oidc outboxd "$T/oidc.secret" "$TOKEN_URL" -)
run_check check_noca "${NOCA[@]}"
grep -E "^FAIL +kafka token: the token endpoint $TOKEN_URL: its certificate did not verify \(no https.ca.location: the system's CAs\); client outboxd: SSL certificate problem: .*; set \[kafka\] https.ca.location" \
    "$T/check_noca.out" >/dev/null || fail "check does not FAIL naming the certificate: $(grep -i token "$T/check_noca.out")"
refused "7. no https.ca.location: exit 2" 2 \
    "ERROR: kafka: the identity provider's certificate did not verify: _AUTHENTICATION: Failed to acquire SASL OAUTHBEARER token: SSL certificate problem: .*; set \\[kafka\\] https.ca.location to the CA that signed the identity provider" \
    "${NOCA[@]}"

step "8. a token the broker rejects: audience billing, the broker expects kafka"
mapfile -t STRANGER < <(oidc stranger "$T/stranger.secret")
run_check check_stranger "${STRANGER[@]}"
# (Keycloak may add its "account" audience: kafka is what must be missing)
grep -E "^ok +kafka token: principal stranger \(claim azp\) .*; audience (account, )?billing(, account)?, issuer $ISSUER" \
    "$T/check_stranger.out" >/dev/null || fail "no ok token line for stranger naming its audience: $(grep -i token "$T/check_stranger.out")"
grep -E '^FAIL +kafka broker: .* refused the connection: _AUTHENTICATION: .*invalid_token.*; the identity provider issued it, the broker refused it: its claims' \
    "$T/check_stranger.out" >/dev/null || fail "check does not FAIL the broker naming the rejected token: $(grep -i kafka "$T/check_stranger.out")"
refused "8. the broker rejects the token: exit 2" 2 \
    'ERROR: kafka: the broker rejected the OAUTHBEARER token: _AUTHENTICATION: .*invalid_token.*; the identity provider issued it, the broker refused it: its claims \(outboxd check prints' \
    "${STRANGER[@]}"
no_secret "every output" "$T/outboxd.log" "$T"/check_*.out
info "tokens refreshed under load: at_least_once $ALO_REFRESHED, exactly_once $EOS_REFRESHED (tokens live $LIFESPAN s)"
e2e_pass
