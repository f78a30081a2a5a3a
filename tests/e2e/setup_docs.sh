#!/usr/bin/env bash
# The README's "Server set-up" steps, run as written there. Each step's
# block is read from README.md (the fenced block after a
# `<!-- setup_docs: NAME -->` marker), so the document and this test cannot
# drift apart:
#  1. postgresql.conf: appended to a fresh server's file; the server restarts
#     with it and has wal_level = logical;
#  2. sql: the psql commands, from the repository's root, in a database `app`;
#  3. password: psql's \password, the password given on stdin (no terminal);
#     the role then has a SCRAM verifier, and the server log (log_statement =
#     all) never shows the password;
#  4. pg_hba.conf: the README's lines (its example address replaced by
#     127.0.0.1/32) are the only ones for outboxd; outboxd streams an event
#     as the role, with the password from PGPASSWORD.
# And the claim of step 4 that a `host replication outboxd ...` line alone
# does not let outboxd in: exit 2 naming pg_hba.conf, `check` FAILs.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init setup_docs
README=$E2E_SRC_DIR/README.md
PASSWORD='Setup-d0cs-pw'

# readme_block NAME: the fenced block after `<!-- setup_docs: NAME -->`.
readme_block() {
    awk -v want="<!-- setup_docs: $1 -->" '
        $0 == want { found = 1; next }
        found == 1 && /^```/ { found = 2; next }
        found == 2 && /^```/ { exit }
        found == 2 { print }' "$README"
}

for name in postgresql.conf sql password pg_hba.conf; do
    [[ -n "$(readme_block "$name")" ]] ||
        fail "README.md has no block after <!-- setup_docs: $name -->"
done

pg_start
broker_start

step "1. the README's postgresql.conf lines"
{
    echo "# README.md, Server set-up, step 1"
    readme_block postgresql.conf
    echo "log_statement = all   # setup_docs: to see what reaches the server's log"
} >>"$T/pgdata/postgresql.conf"
pg_restart
assert_eq logical "$(psql_q 'SHOW wal_level')" "wal_level"
readme_block postgresql.conf | sed -n 's/^\([a-z_]*\) *= *\([^ #]*\).*/\1 \2/p' |
    while read -r key value; do
        assert_eq "$value" "$(psql_q "SHOW $key")" "$key"
    done

step "2. the README's psql commands, in database app"
psql_q "CREATE DATABASE app"
export PGDATABASE=app
(cd "$E2E_SRC_DIR" && bash -euo pipefail -c "$(readme_block sql)") >"$T/setup_sql.log" 2>&1 ||
    { cat "$T/setup_sql.log" >&2; fail "the README's sql step failed"; }
assert_sql "SELECT count(*) = 1 FROM pg_publication WHERE pubname = 'outboxd_pub'" "publication in app"
assert_sql "SELECT rolcanlogin AND rolreplication FROM pg_roles WHERE rolname = 'outboxd'" \
    "role outboxd: LOGIN REPLICATION"

step "3. the README's password step (\\password, password on stdin)"
# Without a controlling terminal (setsid) psql's prompt reads stdin.
printf '%s\n%s\n' "$PASSWORD" "$PASSWORD" |
    (cd "$E2E_SRC_DIR" && setsid -w bash -euo pipefail -c "$(readme_block password)") \
        >"$T/setup_password.log" 2>&1 ||
    { cat "$T/setup_password.log" >&2; fail "the README's password step failed"; }
assert_sql "SELECT rolpassword LIKE 'SCRAM-SHA-256\$%' FROM pg_authid WHERE rolname = 'outboxd'" \
    "outboxd has a SCRAM verifier"
grep -q 'ALTER USER outboxd PASSWORD .SCRAM-SHA-256' "$T/postgres.log" ||
    fail "log_statement = all did not log psql's ALTER USER with the verifier (the next check would prove nothing)"
if grep -F -- "$PASSWORD" "$T/postgres.log" "$T/setup_password.log" >/dev/null; then
    fail "the password reached the server's log or psql's output"
fi
info "ok: the password is in neither the server log nor psql's output"

# hba_with LINES...: pg_hba.conf = trust for the test's superuser, then LINES.
hba_with() {
    local hba=$T/pgdata/pg_hba.conf
    {
        echo "local all postgres trust"
        echo "host all postgres 127.0.0.1/32 trust"
        printf '%s\n' "$@"
    } >"$hba.new"
    cat "$hba.new" >"$hba"
    rm -f "$hba.new"
    pg_reload
    assert_sql "SELECT count(*) = 0 FROM pg_hba_file_rules WHERE error IS NOT NULL" \
        "pg_hba.conf parses"
}

export PGPASSWORD=$PASSWORD
PG_CONNINFO="host=127.0.0.1 port=$PGPORT dbname=app user=outboxd"

step "4a. a 'host replication outboxd' line alone: outboxd is not let in"
hba_with "host replication outboxd 127.0.0.1/32 scram-sha-256"
outboxd_start --no-wait
outboxd_wait_exit 30
assert_eq 2 "$OUTBOXD_RC" "exit status without a database line"
grep -q 'no pg_hba.conf entry' "$T/outboxd.log" ||
    fail "outboxd's error does not name pg_hba.conf: $(grep -m1 ERROR "$T/outboxd.log")"
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/outboxd.ini" >"$T/check.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "check passed without a database line"
grep -q '^FAIL postgres connection: .*no pg_hba.conf entry' "$T/check.out" ||
    fail "check does not FAIL the connection: $(head -n 3 "$T/check.out")"
info "ok: refused, exit 2, check FAILs"

step "4b. the README's pg_hba.conf lines: outboxd streams as the role"
mapfile -t lines < <(readme_block pg_hba.conf | grep -v '^#' |
    sed -e 's|10\.0\.0\.5/32|127.0.0.1/32|')
hba_with "${lines[@]}"
: >"$T/outboxd.log"
outboxd_start
psql_q "INSERT INTO outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
        VALUES (gen_random_uuid(), 'order', 'o-1', 'OrderPlaced', '{\"n\":1}')"
wait_caught_up 60
check_delivery --exactly-once
outboxd_stop || fail "outboxd exited with $OUTBOXD_RC"
if grep -F -- "$PASSWORD" "$T/outboxd.log" >/dev/null; then
    fail "the password is in outboxd's log"
fi
e2e_pass
