#!/usr/bin/env bash
# [postgres] auth = aws_rds_iam against a server that really checks the
# token: a STAND-IN for Amazon RDS, not RDS. PostgreSQL authenticates the
# role outboxd by PAM (hostssl ... pam, as RDS does for rds_iam roles);
# the PAM service runs tests/e2e/rds_iam_verify.py (pam_exec
# expose_authtok: the password on stdin), which parses the token and
# recomputes its SigV4 signature (service rds-db, the region, host:port
# and DBUser of this connection, X-Amz-Date within 15 minutes) with
# Python's standard library and the test's secret key: an implementation
# independent of outboxd's signer. TLS with a throw-away CA,
# sslmode=verify-full; the AWS credentials come from the environment, the
# region from [aws] region.
#
# Proves: `outboxd check` says the credentials' source, that a token was
# made and the connection with it succeeded; the second server of a
# multi-host conninfo gets a token of its own; events stream end to end
# (mock broker); `outboxd verify` (a tool) connects with a token; a
# walsender terminated by pg_terminate_backend is reconnected with a NEW
# token (the verifier then refuses every token made before the kill); a
# wrong secret key gives the server's answer (PAM authentication failed)
# in check's FAIL line and at start (exit 2), and nothing is confirmed; no
# credentials at all are retried until a shared credentials file appears,
# then the held event is sent; sslmode=require is refused at start,
# naming the problem, before any connection; the polling relay ([source]
# mode = polling) connects with a token and, its backend terminated,
# reconnects with a new one. Not proved: anything of RDS's own side (its
# PAM module, rds_iam, IAM policies), a token with a session token (PAM
# hands a command at most 512 bytes of password), or a token's acceptance
# by AWS: the signature is checked against the same SigV4 rules, computed
# by other code (which agrees with botocore's generate_db_auth_token;
# tests/e2e/rds_iam_verify.py).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/polling_lib.sh"
e2e_init rds_iam

pg_config --configure | grep -q -- --with-pam ||
    fail "this PostgreSQL is built without PAM (pg_config --configure has no --with-pam)"
pam_exec=$(ls /lib/*/security/pam_exec.so /usr/lib/*/security/pam_exec.so 2>/dev/null | head -n 1)
[[ -n "$pam_exec" ]] || fail "pam_exec.so not found (Debian: apt-get install libpam-modules)"
[[ $(id -u) -eq 0 ]] || fail "needs root: it writes a PAM service to /etc/pam.d"

pg_start
broker_start

step "TLS: a throw-away CA and a server certificate for localhost"
RDS=$T/rds # the verifier's directory: the server (user postgres) runs it
mkdir -p "$RDS"
tls_throwaway "$T/tls" # its certificate names localhost (and 127.0.0.1)
cp "$T/tls/ca.pem" "$T/rds-ca.pem"
cp "$T/tls/broker.key" "$T/server.key"
cp "$T/tls/broker.crt" "$T/server.crt"
chmod 600 "$T/server.key"
chown postgres "$T/server.key" "$T/server.crt"
psql_q "ALTER SYSTEM SET ssl_cert_file = '$T/server.crt'" >/dev/null
psql_q "ALTER SYSTEM SET ssl_key_file = '$T/server.key'" >/dev/null
psql_q "ALTER SYSTEM SET ssl = on" >/dev/null

step "the role outboxd authenticated by PAM, with the token verifier"
AKID=AKIDOUTBOXDTEST0001
SECRET='outboxd/test+secret/key0123456789abcdefgh'
REGION=eu-west-1
ENDPOINT=localhost:$PGPORT
install -m 755 "$E2E_LIB_DIR/rds_iam_verify.py" "$RDS/verify.py"
printf '%s\n' "$AKID" "$SECRET" "$REGION" "$ENDPOINT" >"$RDS/secret"
chmod 600 "$RDS/secret"
chown -R postgres "$RDS"
chmod 700 "$RDS"
# Linux-PAM lowercases the service name before it opens /etc/pam.d/NAME.
PAM_SERVICE=outboxd-test-rds-iam-$(tr 'A-Z' 'a-z' <<<"${T##*.}")
PAM_FILE=/etc/pam.d/$PAM_SERVICE
[[ ! -e "$PAM_FILE" ]] || fail "$PAM_FILE exists already"
E2E_RM_AT_EXIT+=("$PAM_FILE")
cat >"$PAM_FILE" <<EOF
# outboxd's test tests/e2e/rds_iam.sh (removed when it exits): an RDS stand-in
auth required $pam_exec expose_authtok quiet $RDS/verify.py $RDS
account required pam_permit.so
EOF
psql -XAtq -v ON_ERROR_STOP=1 -f "$E2E_SRC_DIR/sql/role.sql" >/dev/null
hba=$T/pgdata/pg_hba.conf
{
    echo "hostssl all outboxd 127.0.0.1/32 pam pamservice=$PAM_SERVICE"
    echo "hostssl replication outboxd 127.0.0.1/32 pam pamservice=$PAM_SERVICE"
    echo "host all outboxd all reject"
    echo "host replication outboxd all reject"
    cat "$hba"
} >"$hba.new"
cat "$hba.new" >"$hba"
rm -f "$hba.new"
pg_reload
assert_eq on "$(psql_q "SHOW ssl")" "ssl after reload"

# The stand-in refuses what it should, before outboxd is asked anything:
# no password at all (libpq: the server asked for one).
PGPASSWORD=not-a-token psql "host=localhost hostaddr=127.0.0.1 port=$PGPORT user=outboxd dbname=postgres sslmode=verify-full sslrootcert=$T/rds-ca.pem" \
    -XAtqc 'SELECT 1' >"$T/psql.out" 2>&1 && fail "the stand-in accepted a password that is no token"
grep -q 'PAM authentication failed for user "outboxd"' "$T/psql.out" ||
    fail "the stand-in's refusal: $(cat "$T/psql.out")"
grep -q 'REFUSED user=outboxd .*not a token' "$RDS/verify.log" ||
    fail "the verifier did not refuse the non-token: $(cat "$RDS/verify.log" 2>/dev/null)"
info "ok: the stand-in refuses a password that is no token"

# The credentials from the environment, the region from [aws].
export AWS_ACCESS_KEY_ID=$AKID AWS_SECRET_ACCESS_KEY=$SECRET
export AWS_EC2_METADATA_DISABLED=true
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION
PG_CONNINFO="host=localhost hostaddr=127.0.0.1 port=$PGPORT user=outboxd dbname=postgres sslmode=verify-full sslrootcert=$T/rds-ca.pem"
IAM=(--set postgres.auth=aws_rds_iam --set aws.region=$REGION)
accepted() { grep -c '^.* ACCEPTED ' "$RDS/verify.log" || true; }

# run_check: outboxd check with the test's settings; its output in
# $T/check.out (its exit status is not the point: the topics may not
# exist yet).
run_check() {
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check --set "postgres.conninfo=$PG_CONNINFO" \
        --set "kafka.bootstrap.servers=$KAFKA_BOOTSTRAP" --set "offsets.file=$T/outboxd.offset" \
        "${IAM[@]}" >"$T/check.out" 2>&1 || true
}

step "outboxd check: the credentials' source, a token, the connection with it"
run_check
line=$(grep -m1 'postgres auth' "$T/check.out") || fail "check said no 'postgres auth' line: $(cat "$T/check.out")"
grep -qE "^ok +postgres auth: aws_rds_iam: credentials from environment, region $REGION, a token for localhost:$PGPORT as user \"outboxd\"; the connection with it succeeded" <<<"$line" ||
    fail "check's auth line: $line"
grep -qE '^ok +postgres connection' "$T/check.out" || fail "check: $(grep 'postgres connection' "$T/check.out")"
grep -qE '^ok +replication connection' "$T/check.out" || fail "check: $(grep 'replication connection' "$T/check.out")"
info "ok: $line"
grep -q "$SECRET" "$T/check.out" && fail "check printed the secret key"
grep -q 'X-Amz-Signature' "$T/check.out" && fail "check printed a token"

step "a multi-host conninfo: each server gets the token for its own name and port"
# The first server refuses the connection (nothing listens), so libpq goes
# on to the second, localhost: a token signed for the first one's name and
# port would be refused there.
dead=$(_free_port)
multi="host=dead.example,localhost hostaddr=127.0.0.1,127.0.0.1 port=$dead,$PGPORT user=outboxd dbname=postgres sslmode=verify-full sslrootcert=$T/rds-ca.pem"
n=$(accepted)
PG_CONNINFO=$multi run_check
line=$(grep -m1 'postgres auth' "$T/check.out") || fail "check said no 'postgres auth' line: $(cat "$T/check.out")"
grep -qE "^ok +postgres auth: .*a token for dead.example:$dead and each other server listed as user \"outboxd\"; the connection with it succeeded" <<<"$line" ||
    fail "check's auth line (multi-host): $line"
grep -qE "^ok +postgres connection: .*at localhost:$PGPORT" "$T/check.out" ||
    fail "check (multi-host): $(grep 'postgres connection' "$T/check.out")"
((($(accepted)) > n)) || fail "no token accepted for the second server"
info "ok: $(grep -m1 'postgres connection' "$T/check.out" | cut -c1-200)"

step "events stream end to end with auth = aws_rds_iam"
outboxd_start "${IAM[@]}"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        SELECT gen_random_uuid(), 'Order', 'order-' || i, 1, 'OrderCreated', jsonb_build_object('n', i) FROM generate_series(1, 20) AS i"
wait_caught_up 30
check_delivery --exactly-once
assert_eq 20 "$(dump_count "$T/check.dump.jsonl")" "messages"
if grep REFUSED "$RDS/verify.log" | grep -qv 'not a token'; then
    fail "a token was refused: $(grep REFUSED "$RDS/verify.log")"
fi
before=$(accepted)
((before >= 2)) || fail "the verifier accepted $before tokens, want the stream's and the monitor's"
info "ok: the verifier accepted $before tokens (replication and ordinary connections)"
# A tool's connection too: verify finds every event in Kafka.
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" "${IAM[@]}" >"$T/verify.out" 2>&1 ||
    fail "outboxd verify: $(tail -n 5 "$T/verify.out")"
((($(accepted)) > before)) || fail "verify connected without a token the stand-in accepted"
before=$(accepted)
info "ok: outboxd verify with a token: $(tail -n 1 "$T/verify.out" | cut -c1-200)"

step "a reconnection an instant later makes a new token"
# Every token signed before not_before is refused from now on: the
# reconnection can only succeed with a token made after the kill.
nb=$(($(date +%s) + 1))
echo "$nb" >"$RDS/not_before"
chown postgres "$RDS/not_before"
clock_reached() { (($(date +%s) >= $1)); }
wait_until 5 "the clock passing not_before" clock_reached "$nb"
old_pid=$(psql_q "SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'outboxd'")
assert_eq t "$(psql_q "SELECT pg_terminate_backend($old_pid)")" "walsender $old_pid terminated"
pg_wait 30 "SELECT active_pid IS NOT NULL AND active_pid <> $old_pid FROM pg_replication_slots WHERE slot_name = 'outboxd'" >/dev/null ||
    fail "outboxd did not reconnect within 30 s: $(grep -E 'REFUSED|ACCEPTED' "$RDS/verify.log" | tail -n 3)"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        SELECT gen_random_uuid(), 'Order', 'order-' || i, 2, 'OrderPaid', jsonb_build_object('n', i) FROM generate_series(1, 10) AS i"
wait_caught_up 30
check_delivery --exactly-once
assert_eq 30 "$(dump_count "$T/check.dump.jsonl")" "messages after the reconnection"
((($(accepted)) > before)) || fail "no token accepted after the kill"
date_nb=$(date -u -d "@$nb" +%Y%m%dT%H%M%SZ)
last=$(grep ' ACCEPTED ' "$RDS/verify.log" | tail -n 1 | sed 's/.*date=//')
[[ ! "$last" < "$date_nb" ]] || fail "the last token accepted was signed at $last, before $date_nb"
info "ok: reconnected with a token signed at $last (not before $date_nb)"

step "tokens refused for a while once outboxd has streamed: retried, not exit 2"
# IAM throttling, or a policy an operator is changing: RDS refuses tokens
# through PAM for a while. At start that is the set-up (exit 2, the step
# below); once outboxd has streamed it waits, as for a server that is down.
echo $(($(date +%s) + 3600)) >"$RDS/not_before"
old_pid=$(psql_q "SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'outboxd'")
assert_eq t "$(psql_q "SELECT pg_terminate_backend($old_pid)")" "walsender $old_pid terminated"
# Two attempts refused (the log folds them into the outage's lines, which
# name the last error every 30 s); an old build exited 2 at the first.
refused_at=$(grep -c ' REFUSED ' "$RDS/verify.log" || true)
refused_more() { (($(grep -c ' REFUSED ' "$RDS/verify.log") >= refused_at + $1)); }
wait_until 30 "two attempts refused" refused_more 2
outboxd_assert_running
rm -f "$RDS/not_before"
pg_wait 30 "SELECT active_pid IS NOT NULL AND active_pid <> $old_pid FROM pg_replication_slots WHERE slot_name = 'outboxd'" >/dev/null ||
    fail "outboxd did not reconnect once tokens were accepted again"
wait_caught_up 30
info "ok: $(grep -c ' REFUSED ' "$RDS/verify.log") refusals in all; reconnected once tokens were accepted again"
outboxd_stop

step "a wrong secret key: the server's answer, exit 2, nothing confirmed"
confirmed=$(slot_confirmed_lsn)
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        VALUES (gen_random_uuid(), 'Order', 'order-x', 3, 'NeverSent', '{}')"
export AWS_SECRET_ACCESS_KEY=wrong-secret-key
run_check
grep -qE '^FAIL +postgres auth: aws_rds_iam: credentials from environment, .*the connection with it failed: .*PAM authentication failed for user "outboxd"' "$T/check.out" ||
    fail "check with a wrong key: $(grep -E 'postgres (auth|connection)' "$T/check.out")"
info "ok: $(grep -m1 'postgres auth' "$T/check.out" | cut -c1-300)"
grep -q 'signature mismatch' "$RDS/verify.log" || fail "the verifier did not see a bad signature: $(tail -n 2 "$RDS/verify.log")"
outboxd_start --no-wait "${IAM[@]}"
outboxd_wait_exit 30
assert_eq 2 "$OUTBOXD_RC" "exit status with a wrong secret key"
outboxd_log_last_start | grep -E 'ERROR' | grep -q 'PAM authentication failed for user "outboxd"' ||
    fail "outboxd's error: $(outboxd_log_last_start | grep -m2 ERROR)"
assert_eq "$confirmed" "$(slot_confirmed_lsn)" "confirmed_flush_lsn after the refused start"
kdump_all >"$T/after.jsonl" 2>/dev/null || fail "outboxd-kdump failed"
assert_eq 30 "$(dump_count "$T/after.jsonl")" "messages after the refused start"
export AWS_SECRET_ACCESS_KEY=$SECRET

step "no AWS credentials yet: retried, and streaming once they come"
# As when a web identity token file or the instance role is not there yet:
# the daemon says so and retries (not exit 2); the shared credentials file
# written later is read at the next attempt.
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
export AWS_SHARED_CREDENTIALS_FILE=$T/aws-credentials AWS_CONFIG_FILE=$T/aws-config
# (The monitor retries each monitor interval: its proof holds the confirm.)
outboxd_start --no-wait "${IAM[@]}" --set postgres.monitor_interval_ms=500
outboxd_log_wait 'cannot connect to postgres: \[postgres\] auth = aws_rds_iam: no AWS credentials' 20
outboxd_assert_running
printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$AKID" "$SECRET" >"$T/aws-credentials"
chmod 600 "$T/aws-credentials"
pg_wait 30 "SELECT active FROM pg_replication_slots WHERE slot_name = 'outboxd'" >/dev/null ||
    fail "outboxd did not connect once the credentials file was there: $(outboxd_log_last_start | grep -E 'WARN|ERROR' | tail -n 2)"
wait_caught_up 30
check_delivery --exactly-once
assert_eq 31 "$(dump_count "$T/check.dump.jsonl")" "messages once the credentials came"
outboxd_stop
unset AWS_SHARED_CREDENTIALS_FILE AWS_CONFIG_FILE
export AWS_ACCESS_KEY_ID=$AKID AWS_SECRET_ACCESS_KEY=$SECRET

step "sslmode=require is refused at start, before any connection"
n=$(grep -c . "$RDS/verify.log")
confirmed=$(slot_confirmed_lsn)
PG_CONNINFO="host=localhost hostaddr=127.0.0.1 port=$PGPORT user=outboxd dbname=postgres sslmode=require"
outboxd_start --no-wait "${IAM[@]}"
outboxd_wait_exit 30
assert_eq 2 "$OUTBOXD_RC" "exit status with sslmode=require"
outboxd_log_last_start | grep -q 'auth = aws_rds_iam needs sslmode=verify-full in the conninfo (it is "require")' ||
    fail "outboxd's error: $(outboxd_log_last_start | grep -m2 ERROR)"
assert_eq "$n" "$(grep -c . "$RDS/verify.log")" "verifier lines (no connection tried)"
assert_eq "$confirmed" "$(slot_confirmed_lsn)" "confirmed_flush_lsn"

step "polling mode: the polling relay connects with a token, and reconnects with a new one"
PG_CONNINFO="host=localhost hostaddr=127.0.0.1 port=$PGPORT user=outboxd dbname=postgres sslmode=verify-full sslrootcert=$T/rds-ca.pem"
polling_schema
psql_q "GRANT SELECT, UPDATE, DELETE ON public.outbox_events TO outboxd"
n=$(accepted)
relay_start p "${IAM[@]}"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
        VALUES (gen_random_uuid(), 'Order', 'poll-1', 'Polled', '{}')"
wait_rows "status = 'SENT'" 1 30
((($(accepted)) > n)) || fail "the polling relay connected without a token the stand-in accepted"
nb=$(($(date +%s) + 1))
echo "$nb" >"$RDS/not_before"
chown postgres "$RDS/not_before"
wait_until 5 "the clock passing not_before" clock_reached "$nb"
assert_eq t "$(psql_q "SELECT bool_and(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'outboxd-polling'")" \
    "the polling relay's backend terminated"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
        VALUES (gen_random_uuid(), 'Order', 'poll-2', 'Polled', '{}')"
wait_rows "status = 'SENT'" 2 30
last=$(grep ' ACCEPTED ' "$RDS/verify.log" | tail -n 1 | sed 's/.*date=//')
[[ ! "$last" < "$(date -u -d "@$nb" +%Y%m%dT%H%M%SZ)" ]] || fail "the polling relay's last token was signed at $last, before the kill"
relay_stop p
rm -f "$RDS/not_before"

# Never logged: the secret key or a token, in any of the runs.
! grep -qE "X-Amz-Signature|$SECRET" "$T/outboxd.log" "$T/relay.p.log" || fail "outboxd logged a token or the secret"
e2e_pass
