#!/usr/bin/env bash
# [kafka] sasl.mechanism = AWS_MSK_IAM end to end (issue 57): a Kafka 4.4
# broker receives outboxd's MSK IAM tokens and accepts them, under load
# and across token refreshes. Amazon MSK is not reachable here, so the
# broker's SASL_SSL listener validates the tokens with a STAND-IN FOR MSK:
# tests/aws/MskIamValidator.java, an OAUTHBEARER server callback handler
# that decodes the token and verifies its SigV4 signature with its own code
# (javax.crypto, not outboxd's) against a test secret, and its validity
# period (principal: the access key id). The credentials come from a LOCAL
# STAND-IN for the container credentials endpoint (tests/aws/standin.py)
# and expire in AWS_LIFE seconds (default 20), so each token lives that
# long and outboxd fetches credentials and signs again several times;
# connections.max.reauth.ms makes each connection re-authenticate with the
# new token (KIP-368).
#  1. outboxd check: the kafka token line (source container, the key id's
#     last 4 characters, region); the broker answers over SASL_SSL.
#  2. at_least_once under load until outboxd signed AWS_ROUNDS (default 3)
#     tokens: every event delivered once, none failed, no ERROR.
#  3. exactly_once the same (2 tokens).
#  4. credentials the validator does not know (another key id): check's
#     broker line FAILs; outboxd exits 2 (a refusal), the slot not moved.
#  5. no credentials at all: outboxd keeps running and logs the sources it
#     tried; nothing confirmed past the unsent events.
# No secret key or session token in any output.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export E2E_KAFKA=real
e2e_init aws_msk_iam
command -v javac >/dev/null || fail "javac not found (Debian: openjdk-17-jdk-headless)"
KAFKA_SH=$E2E_SRC_DIR/tests/kafka/kafka.sh
LIFE=${AWS_LIFE:-20}
ROUNDS=${AWS_ROUNDS:-3}
REGION=eu-west-1

step "the stand-ins: MSK's token validator (compiled) and the container credentials endpoint"
LIB=$("$KAFKA_SH" resolve | tail -n 1) || fail "kafka.sh resolve failed"
mkdir -p "$T/validator"
javac -d "$T/validator" -cp "$LIB/*" "$E2E_SRC_DIR/tests/aws/MskIamValidator.java" >"$T/javac.log" 2>&1 ||
    fail "javac MskIamValidator.java: $(cat "$T/javac.log")"
# (e2e_bg: killed at the test's exit)
e2e_bg python3 "$E2E_SRC_DIR/tests/aws/standin.py" "$T/standin.port" "$T/standin.log" unused \
    "Bearer container-secret" >"$T/standin.out" 2>&1
for _ in $(seq 1 100); do
    [[ -s "$T/standin.port" ]] && break
    sleep 0.1
done
[[ -s "$T/standin.port" ]] || fail "the stand-in did not start: $(cat "$T/standin.out")"
STANDIN=http://127.0.0.1:$(cat "$T/standin.port")
info "container credentials stand-in at $STANDIN/container (credentials live $LIFE s; not AWS)"
# The chain as a pod with a container endpoint has it; nothing else.
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION \
    AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN AWS_CONTAINER_CREDENTIALS_RELATIVE_URI
export AWS_SHARED_CREDENTIALS_FILE=$T/no-credentials AWS_CONFIG_FILE=$T/no-config
export AWS_EC2_METADATA_DISABLED=true
export AWS_CONTAINER_CREDENTIALS_FULL_URI="$STANDIN/container?exp=$LIFE"
export AWS_CONTAINER_AUTHORIZATION_TOKEN="Bearer container-secret"

step "a throw-away CA and the broker's certificate"
TLS=$T/tls
tls_throwaway "$TLS"

pg_start
judge_slot
create_load_procedure
cat >"$T/broker.properties" <<EOF
ssl.keystore.type=PEM
ssl.keystore.location=$TLS/broker.pem
sasl.enabled.mechanisms=OAUTHBEARER
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class=MskIamValidator
connections.max.reauth.ms=$((LIFE * 1000))
EOF
KAFKA_EXTRA_LISTENERS="SASL_SSL" KAFKA_EXTRA_CLASSPATH=$T/validator \
    KAFKA_JVM_OPTS="-Dmsk.standin.akid=ASIACONTAINER -Dmsk.standin.secret=containerSecretXYZ -Dmsk.standin.region=$REGION" \
    E2E_KAFKA_PROPERTIES=$T/broker.properties broker_start
SASL_SERVERS=$("$KAFKA_SH" bootstrap "$E2E_KAFKA_DIR" SASL_SSL)
BROKER_LOG=$E2E_KAFKA_DIR/node1/stdout.log
info "SASL_SSL listener $SASL_SERVERS (OAUTHBEARER validated by the MSK stand-in)"
MSK=(--set "kafka.bootstrap.servers=$SASL_SERVERS" --set kafka.security.protocol=SASL_SSL
    --set "kafka.ssl.ca.location=$TLS/ca.pem" --set kafka.sasl.mechanism=AWS_MSK_IAM
    --set "aws.region=$REGION")
no_secret() { # WHERE FILE...
    local w=$1
    shift
    if cat "$@" | grep -F -e containerSecretXYZ -e containerTokenXYZ >/dev/null; then
        fail "a secret key or session token appears in $w"
    fi
    info "ok: no secret key or session token in $w"
}
run_check() { # NAME ARGS...
    local name=$1
    shift
    CHECK_RC=0
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" "$@" >"$T/$name.out" 2>&1 || CHECK_RC=$?
    info "outboxd check ($name) exited $CHECK_RC: $(grep -E '^(ok|FAIL|warn|skip) +kafka' "$T/$name.out" | cut -c1-400 | tr '\n' '|')"
}
signed() { outboxd_log_last_start | grep -c 'MSK IAM token signed' || true; }

step "1. outboxd check"
OUTBOXD_SLOT=outboxd outboxd_start "${MSK[@]}"
outboxd_stop || fail "outboxd exited $OUTBOXD_RC"
run_check check_ok "${MSK[@]}"
grep -E "^ok +kafka token: AWS_MSK_IAM token for region $REGION signed with credentials from container \(access key \.\.\.INER\); it expires [0-9T:-]+Z \(in $LIFE s\)" \
    "$T/check_ok.out" >/dev/null || fail "no ok kafka token line: $(grep -i token "$T/check_ok.out")"
grep -E '^ok +kafka broker' "$T/check_ok.out" >/dev/null ||
    fail "outboxd check did not reach the broker with its MSK IAM token: $(grep -i kafka "$T/check_ok.out")"
grep -q 'MskIamValidator: valid token of ASIACONTAINER' "$BROKER_LOG" ||
    fail "the broker's validator accepted no token: $(grep MskIamValidator "$BROKER_LOG" | tail -3)"

under_load() { # WHAT ROUNDS ARGS...
    local what=$1 want=$2 t0 n
    shift 2
    outboxd_start "${MSK[@]}" "$@"
    rm -f "$T/load.stop"
    e2e_bg bash -c 'i=0; while [[ ! -e $1/load.stop ]]; do
        psql -XAtq -v ON_ERROR_STOP=1 -c "CALL public.load(50, 16, 2, '"'"'$2-$i'"'"')" >/dev/null || exit 1
        i=$((i + 1)); sleep 0.5; done' _ "$T" "$what"
    LOAD_PID=$E2E_BG_PID
    t0=$SECONDS
    while :; do
        n=$(signed)
        ((n >= want)) && break
        ((SECONDS - t0 < (want + 2) * LIFE)) ||
            fail "$what: outboxd signed $n token(s) in $((SECONDS - t0)) s, expected $want (tokens live $LIFE s)"
        outboxd_assert_running
        sleep 1
    done
    touch "$T/load.stop"
    wait "$LOAD_PID" || fail "the load failed"
    info "$what: outboxd signed $n tokens in $((SECONDS - t0)) s under load; the validator accepted $(grep -c 'valid token of' "$BROKER_LOG") so far, refused $(grep -c 'invalid token' "$BROKER_LOG" || true)"
    wait_caught_up 120
    http_get /metrics >"$T/metrics.$what.txt"
    local failed
    failed=$(awk '$1 ~ /^outboxd_events_failed_total/ { s += $2 } END { print s + 0 }' "$T/metrics.$what.txt")
    assert_eq 0 "$failed" "$what: outboxd_events_failed_total"
    if outboxd_log_last_start | grep -E 'ERROR|refused|_AUTHENTICATION' >"$T/errors.$what.txt"; then
        fail "$what: outboxd logged errors: $(head -3 "$T/errors.$what.txt" | cut -c1-300)"
    fi
    outboxd_stop || fail "outboxd exited $OUTBOXD_RC"
}

step "2. at_least_once under load across token refreshes"
OUTBOXD_SLOT=outboxd under_load alo "$ROUNDS"
check_delivery --exactly-once
if grep -q 'invalid token' "$BROKER_LOG"; then
    fail "the validator refused a token of outboxd's: $(grep 'invalid token' "$BROKER_LOG" | head -3)"
fi

step "3. exactly_once under load across token refreshes"
"$KAFKA_SH" admin "$E2E_KAFKA_DIR" topic:outboxd.progress:1:cleanup.policy=compact >"$T/admin.log" 2>&1 ||
    fail "creating the progress topic failed: $(cat "$T/admin.log")"
OUTBOXD_SLOT=eos under_load eos 2 --set delivery.mode=exactly_once \
    --set delivery.transactional_id=outboxd-msk --set "offsets.file=$T/eos.offset"
check_delivery --exactly-once

cols="event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload"
insert_neg() {
    psql_q "INSERT INTO public.outbox_events ($cols) SELECT gen_random_uuid(), 'Neg', '$1-' || i, 1, 'Neg', '{}' FROM generate_series(1, 3) AS i"
}
export OUTBOXD_SLOT=outboxd

step "4. credentials the broker does not know"
before=$(slot_confirmed_lsn)
insert_neg unknown
export AWS_ACCESS_KEY_ID=AKIAUNKNOWNTOBROKER AWS_SECRET_ACCESS_KEY=whatever
run_check check_unknown "${MSK[@]}"
grep -E '^ok +kafka token: .*credentials from environment \(access key \.\.\.OKER\)' "$T/check_unknown.out" >/dev/null ||
    fail "no ok token line from the environment: $(grep -i token "$T/check_unknown.out")"
grep -E '^FAIL +kafka broker' "$T/check_unknown.out" >/dev/null ||
    fail "check's broker line does not FAIL: $(grep -i kafka "$T/check_unknown.out")"
outboxd_start --no-wait "${MSK[@]}"
outboxd_wait_exit 90
assert_eq 2 "$OUTBOXD_RC" "exit status (credentials the broker refuses)"
outboxd_log_last_start | grep -E 'the broker rejected the OAUTHBEARER token: _AUTHENTICATION.*AWS_MSK_IAM outboxd signed it' >/dev/null ||
    fail "no refusal line: $(outboxd_log_last_start | grep -E 'ERROR|WARN' | tail -3)"
info "ok: $(outboxd_log_last_start | grep -E 'rejected the OAUTHBEARER token' | tail -1 | cut -c1-300)"
assert_eq "$before" "$(slot_confirmed_lsn)" "slot position after the refusal"
grep -q 'MskIamValidator: invalid token: credential AKIAUNKNOWNTOBROKER/' "$BROKER_LOG" ||
    fail "the validator did not refuse the unknown key id"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY

step "5. no credentials at all"
unset AWS_CONTAINER_CREDENTIALS_FULL_URI
outboxd_start "${MSK[@]}"
outboxd_log_wait 'Failed to acquire SASL OAUTHBEARER token: no AWS credentials: environment: AWS_ACCESS_KEY_ID is not set; profile default: not found in .*; instance: AWS_EC2_METADATA_DISABLED is true' 60 1
wait_statuses 2
assert_eq "$before" "$(slot_confirmed_lsn)" "slot position without credentials"
outboxd_assert_running
info "ok: $(outboxd_log_last_start | grep -m1 'Failed to acquire SASL OAUTHBEARER token' | cut -c1-300)"
outboxd_stop || info "outboxd exited $OUTBOXD_RC on SIGTERM with events unsent"
assert_eq "$before" "$(slot_confirmed_lsn)" "slot position after stopping"
no_secret "the log, /metrics and outboxd check" "$T/outboxd.log" "$T"/metrics.*.txt "$T"/check_*.out
info "the MSK stand-in accepted $(grep -c 'valid token of ASIACONTAINER' "$BROKER_LOG") of outboxd's tokens (the stand-in issued credentials $(grep -c '^GET /container' "$T/standin.log") times)"
e2e_pass
