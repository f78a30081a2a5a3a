#!/usr/bin/env bash
# No password ever reaches outboxd's output: not in its own log lines, not
# in libpq's error text it passes on. The secret S3cr3tPW is given in a
# key/value conninfo (password=...) and in a URI (postgres://user:pw@...),
# and outboxd's whole output (stdout + stderr, log level debug) is searched
# for it after each of:
#  (a) a server that requires a password (scram-sha-256 in pg_hba.conf for
#      the role outboxd on 127.0.0.1) and the password is wrong: exit 2,
#      "password authentication failed" (the conninfo also comes once from
#      the environment, OUTBOXD_POSTGRES_CONNINFO; `outboxd verify` too);
#  (b) nothing listening on the port: outboxd retries, then SIGTERM;
#  (c) the right password: normal streaming and delivery, then SIGTERM;
#  (d) a malformed URI holding the password (libpq quotes the whole URI in
#      some of its parse errors): outboxd stops or retries, then SIGTERM.
#  (e) the password from a file ([postgres] password_file, issue 16): the
#      role streams with it, `ps` shows no password, `outboxd config`
#      masks it (sasl.password_file too, and the credentials in [registry]
#      url, issue 53); a 0644 secret file ([registry] password_file too),
#      or a 0644 config file with a password in it, gets a warning naming
#      the file and its mode, a 0600 one none; --set with a password gets
#      one.
# A line with the secret fails the test (all cases run first, and every
# such line is shown).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init secrets
pg_start
broker_start

SECRET=S3cr3tPW
OTHER_PW=An0ther-pw-7 # the role's password while the secret is wrong
LEAKS=0

step "role outboxd (sql/role.sql) with a password, scram-sha-256 for it"
psql -XAtq -v ON_ERROR_STOP=1 -f "$E2E_SRC_DIR/sql/role.sql" >/dev/null
psql_q "SET password_encryption = 'scram-sha-256'; ALTER ROLE outboxd PASSWORD '$OTHER_PW'"
if [[ -n "$PG_CTL_OPTS" ]]; then
    # This server has output_plugin_libraries, which outboxd reads with SHOW
    # before streaming; only superusers and pg_read_all_settings may, and
    # sql/role.sql grants neither (reported: outboxd exits 1 with "must be
    # superuser or have privileges of pg_read_all_settings").
    psql_q "GRANT pg_read_all_settings TO outboxd"
fi
# Ahead of initdb's trust lines (the first matching line wins), so the
# superuser the test connects as keeps trust.
hba=$T/pgdata/pg_hba.conf
{
    echo "# outboxd e2e secrets: the role outboxd needs its password over TCP"
    echo "host all outboxd 127.0.0.1/32 scram-sha-256"
    echo "host replication outboxd 127.0.0.1/32 scram-sha-256"
    cat "$hba"
} >"$hba.new"
cat "$hba.new" >"$hba" # keeps owner and mode
rm -f "$hba.new"
pg_reload
assert_sql "SELECT count(*) = 2 FROM pg_hba_file_rules WHERE 'outboxd' = ANY(user_name) AND auth_method = 'scram-sha-256' AND error IS NULL" \
    "pg_hba.conf asks outboxd for scram-sha-256"
# The server really refuses the wrong password and takes the right one.
if PGPASSWORD=$SECRET psql -XAtq -U outboxd -c "SELECT 1" >"$T/psql.wrong" 2>&1; then
    fail "psql as outboxd with a wrong password connected: pg_hba.conf not in force"
fi
grep -q 'password authentication failed' "$T/psql.wrong" ||
    fail "psql with a wrong password: $(cat "$T/psql.wrong")"
assert_eq 1 "$(PGPASSWORD=$OTHER_PW psql -XAtq -U outboxd -c "SELECT 1")" \
    "psql as outboxd with its password"
info "the server asks outboxd for its password"

KV="host=127.0.0.1 port=$PGPORT user=outboxd password=$SECRET dbname=postgres"
URI="postgres://outboxd:$SECRET@127.0.0.1:$PGPORT/postgres"

# check_log WHAT FROM_LINE: outboxd's output since line FROM_LINE (and the
# verify output, if any) must not hold the secret.
check_log() {
    local what=$1 from=$2 hits
    hits=$({ tail -n "+$from" "$T/outboxd.log"; cat "$T/verify.out" 2>/dev/null; } |
        grep -F -n -- "$SECRET" || true)
    rm -f "$T/verify.out"
    if [[ -n "$hits" ]]; then
        LEAKS=$((LEAKS + 1))
        info "LEAK ($what): the password is in outboxd's output:"
        printf '%s\n' "$hits" | cut -c1-600 | sed 's/^/        /' >&2
    else
        info "ok ($what): no password in $(($(wc -l <"$T/outboxd.log") - from + 1)) lines of output"
    fi
}

# log_line: the number of the next line outboxd's log will get.
log_line() { echo $(($(wc -l <"$T/outboxd.log") + 1)); }
touch "$T/outboxd.log"

# run_outboxd SECONDS [outboxd args]: starts outboxd with conninfo
# $PG_CONNINFO and waits up to SECONDS for it to exit; if it is still
# running then (retrying), stops it with SIGTERM. Sets OUTBOXD_RC.
run_outboxd() {
    local secs=$1 i
    shift
    outboxd_start --no-wait "$@"
    for ((i = 0; i < secs * 10; i++)); do
        kill -0 "$OUTBOXD_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$OUTBOXD_PID" 2>/dev/null; then
        info "outboxd still running after ${secs}s (retrying)"
        outboxd_stop 30 || true
    else
        OUTBOXD_RC=0
        wait "$OUTBOXD_PID" || OUTBOXD_RC=$?
        OUTBOXD_PID=
        info "outboxd exited with status $OUTBOXD_RC"
    fi
}

# run_verify: `outboxd verify` with the same ini; output to $T/verify.out.
run_verify() {
    local rc=0
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" >"$T/verify.out" 2>&1 || rc=$?
    info "outboxd verify exited with status $rc: $(tail -n 1 "$T/verify.out" | cut -c1-200)"
}

# expect_in_log FROM_LINE PATTERN WHAT: the scenario really happened.
expect_in_log() {
    tail -n "+$1" "$T/outboxd.log" | grep -E -- "$2" >/dev/null ||
        fail "$3: no /$2/ in outboxd's log: $(tail -n 3 "$T/outboxd.log")"
}

SAVED_CONNINFO=$PG_CONNINFO

for form in kv uri; do
    if [[ $form == kv ]]; then conninfo=$KV; else conninfo=$URI; fi

    step "(a) wrong password, $form conninfo"
    from=$(log_line)
    PG_CONNINFO=$conninfo
    run_outboxd 30
    assert_eq 2 "$OUTBOXD_RC" "exit status after a failed password (needs an operator)"
    expect_in_log "$from" 'password authentication failed' "(a) $form"
    run_verify
    check_log "(a) wrong password, $form" "$from"

    step "(b) nothing listening, $form conninfo"
    port=$(_free_port) || fail "no free port"
    from=$(log_line)
    PG_CONNINFO=${conninfo//$PGPORT/$port}
    run_outboxd 4
    expect_in_log "$from" "cannot connect to postgres" "(b) $form"
    check_log "(b) unreachable port, $form" "$from"

    step "(d) malformed URI holding the password ($form test)"
    from=$(log_line)
    if [[ $form == kv ]]; then
        # IPv6 bracket never closed: libpq quotes the URI in its error.
        PG_CONNINFO="postgres://outboxd:$SECRET@[127.0.0.1:$PGPORT/postgres"
    else
        # A bad percent-escape in the password: libpq quotes the token.
        PG_CONNINFO="postgres://outboxd:$SECRET%zz@127.0.0.1:$PGPORT/postgres"
    fi
    run_outboxd 4
    expect_in_log "$from" "cannot connect to postgres|conninfo" "(d) $form"
    run_verify
    check_log "(d) malformed URI, $form" "$from"
done

step "(a') wrong password from OUTBOXD_POSTGRES_CONNINFO"
from=$(log_line)
PG_CONNINFO=$SAVED_CONNINFO # the file says something else
OUTBOXD_POSTGRES_CONNINFO=$KV run_outboxd 30
assert_eq 2 "$OUTBOXD_RC" "exit status after a failed password (environment)"
expect_in_log "$from" 'password authentication failed' "(a') environment"
check_log "(a') wrong password from the environment" "$from"

step "(c) the right password: streaming at log level debug"
psql_q "SET password_encryption = 'scram-sha-256'; ALTER ROLE outboxd PASSWORD '$SECRET'"
for form in kv uri; do
    if [[ $form == kv ]]; then conninfo=$KV; else conninfo=$URI; fi
    from=$(log_line)
    PG_CONNINFO=$conninfo
    outboxd_start # the kv run creates the slot, the uri run resumes it
    assert_sql "SELECT usename = 'outboxd' FROM pg_stat_replication WHERE application_name = 'outboxd'" \
        "outboxd streams as the role outboxd"
    psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
            SELECT gen_random_uuid(), 'Secret', 'S-' || i, 1, 'Tested', jsonb_build_object('i', i)
            FROM generate_series(1, 5) AS i"
    wait_caught_up 60
    outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC"
    expect_in_log "$from" "DEBUG" "(c) $form: debug lines"
    check_log "(c) right password, streaming, $form" "$from"
done

step "(e) the password from password_file: streaming, nothing in ps"
NOPW="host=127.0.0.1 port=$PGPORT user=outboxd dbname=postgres"
printf '%s\n' "$SECRET" >"$T/pg.password"
chmod 600 "$T/pg.password"
from=$(log_line)
PG_CONNINFO=$NOPW
outboxd_start --set "postgres.password_file=$T/pg.password"
assert_sql "SELECT usename = 'outboxd' FROM pg_stat_replication WHERE application_name = 'outboxd'" \
    "outboxd streams as the role outboxd, its password from the file"
args=$(ps -o args= -p "$OUTBOXD_PID")
[[ $args == *pg.password* ]] || fail "ps -p $OUTBOXD_PID: not outboxd's command line: $args"
[[ $args != *"$SECRET"* ]] || fail "the password is in ps: $args"
info "ok: ps shows: $args"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        SELECT gen_random_uuid(), 'Secret', 'F-' || i, 1, 'FromFile', jsonb_build_object('i', i)
        FROM generate_series(1, 3) AS i"
wait_caught_up 60
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC"
if tail -n "+$from" "$T/outboxd.log" | grep 'readable by its' >/dev/null; then
    fail "a warning about a 0600 password file: $(tail -n "+$from" "$T/outboxd.log" | grep 'readable by its')"
fi
info "ok: no warning for a 0600 password file"
check_log "(e) password_file, streaming" "$from"

# run_config NAME ARGS...: `outboxd config` (stdout NAME.out, stderr
# NAME.err); neither may hold the password.
run_config() {
    local name=$1 rc=0
    shift
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" config "$@" >"$T/$name.out" 2>"$T/$name.err" || rc=$?
    assert_eq 0 "$rc" "outboxd config $name: exit status"
    if grep -F -- "$SECRET" "$T/$name.out" "$T/$name.err" >&2; then
        LEAKS=$((LEAKS + 1))
        info "LEAK (outboxd config $name): the lines above"
    fi
}
# warned NAME FILE MODE: NAME's stderr warns that FILE (mode MODE) exposes a secret.
warned() {
    grep -q "WARN: $2 holds .* readable by its .*(mode $3); chmod 600 $2" "$T/$1.err" ||
        fail "$1: no warning naming $2 and mode $3: $(cat "$T/$1.err")"
    info "ok: $1: warns: $(grep -o 'WARN: .*(mode [0-7]*)' "$T/$1.err" | head -n 1)"
}
not_warned() {
    if grep -q 'readable by its' "$T/$1.err"; then fail "$1: a warning: $(cat "$T/$1.err")"; fi
    info "ok: $1: no warning"
}

step "(e) outboxd config masks the password from the file; modes of secret files"
printf 'k%s\n' "$SECRET" >"$T/sasl.password"
printf 'r%s\n' "$SECRET" >"$T/registry.password"
chmod 600 "$T/sasl.password" "$T/registry.password"
registry=(--set "registry.url=https://bob:$SECRET@registry.invalid/apis/ccompat/v7"
    --set registry.user=bob --set "registry.password_file=$T/registry.password")
run_config pwfile_600 -c "$T/outboxd.ini" --set "postgres.password_file=$T/pg.password" \
    --set "kafka.sasl.password_file=$T/sasl.password" "${registry[@]}"
grep -Eq "^conninfo = .*password='\*{8}'.*; file$" "$T/pwfile_600.out" ||
    fail "outboxd config: conninfo not masked: $(grep '^conninfo' "$T/pwfile_600.out")"
grep -Eq '^sasl.password = \*{8}  ; secret file$' "$T/pwfile_600.out" ||
    fail "outboxd config: sasl.password: $(grep '^sasl' "$T/pwfile_600.out")"
grep -Eq '^url = https://\*{8}@registry.invalid/apis/ccompat/v7 ' "$T/pwfile_600.out" ||
    fail "outboxd config: [registry] url: $(grep '^url' "$T/pwfile_600.out")"
not_warned pwfile_600
chmod 644 "$T/pg.password" "$T/sasl.password" "$T/registry.password"
run_config pwfile_644 -c "$T/outboxd.ini" --set "postgres.password_file=$T/pg.password" \
    --set "kafka.sasl.password_file=$T/sasl.password" "${registry[@]}"
warned pwfile_644 "$T/pg.password" 0644
warned pwfile_644 "$T/sasl.password" 0644
warned pwfile_644 "$T/registry.password" 0644

step "(e) a config file holding a password: warned at 0644, not at 0600"
sed "s|^conninfo = .*|conninfo = $KV|" "$T/outboxd.ini" >"$T/withpw.ini"
chmod 644 "$T/withpw.ini"
run_config ini_644 -c "$T/withpw.ini"
warned ini_644 "$T/withpw.ini" 0644
chmod 600 "$T/withpw.ini"
run_config ini_600 -c "$T/withpw.ini"
not_warned ini_600
run_config set_pw -c "$T/outboxd.ini" --set "kafka.sasl.password=$SECRET"
grep -q 'WARN: a secret was given with --set: it is visible to every user in ps' "$T/set_pw.err" ||
    fail "no warning for a password given with --set: $(cat "$T/set_pw.err")"
info "ok: --set with a password is warned about"
PG_CONNINFO=$SAVED_CONNINFO
check_delivery

((LEAKS == 0)) || fail "the password appeared in outboxd's output in $LEAKS case(s) (lines above)"
e2e_pass
