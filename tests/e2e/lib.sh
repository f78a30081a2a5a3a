# shellcheck shell=bash
#
# tests/e2e/lib.sh - the library of outboxd's end-to-end tests.
#
# A test script does:
#
#   source "$(dirname "$0")/lib.sh"
#   e2e_init my_test            # temp dir $T, traps, strict mode
#   pg_start                    # a throw-away PostgreSQL (15, or OUTBOXD_PG_VERSION) with the schema
#   broker_start                # the mock Kafka cluster
#   outboxd_start               # the daemon; waits until its slot is active
#   psql_q "INSERT ..."
#   wait_caught_up 60           # slot confirmed_flush_lsn >= current WAL LSN
#   check_delivery --exactly-once
#   e2e_pass
#
# Everything a test starts lives under $T and is killed by the EXIT trap,
# failure or not; on failure the tails of the logs are printed. Set
# E2E_KEEP=1 to keep $T after a failure.
#
# Environment: OUTBOXD_BUILD_DIR (the CMake build dir, default ../../build),
# OUTBOXD_TEST_PLUGIN (pgoutput), E2E_SPAWN (a command the mock broker and
# outboxd are started through: deploy/demo.sh's setsid keeps a terminal's
# Ctrl-C from reaching them), E2E_TIMEOUT (seconds before the watchdog
# fails the test, default 270, times 3 for a sanitized build (the sanitizer
# run beside the rest of CI ran e2e.check past 270 s); at most
# E2E_TIMEOUT_MAX when that is set), OUTBOXD_PG_VERSION (the server's major
# version: 15, Debian's; 16, 17 or 18, the pinned builds of tests/pg/pg.sh,
# resolved beforehand with `bash tests/pg/pg.sh resolve N`; when set,
# pg_start checks the server is that version), PG_BINDIR (the server's
# bindir: from OUTBOXD_PG_VERSION when that is set, else
# /usr/lib/postgresql/15/bin). The clients (psql) stay Debian's 15
# whatever the server.

E2E_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
E2E_SRC_DIR=$(cd "$E2E_LIB_DIR/../.." && pwd)
: "${OUTBOXD_BUILD_DIR:=$E2E_SRC_DIR/build}"
: "${OUTBOXD_TEST_PLUGIN:=pgoutput}"
if [[ -z "${PG_BINDIR:-}" && -n "${OUTBOXD_PG_VERSION:-}" && "$OUTBOXD_PG_VERSION" != 15 ]]; then
    # Fails naming the resolve command when the build is not cached.
    PG_BINDIR=$(bash "$E2E_SRC_DIR/tests/pg/pg.sh" bindir "$OUTBOXD_PG_VERSION") || exit 1
fi
: "${PG_BINDIR:=/usr/lib/postgresql/15/bin}"
export OUTBOXD_BUILD_DIR OUTBOXD_TEST_PLUGIN
# The harness's own OUTBOXD_* variables are not configuration: outboxd
# warns about each OUTBOXD_* variable none of its sections matches (a
# typo's warning), so they stay out of its environment (issue 56). A
# command that runs outboxd starts with "${OUTBOXD_ENV[@]}" (env -u ...).
OUTBOXD_ENV=(env)
for _v in OUTBOXD_BUILD_DIR OUTBOXD_TEST_PLUGIN OUTBOXD_TESTS OUTBOXD_TEST_JOBS \
    OUTBOXD_PG_VERSION OUTBOXD_PG_CACHE OUTBOXD_PG_USER OUTBOXD_PORT_DIR OUTBOXD_SANITIZE \
    OUTBOXD_TRICKLE OUTBOXD_WRAPPER; do
    OUTBOXD_ENV+=(-u "$_v")
done
unset _v
# The clients straight from their bindir: /usr/bin/psql is Debian's
# pg_wrapper, a Perl script that costs 70 ms of CPU per call before it
# starts the same psql (26 ms), and the tests call psql thousands of times.
if [[ -x /usr/lib/postgresql/15/bin/psql && ":$PATH:" != *:/usr/lib/postgresql/15/bin:* ]]; then
    PATH=/usr/lib/postgresql/15/bin:$PATH
fi

E2E_NAME=
T=
OUTBOXD_PID=
OUTBOXD_RC=
OUTBOXD_STARTS=0
OUTBOXD_HTTP_PORT=
HTTP_STATUS=
BROKER_PID=
E2E_WATCHDOG_PID=
E2E_FAILED_CMD_SHOWN=
E2E_BG_PIDS=()
E2E_RM_AT_EXIT=()
declare -A E2E_SESS_FD=() E2E_SESS_PID=() E2E_SESS_N=()

# ---------------------------------------------------------------- logging

_ts() { date +%H:%M:%S.%3N; }

# step MESSAGE: a visible progress line.
step() { printf '[%s] %s: == %s\n' "$(_ts)" "${E2E_NAME:-e2e}" "$*" >&2; }
# info MESSAGE: a detail line.
info() { printf '[%s] %s:    %s\n' "$(_ts)" "${E2E_NAME:-e2e}" "$*" >&2; }

# fail MESSAGE: reports a failed assertion and exits 1 (the EXIT trap then
# prints the logs and cleans up).
fail() {
    printf '[%s] %s: FAIL: %s\n' "$(_ts)" "${E2E_NAME:-e2e}" "$*" >&2
    E2E_FAILED_CMD_SHOWN=1
    exit 1
}

# assert_eq EXPECTED ACTUAL [WHAT]
assert_eq() {
    if [[ "$1" != "$2" ]]; then
        fail "${3:-value}: expected '$1', got '$2'"
    fi
    info "ok: ${3:-value} = '$2'"
}

# assert_true SQL_OR_SHELL_DESCRIPTION: use as `cond || fail ...` instead;
# assert_sql SQL [WHAT]: the query must return 't'.
assert_sql() {
    local got
    got=$(psql_q "$1") || fail "query failed: $1"
    [[ "$got" == t ]] || fail "${2:-$1}: got '$got'"
    info "ok: ${2:-$1}"
}

_e2e_on_err() {
    local rc=$?
    if [[ -z "$E2E_FAILED_CMD_SHOWN" ]]; then
        E2E_FAILED_CMD_SHOWN=1
        printf '[%s] %s: FAIL: command failed (exit %d) at %s:%s: %s\n' \
            "$(_ts)" "${E2E_NAME:-e2e}" "$rc" "${BASH_SOURCE[1]:-?}" \
            "${BASH_LINENO[0]:-?}" "$BASH_COMMAND" >&2
    fi
}

_tail_file() { # FILE LINES TITLE
    if [[ -s "$1" ]]; then
        printf -- '----- %s (last %d lines of %s) -----\n' "$3" "$2" "$1" >&2
        tail -n "$2" "$1" | cut -c1-400 >&2
    fi
}

e2e_dump_logs() {
    [[ -n "$T" && -d "$T" ]] || return 0
    _tail_file "$T/outboxd.log" "${E2E_LOG_LINES:-80}" "outboxd log"
    _tail_file "$T/postgres.log" 30 "postgres log"
    _tail_file "$T/broker.err" 20 "mock broker stderr"
    _tail_file "$T/broker.out" 10 "mock broker replies"
    if [[ -n "${PGPORT:-}" && -f "$T/pgdata/postmaster.pid" ]]; then
        printf -- '----- replication state -----\n' >&2
        timeout 10 psql -X -v ON_ERROR_STOP=1 >&2 2>&1 <<'EOF' || true
SELECT pg_current_wal_lsn() AS current_wal_lsn;
SELECT slot_name, active, active_pid, restart_lsn, confirmed_flush_lsn FROM pg_replication_slots;
SELECT pid, application_name, state, sent_lsn, write_lsn, flush_lsn, reply_time FROM pg_stat_replication;
EOF
    fi
}

_kill_pid() { # PID [GRACE_SECONDS]: TERM, then KILL
    local pid=$1 grace=${2:-5} i
    [[ -n "$pid" ]] || return 0
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

_e2e_cleanup() {
    local rc=$? name pid
    set +eE
    trap - ERR
    trap '' TERM INT # finish cleaning up whatever arrives now
    if [[ -n "$E2E_WATCHDOG_PID" ]]; then
        kill "$E2E_WATCHDOG_PID" 2>/dev/null
        wait "$E2E_WATCHDOG_PID" 2>/dev/null
    fi
    if [[ $rc -ne 0 ]]; then
        e2e_dump_logs
    fi
    for name in "${!E2E_SESS_PID[@]}"; do
        _kill_pid "${E2E_SESS_PID[$name]}" 1
    done
    for pid in "${E2E_BG_PIDS[@]}"; do
        _kill_pid "$pid" 1
    done
    for pid in "${E2E_BG_GROUPS[@]}"; do
        kill -TERM -- "-$pid" 2>/dev/null
        _kill_pid "$pid" 1
    done
    _kill_pid "$OUTBOXD_PID" 5
    _kill_pid "$BROKER_PID" 2
    [[ -n "$E2E_KAFKA_DIR" ]] && "$E2E_SRC_DIR/tests/kafka/kafka.sh" destroy "$E2E_KAFKA_DIR"
    # an OIDC provider a test started (tests/keycloak/keycloak.sh start DIR)
    [[ -n "${E2E_KEYCLOAK_DIR:-}" ]] && "$E2E_SRC_DIR/tests/keycloak/keycloak.sh" stop "$E2E_KEYCLOAK_DIR"
    if [[ -n "$T" && -f "$T/pgdata/postmaster.pid" ]]; then
        _as_pg "$PG_BINDIR/pg_ctl" -D "$T/pgdata" -m immediate -w -t 30 stop \
            >/dev/null 2>&1
    fi
    # The test hosts of tests/e2e/netns_lib.sh, once nothing runs in them.
    if declare -F netns_teardown >/dev/null; then netns_teardown; fi
    # Files a test put outside $T (a PAM service in /etc/pam.d: rds_iam.sh).
    for name in "${E2E_RM_AT_EXIT[@]}"; do
        rm -f -- "$name"
    done
    if [[ -n "$T" && -d "$T" ]]; then
        if [[ $rc -ne 0 && -n "${E2E_KEEP:-}" ]]; then
            printf 'e2e: kept %s\n' "$T" >&2
        else
            rm -rf "$T"
        fi
    fi
    if [[ $rc -eq 0 ]]; then
        printf '[%s] %s: %s\n' "$(_ts)" "${E2E_NAME:-e2e}" "${E2E_PASS_WORD:-PASS}" >&2
    else
        printf '[%s] %s: FAILED (exit %d)\n' "$(_ts)" "${E2E_NAME:-e2e}" "$rc" >&2
    fi
    exit "$rc"
}

# Runs a command as the postgres user when we are root (PostgreSQL refuses
# to run as root), as ourselves otherwise.
_as_pg() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# Runs a PostgreSQL server command as _as_pg does, inside the network
# namespace PG_NETNS when a test put the server on a host of its own
# (tests/e2e/netns_lib.sh).
_pg_server() {
    if [[ -n "${PG_NETNS:-}" ]]; then
        ip netns exec "$PG_NETNS" runuser -u postgres -- "$@"
    else
        _as_pg "$@"
    fi
}

# e2e_init NAME: strict mode, temp dir $T, traps, watchdog.
# e2e_sanitized: whether the outboxd under test is an AddressSanitizer
# build (tests/sanitize.sh): several times slower, so the watchdog waits
# longer and Release-build bounds of time and memory are not held against
# it. (ldd's whole output read first: with pipefail, `ldd | grep -q` fails
# whenever grep exits before ldd has written everything.)
e2e_sanitized() {
    if [[ -z "${E2E_SANITIZED:-}" ]]; then
        E2E_SANITIZED=0
        [[ "$(ldd "$OUTBOXD_BUILD_DIR/outboxd" 2>/dev/null)" != *libasan* ]] || E2E_SANITIZED=1
    fi
    ((E2E_SANITIZED))
}

e2e_init() {
    E2E_NAME=${1:?e2e_init NAME}
    set -Eeuo pipefail
    T=$(mktemp -d "${TMPDIR:-/tmp}/outboxd-e2e-$E2E_NAME.XXXXXX")
    chmod 755 "$T"
    if [[ $(id -u) -eq 0 ]]; then
        # PostgreSQL (running as postgres) writes its data, socket and log
        # here; every parent directory must be traversable.
        chown postgres "$T"
    fi
    export T
    trap _e2e_cleanup EXIT
    trap _e2e_on_err ERR
    trap 'fail "interrupted"' INT
    # ctest's own TIMEOUT kills only the script, leaving its servers (and,
    # under flock, their inherited lock) behind: tests/CMakeLists.txt
    # passes E2E_TIMEOUT_MAX, somewhat below that TIMEOUT, so that the
    # watchdog always fires first and the cleanup runs.
    E2E_TIMEOUT=${E2E_TIMEOUT:-270}
    if e2e_sanitized; then E2E_TIMEOUT=$((E2E_TIMEOUT * 3)); fi
    if [[ -n "${E2E_TIMEOUT_MAX:-}" ]] && ((${E2E_TIMEOUT:-270} > E2E_TIMEOUT_MAX)); then
        E2E_TIMEOUT=$E2E_TIMEOUT_MAX
    fi
    trap 'fail "terminated (watchdog: test took longer than ${E2E_TIMEOUT:-270}s?)"' TERM
    # The watchdog: TERM to this shell after E2E_TIMEOUT seconds. Its sleep
    # dies with it, and it holds no output pipe (ctest waits for those).
    (
        trap 'kill "$sp" 2>/dev/null; exit 0' TERM
        sleep "${E2E_TIMEOUT:-270}" &
        sp=$!
        wait "$sp" && kill -TERM $$
    ) >/dev/null 2>&1 </dev/null &
    E2E_WATCHDOG_PID=$!
    step "test $E2E_NAME in $T (plugin $OUTBOXD_TEST_PLUGIN, build $OUTBOXD_BUILD_DIR)"
    [[ -x "$OUTBOXD_BUILD_DIR/tests/outboxd-mockbroker" ]] ||
        fail "$OUTBOXD_BUILD_DIR/tests/outboxd-mockbroker not built"
    [[ -x "$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" ]] ||
        fail "$OUTBOXD_BUILD_DIR/tests/outboxd-kdump not built"
    command -v jq >/dev/null || fail "jq is not installed"
}

# e2e_pass: the last line of a test.
e2e_pass() { step "all checks passed"; exit 0; }

# Closes, in a child about to run something in the background, the write
# ends of the psql session FIFOs: a copy held open there would keep the
# session from ever seeing EOF.
_close_sess_fds() {
    local f
    for f in "${E2E_SESS_FD[@]}"; do
        eval "exec $f>&-"
    done
}

# e2e_bg CMD...: runs CMD in the background, killed at exit; sets E2E_BG_PID.
E2E_BG_PID=
e2e_bg() {
    # A program is exec'd, so that the pid killed at exit is its own (a
    # subshell around it died alone and left the program running: a stand-in
    # server of tests/aws/ outlived its test); a shell function runs in the
    # subshell.
    if declare -F "$1" >/dev/null; then
        { _close_sess_fds; "$@"; } &
    else
        { _close_sess_fds; exec "$@"; } &
    fi
    E2E_BG_PID=$!
    E2E_BG_PIDS+=("$E2E_BG_PID")
}

# e2e_bg_group SHELL_COMMAND: runs bash -c SHELL_COMMAND (a pipeline) in a
# session and process group of its own, out of the terminal's reach (a
# Ctrl-C), the whole group killed at exit; sets E2E_BG_PID (the group's id).
E2E_BG_GROUPS=()
e2e_bg_group() {
    { _close_sess_fds; exec setsid bash -c "$1"; } &
    E2E_BG_PID=$!
    E2E_BG_GROUPS+=("$E2E_BG_PID")
}

# ---------------------------------------------------------------- postgres

source "$E2E_LIB_DIR/../free_port.sh"

# _free_port: a loopback port nobody listens on (tests/free_port.sh).
_free_port() { free_port; }

PG_CTL_OPTS=
# pg_enable_ssl: a self-signed certificate for CN=127.0.0.1 in
# $T/server.crt (key $T/server.key) and ssl = on, reloaded and checked.
pg_enable_ssl() {
    local i
    openssl req -new -x509 -nodes -days 1 -subj /CN=127.0.0.1 -keyout "$T/server.key" \
        -out "$T/server.crt" >"$T/openssl.log" 2>&1 ||
        { cat "$T/openssl.log" >&2; fail "openssl req failed"; }
    chmod 600 "$T/server.key"
    [[ $(id -u) -ne 0 ]] || chown postgres "$T/server.key" "$T/server.crt"
    psql_q "ALTER SYSTEM SET ssl_cert_file = '$T/server.crt'" >/dev/null
    psql_q "ALTER SYSTEM SET ssl_key_file = '$T/server.key'" >/dev/null
    psql_q "ALTER SYSTEM SET ssl = on" >/dev/null
    pg_reload
    for ((i = 0; i < 300; i++)); do [[ $(psql_q "SHOW ssl") == on ]] && break; sleep 0.1; done
    assert_eq on "$(psql_q "SHOW ssl")" "ssl after reload"
}

# pg_start: initdb + start a PostgreSQL (PG_BINDIR) on a free 127.0.0.1 port, create
# the outbox schema, export PGHOST PGPORT PGUSER PGDATABASE PG_CONNINFO.
pg_start() {
    local pgdata=$T/pgdata port attempt schema
    step "starting PostgreSQL"
    mkdir -p "$T/pgsock"
    [[ $(id -u) -ne 0 ]] || chown postgres "$T/pgsock"
    _as_pg "$PG_BINDIR/initdb" -D "$pgdata" -U postgres --auth=trust \
        -E UTF8 --locale=C.UTF-8 --no-sync >"$T/initdb.log" 2>&1 ||
        { cat "$T/initdb.log" >&2; fail "initdb failed"; }
    cat >>"$pgdata/postgresql.conf" <<EOF

# outboxd e2e
listen_addresses = '127.0.0.1${PG_NETNS_ADDR:+,$PG_NETNS_ADDR}'
unix_socket_directories = '$T/pgsock'
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
wal_sender_timeout = 60s
fsync = off
full_page_writes = off
max_wal_size = 2GB
log_line_prefix = '%m [%p] %q%a: '
log_min_messages = info
log_replication_commands = on
EOF
    if [[ -n "${PG_NETNS_ADDR:-}" ]]; then
        # outboxd connects from the test network (tests/e2e/netns_lib.sh).
        printf 'host all all %s trust\nhost replication all %s trust\n' \
            "${PG_NETNS_CLIENTS:?}" "$PG_NETNS_CLIENTS" >>"$pgdata/pg_hba.conf"
    fi
    # Some PostgreSQL builds restrict the output plugins a slot may use.
    PG_CTL_OPTS=
    if _as_pg "$PG_BINDIR/postgres" -D "$pgdata" -C output_plugin_libraries \
        >/dev/null 2>&1; then
        PG_CTL_OPTS="-c output_plugin_libraries=pgoutput,wal2json,test_decoding"
        info "server has output_plugin_libraries: allowing pgoutput,wal2json,test_decoding"
    fi
    for attempt in 1 2 3 4 5; do
        port=$(_free_port) || fail "no free TCP port"
        if _pg_server "$PG_BINDIR/pg_ctl" -D "$pgdata" -l "$T/postgres.log" -w \
            -t 60 -o "-p $port $PG_CTL_OPTS" start >"$T/pg_ctl.log" 2>&1; then
            break
        fi
        info "PostgreSQL did not start on port $port (attempt $attempt)"
        tail -n 5 "$T/postgres.log" >&2 || true
        port=
    done
    [[ -n "$port" ]] || fail "PostgreSQL did not start"
    # Keep the port for pg_restart.
    echo "port = $port" >>"$pgdata/postgresql.conf"
    export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres
    export PG_CONNINFO="host=127.0.0.1 port=$port user=postgres dbname=postgres"
    if [[ -n "${PG_NETNS:-}" ]]; then
        # outboxd reaches the server's host over the test network; the test
        # itself talks to it over the Unix socket, which no partition cuts.
        PGHOST=$T/pgsock
        PG_CONNINFO="host=$PG_NETNS_ADDR port=$port user=postgres dbname=postgres"
    fi
    info "PostgreSQL $(psql_q 'SHOW server_version') on ${PG_NETNS_ADDR:-127.0.0.1}:$port ($PG_BINDIR)"
    # A matrix test must not pass on another server than the one it names.
    if [[ -n "${OUTBOXD_PG_VERSION:-}" ]]; then
        assert_eq "$OUTBOXD_PG_VERSION" "$(psql_q "SELECT current_setting('server_version_num')::int / 10000")" \
            "server major version (OUTBOXD_PG_VERSION)"
    fi

    schema=$E2E_SRC_DIR/sql/outbox.sql
    if [[ -f "$schema" ]]; then
        psql -XAtq -v ON_ERROR_STOP=1 -f "$schema" >"$T/schema.log" 2>&1 ||
            { cat "$T/schema.log" >&2; fail "loading $schema failed"; }
        info "schema from sql/outbox.sql"
    else
        fail "$schema is missing"
    fi
    assert_sql "SELECT count(*) = 1 FROM pg_publication WHERE pubname = 'outboxd_pub'" \
        "publication outboxd_pub exists"
}

pg_stop() {
    step "stopping PostgreSQL"
    _as_pg "$PG_BINDIR/pg_ctl" -D "$T/pgdata" -m fast -w -t 60 stop \
        >>"$T/pg_ctl.log" 2>&1 || fail "pg_ctl stop failed"
}

pg_restart() {
    step "restarting PostgreSQL"
    _pg_server "$PG_BINDIR/pg_ctl" -D "$T/pgdata" -l "$T/postgres.log" -m fast -w \
        -t 60 -o "$PG_CTL_OPTS" restart >>"$T/pg_ctl.log" 2>&1 ||
        fail "pg_ctl restart failed"
}

# psql_q [SQL]: runs SQL (or stdin) with psql -XAtq -v ON_ERROR_STOP=1;
# statements run one by one as in a script (not one implicit transaction).
psql_q() {
    if [[ $# -gt 0 ]]; then
        psql -XAtq -v ON_ERROR_STOP=1 <<<"$1"
    else
        psql -XAtq -v ON_ERROR_STOP=1
    fi
}

# pg_reload: pg_reload_conf(), then waits until the server has re-read its
# files (postgresql.conf, ALTER SYSTEM's, pg_hba.conf): a new session's
# pg_conf_load_time(), which new backends inherit from the postmaster, is
# later than before. A fixed sleep after the signal was enough only on an
# idle machine.
pg_reload() {
    local before i
    before=$(psql_q "SELECT pg_conf_load_time()") || fail "pg_conf_load_time() failed"
    psql_q "SELECT pg_reload_conf()" >/dev/null || fail "pg_reload_conf() failed"
    for ((i = 0; i < 300; i++)); do
        if [[ "$(psql_q "SELECT pg_conf_load_time() > '$before'::timestamptz")" == t ]]; then
            info "ok: configuration reloaded"
            return 0
        fi
        sleep 0.1
    done
    fail "the server did not reload its configuration within 30 s (pg_conf_load_time() still $before)"
}

# psql sessions kept open across calls, for interleaved transactions.
# sess_open NAME / sess_run NAME SQL / sess_close NAME
sess_open() {
    local name=$1 fd
    mkfifo "$T/sess.$name.in"
    { _close_sess_fds; exec psql -XAtq -v ON_ERROR_STOP=1 <"$T/sess.$name.in" >"$T/sess.$name.out" 2>&1; } &
    E2E_SESS_PID[$name]=$!
    exec {fd}>"$T/sess.$name.in"
    E2E_SESS_FD[$name]=$fd
    E2E_SESS_N[$name]=0
    info "session $name open (psql pid ${E2E_SESS_PID[$name]})"
}

# sess_run NAME SQL: sends SQL to session NAME and waits until psql has
# executed it (SQL must end with ';'). Prints nothing; output is in
# $T/sess.NAME.out.
sess_run() {
    local name=$1 sql=$2 n i mark="$T/sess.$1.mark"
    n=$((E2E_SESS_N[$name] + 1))
    E2E_SESS_N[$name]=$n
    info "[$name] $sql"
    printf '%s\n\\! echo %d > %s\n' "$sql" "$n" "$mark" >&"${E2E_SESS_FD[$name]}"
    for ((i = 0; i < 600; i++)); do
        [[ "$(cat "$mark" 2>/dev/null)" == "$n" ]] && return 0
        if ! kill -0 "${E2E_SESS_PID[$name]}" 2>/dev/null; then
            cat "$T/sess.$name.out" >&2
            fail "session $name: psql exited while running: $sql"
        fi
        sleep 0.1
    done
    cat "$T/sess.$name.out" >&2
    fail "session $name: timed out running: $sql"
}

# sess_close NAME: ends psql (an open transaction is rolled back).
sess_close() {
    local name=$1 rc=0 fd=${E2E_SESS_FD[$1]}
    exec {fd}>&-
    wait "${E2E_SESS_PID[$name]}" || rc=$?
    unset "E2E_SESS_PID[$name]"
    [[ $rc -eq 0 ]] || { cat "$T/sess.$name.out" >&2; fail "session $name: psql exit $rc"; }
    info "session $name closed"
}

# Creates table public.other (never in the publication).
# pg_role_outboxd SECRET: the least-privilege role of sql/role.sql with
# password SECRET, which 127.0.0.1 connections of that role must give
# (scram-sha-256, in pg_hba.conf ahead of the test's trust lines).
pg_role_outboxd() {
    local secret=${1:?pg_role_outboxd SECRET} hba=$T/pgdata/pg_hba.conf
    psql -XAtq -v ON_ERROR_STOP=1 -f "$E2E_SRC_DIR/sql/role.sql" >/dev/null
    psql_q "SET password_encryption = 'scram-sha-256'; ALTER ROLE outboxd PASSWORD '$secret'"
    {
        echo "host all outboxd 127.0.0.1/32 scram-sha-256"
        echo "host replication outboxd 127.0.0.1/32 scram-sha-256"
        cat "$hba"
    } >"$hba.new"
    cat "$hba.new" >"$hba"
    rm -f "$hba.new"
    pg_reload
}

# pg_libdir_without_wal2json: $T/libdir, the server's library directory
# with everything but wal2json.so (links), for "plugin not installed" tests.
pg_libdir_without_wal2json() {
    local libdir f
    libdir=$(pg_config --pkglibdir 2>/dev/null || echo /usr/lib/postgresql/15/lib)
    mkdir -p "$T/libdir"
    for f in "$libdir"/*; do
        [[ $(basename "$f") == wal2json.so ]] || ln -s "$f" "$T/libdir/"
    done
    [[ -e "$T/libdir/pgoutput.so" ]] || fail "pgoutput.so not found in $libdir"
}

# create_load_procedure: public.load(n, keys, per, tag) commits n
# transactions of per events over keys keys (aggregate ids tag-0 ...);
# versions grow with commit order (one writer); every 10th transaction
# (i % 10 = 7) rolls back, its events typed RolledBack.
create_load_procedure() {
    psql_q <<'SQL'
CREATE PROCEDURE public.load(n int, keys int, per int, tag text)
LANGUAGE plpgsql AS $$
DECLARE
    i int;
BEGIN
    FOR i IN 1..n LOOP
        INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
        SELECT gen_random_uuid(), 'Load', tag || '-' || ((i * per + j) % keys), i * per + j,
               CASE WHEN i % 10 = 7 THEN 'RolledBack' ELSE 'Tick' END,
               jsonb_build_object('i', i, 'j', j, 'tag', tag)
        FROM generate_series(0, per - 1) AS j;
        IF i % 10 = 7 THEN
            ROLLBACK;
        ELSE
            COMMIT;
        END IF;
        PERFORM pg_sleep(0.003);
    END LOOP;
END $$;
SQL
}

create_other_table() {
    psql_q "CREATE TABLE public.other (id bigserial PRIMARY KEY, note text, at timestamptz DEFAULT now())"
}

# install_expected: table public.expected records every row ever inserted
# into the outbox (trigger), with the inserting transaction's id, whatever
# later UPDATEs/DELETEs do to the outbox; rolled-back inserts vanish with
# their transaction. Use with check_delivery --expected.
install_expected() {
    psql_q <<'EOF'
CREATE TABLE public.expected (
    event_id uuid PRIMARY KEY,
    aggregate_type text NOT NULL,
    aggregate_id text NOT NULL,
    aggregate_version bigint,
    event_type text NOT NULL,
    payload jsonb,
    txid xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE FUNCTION public.expected_capture() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.expected (event_id, aggregate_type, aggregate_id,
                                 aggregate_version, event_type, payload)
    VALUES (NEW.event_id, NEW.aggregate_type, NEW.aggregate_id,
            NEW.aggregate_version, NEW.event_type, NEW.payload);
    RETURN NULL;
END $$;
CREATE TRIGGER expected_capture AFTER INSERT ON public.outbox_events
    FOR EACH ROW EXECUTE FUNCTION public.expected_capture();
EOF
}

# ---------------------------------------------------------------- LSNs

current_lsn() { psql_q "SELECT pg_current_wal_lsn()"; }

slot_confirmed_lsn() {
    psql_q "SELECT coalesce(confirmed_flush_lsn::text, '') FROM pg_replication_slots WHERE slot_name = '${OUTBOXD_SLOT:-outboxd}'"
}

# offset_file_lsn [FILE]: the LSN an offset file holds (format 2's lsn=
# line, or format 1's bare LSN); default $T/outboxd.offset.
offset_file_lsn() {
    local f=${1:-$T/outboxd.offset}
    if grep -q '^lsn=' "$f" 2>/dev/null; then
        sed -n 's/^lsn=//p' "$f" | head -n 1
    else
        head -n 1 "$f" 2>/dev/null
    fi
}

# offset_file_resume [FILE]: where a restart streams from: the file's acked
# (format 5: all ACKed before it, ahead of lsn), else its lsn.
offset_file_resume() {
    local f=${1:-$T/outboxd.offset} acked
    acked=$(sed -n 's/^acked=//p' "$f" 2>/dev/null | head -n 1)
    if [[ -n "$acked" ]]; then echo "$acked"; else offset_file_lsn "$f"; fi
}

# lsn_ge A B: true when LSN A >= LSN B.
lsn_ge() { [[ "$(psql_q "SELECT '$1'::pg_lsn >= '$2'::pg_lsn")" == t ]]; }

# wait_until TIMEOUT_S WHAT CMD [ARG...]: runs CMD every 0.2 s until it
# succeeds; fails the test, naming WHAT, when TIMEOUT_S pass first.
wait_until() {
    local timeout=$1 what=$2 start=$SECONDS
    shift 2
    until "$@"; do
        ((SECONDS - start < timeout)) || fail "not within ${timeout}s: $what"
        sleep 0.2
    done
}

# pg_wait [-x] TIMEOUT_S SQL: runs SQL every 100 ms on one connection until
# the first column of its first row is true (tests/pgwait.c: a psql per
# poll cost a process and a backend, about 70 ms of CPU, five times a
# second). Prints the last first row (columns separated by a space, "(no
# row)" when none); returns 1 after TIMEOUT_S, with the last error on
# stderr. -x: returns 3 at once when the first connection fails.
pg_wait() {
    local x=()
    [[ $1 == -x ]] && { x=(-x); shift; }
    "$OUTBOXD_BUILD_DIR/tests/outboxd-pgwait" "${x[@]}" -t "$1" -i 100 "$2"
}

# wait_for_confirmed_lsn LSN [TIMEOUT_S]: waits until the slot's
# confirmed_flush_lsn >= LSN; returns 1 (after saying so) on timeout.
wait_for_confirmed_lsn() {
    local lsn=$1 timeout=${2:-60} start=$SECONDS got
    info "waiting up to ${timeout}s for confirmed_flush_lsn >= $lsn"
    if got=$(pg_wait "$timeout" "SELECT coalesce(confirmed_flush_lsn >= '$lsn'::pg_lsn, false), coalesce(confirmed_flush_lsn::text, '-') FROM pg_replication_slots WHERE slot_name = '${OUTBOXD_SLOT:-outboxd}'"); then
        info "confirmed_flush_lsn ${got#* } >= $lsn after $((SECONDS - start))s"
        return 0
    fi
    info "TIMEOUT: confirmed_flush_lsn is '${got#* }', wanted >= $lsn"
    return 1
}

# wait_caught_up [TIMEOUT_S]: the slot confirmed everything written so far.
# wait_statuses N [SECONDS]: outboxd's walsender (of slot OUTBOXD_SLOT) has
# received N more status updates from it (pg_stat_replication.reply_time
# moved N times): what a negative check ("not confirmed past X") waits for
# once outboxd has read X, so that it cannot pass merely because no status
# went out yet.
wait_statuses() {
    local n=$1 timeout=${2:-60} i got prev
    local q="FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid WHERE s.slot_name = '${OUTBOXD_SLOT:-outboxd}'"
    prev=$(psql_q "SELECT coalesce(r.reply_time::text, '') $q")
    for ((i = 0; i < n; i++)); do
        got=$(pg_wait "$timeout" "SELECT coalesce(r.reply_time::text, '') <> '$prev', coalesce(r.reply_time::text, '-') $q") ||
            fail "outboxd sent no status to its walsender within ${timeout}s (last reply ${prev:-none})"
        prev=${got#* }
    done
    info "outboxd sent $n statuses (last at $prev)"
}

# wait_metric_ge NAME VALUE [SECONDS]: the metric (as metric_value reads it)
# reaches VALUE.
wait_metric_ge() {
    local name=$1 want=$2 timeout=${3:-60} start=$SECONDS got
    while :; do
        got=$(metric_value "$name")
        ((${got:-0} >= want)) && { info "ok: $name = ${got:-0} (>= $want)"; return 0; }
        ((SECONDS - start < timeout)) || fail "$name is ${got:-0} after ${timeout}s, expected >= $want"
        sleep 0.1
    done
}

wait_caught_up() {
    local lsn
    lsn=$(current_lsn)
    wait_for_confirmed_lsn "$lsn" "${1:-60}" ||
        fail "outboxd did not confirm $lsn within ${1:-60}s (confirmed: $(slot_confirmed_lsn))"
}

# ---------------------------------------------------------------- broker

# tls_throwaway DIR: a throw-away CA (DIR/ca.key, DIR/ca.pem, two days) and
# a certificate it signed for 127.0.0.1 and localhost (DIR/broker.key,
# DIR/broker.crt, and both in DIR/broker.pem for a Kafka listener or an
# HTTPS server); openssl's output in $T/openssl.log.
tls_throwaway() {
    local d=$1
    command -v openssl >/dev/null || fail "openssl is not installed (Debian: apt-get install openssl)"
    mkdir -p "$d"
    {
        openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.pem" \
            -days 2 -subj "/CN=outboxd test ca"
        openssl req -newkey rsa:2048 -nodes -keyout "$d/broker.key" -out "$d/broker.csr" \
            -subj "/CN=127.0.0.1"
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/san.ext"
        openssl x509 -req -in "$d/broker.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" \
            -CAcreateserial -out "$d/broker.crt" -days 2 -extfile "$d/san.ext"
    } >>"$T/openssl.log" 2>&1 || fail "openssl failed: $(tail -5 "$T/openssl.log")"
    cat "$d/broker.key" "$d/broker.crt" >"$d/broker.pem"
}

# broker_start [mockbroker options: --partitions N --brokers N --topic T]
broker_start() {
    if [[ "${E2E_KAFKA:-mock}" == real ]]; then
        _real_broker_start "$@"
        return
    fi
    local i
    step "starting mock Kafka cluster $*"
    rm -f "$T/broker.port"
    { _close_sess_fds; exec ${E2E_SPAWN:-} "$OUTBOXD_BUILD_DIR/tests/outboxd-mockbroker" --control "$T/broker.ctl" \
        --port-file "$T/broker.port" "$@" >"$T/broker.out" 2>"$T/broker.err" \
        </dev/null; } &
    BROKER_PID=$!
    for ((i = 0; i < 300; i++)); do
        [[ -s "$T/broker.port" ]] && break
        kill -0 "$BROKER_PID" 2>/dev/null || fail "mock broker exited: $(cat "$T/broker.err")"
        sleep 0.1
    done
    [[ -s "$T/broker.port" ]] || fail "mock broker did not start"
    KAFKA_BOOTSTRAP=$(cat "$T/broker.port")
    export KAFKA_BOOTSTRAP
    info "mock cluster at $KAFKA_BOOTSTRAP (pid $BROKER_PID)"
}

# E2E_KAFKA=real: broker_start starts a real Apache Kafka broker (KRaft,
# tests/kafka/kafka.sh) in $T/kafka instead of the mock: one broker, or
# E2E_KAFKA_BROKERS of them. Of the mock's options --brokers N is kept,
# and --partitions N becomes the broker's num.partitions (the mock applies
# it to the --topic topics; a real broker auto-creates every topic with it).
# The jars come from the cache kafka.sh resolve fills (Maven Central).
# E2E_KAFKA_PROPERTIES names a file of broker properties added to every
# node's (kafka.sh's DIR/extra.properties: TLS, SASL, the authorizer);
# kafka.sh's KAFKA_* variables (KAFKA_AUTO_CREATE, KAFKA_EXTRA_LISTENERS,
# KAFKA_FORMAT_ARGS) pass through.
E2E_KAFKA_DIR=
_real_broker_start() {
    local n=${E2E_KAFKA_BROKERS:-1}
    while (($#)); do
        case $1 in
        --brokers) n=$2; shift 2 ;;
        --partitions) export KAFKA_PARTITIONS=$2; shift 2 ;;
        *) shift ;;
        esac
    done
    step "starting a real Kafka cluster ($n broker(s), Kafka ${E2E_KAFKA_VERSION:-pinned})"
    E2E_KAFKA_DIR=$T/kafka
    # One more attempt on fresh ports when the first fails (seen once in 60
    # starts on a loaded 2-core machine: the broker gone before it answered);
    # the first failure stays in broker.err and in the test's output.
    local attempt
    for attempt in 1 2; do
        if [[ -n "${E2E_KAFKA_PROPERTIES:-}" ]]; then
            mkdir -p "$E2E_KAFKA_DIR"
            cp "$E2E_KAFKA_PROPERTIES" "$E2E_KAFKA_DIR/extra.properties" ||
                fail "E2E_KAFKA_PROPERTIES: cannot read $E2E_KAFKA_PROPERTIES"
        fi
        if KAFKA_BOOTSTRAP=$("$E2E_SRC_DIR/tests/kafka/kafka.sh" start "$E2E_KAFKA_DIR" "$n" \
            ${E2E_KAFKA_VERSION:-} 2>>"$T/broker.err"); then
            break
        fi
        "$E2E_SRC_DIR/tests/kafka/kafka.sh" destroy "$E2E_KAFKA_DIR"
        ((attempt == 1)) || fail "real Kafka did not start twice: $(tail -c 3000 "$T/broker.err")"
        info "real Kafka did not start, retrying once: $(tail -c 3000 "$T/broker.err")"
        mv "$E2E_KAFKA_DIR" "$T/kafka.failed"
    done
    export KAFKA_BOOTSTRAP
    info "real Kafka at $KAFKA_BOOTSTRAP"
}

# _real_broker_cmd "down ID" | "up ID": the fault verbs a real cluster has
# (controlled shutdown and restart with data kept); the mock's others
# (rtt, error, leader...) fail the test, which then needs the mock.
_real_broker_cmd() {
    local verb id
    read -r verb id _ <<<"$1"
    case $verb in
    down) "$E2E_SRC_DIR/tests/kafka/kafka.sh" stop "$E2E_KAFKA_DIR" "$id" ;;
    up) "$E2E_SRC_DIR/tests/kafka/kafka.sh" restart "$E2E_KAFKA_DIR" "$id" >/dev/null ;;
    kill) "$E2E_SRC_DIR/tests/kafka/kafka.sh" kill "$E2E_KAFKA_DIR" "$id" ;;
    ping) ;;
    *) fail "broker command '$1' needs the mock cluster (E2E_KAFKA=mock)" ;;
    esac || fail "real Kafka command '$1' failed"
    info "broker: $1 -> ok (real Kafka)"
}

# mock_only WHAT: true on the mock cluster. On real Kafka (E2E_KAFKA=real)
# it prints that the part WHAT of the test is not run here because it
# needs an injection only the mock can do (it runs in the e2e.* copy of
# the same script), and returns 1. Use: if mock_only "injected rtt"; then ...
mock_only() {
    [[ "${E2E_KAFKA:-mock}" == real ]] || return 0
    step "NOT RUN on real Kafka (mock-only injection; it runs in the e2e.* copy): $*"
    return 1
}

# broker_cmd "COMMAND ARGS": sends a command, prints nothing, fails the test
# unless the reply is "ok".
broker_cmd() {
    local cmd=$1 n i reply=
    if [[ -n "$E2E_KAFKA_DIR" ]]; then
        _real_broker_cmd "$cmd"
        return
    fi
    kill -0 "$BROKER_PID" 2>/dev/null || fail "mock broker is not running"
    n=$(grep -cE '^(ok|error)' "$T/broker.out" || true)
    timeout 10 bash -c 'printf "%s\n" "$1" >"$2"' _ "$cmd" "$T/broker.ctl" ||
        fail "could not write to the mock broker's control FIFO"
    for ((i = 0; i < 200; i++)); do
        reply=$(grep -E '^(ok|error)' "$T/broker.out" | sed -n "$((n + 1))p" || true)
        [[ -n "$reply" ]] && break
        sleep 0.05
    done
    info "broker: $cmd -> ${reply:-no reply}"
    [[ "$reply" == ok* ]] || fail "mock broker command '$cmd' failed: ${reply:-no reply}"
}

# kdump_all: every message of every topic, one JSON object per line, as a
# read_committed consumer sees them (librdkafka's default), leaving out
# exactly_once's progress topic (outboxd.progress). KDUMP_ARGS (words) adds
# options, e.g. "-X isolation.level=read_uncommitted".
kdump_all() {
    # shellcheck disable=SC2086
    "$OUTBOXD_BUILD_DIR/tests/outboxd-kdump" -b "$KAFKA_BOOTSTRAP" --all-topics \
        --exclude outboxd.progress --timeout-ms "${KDUMP_TIMEOUT_MS:-60000}" ${KDUMP_ARGS:-}
}

# ---------------------------------------------------------------- outboxd

# outboxd_start [--no-wait] [outboxd args, e.g. --set kafka.linger.ms=5]:
# writes $T/outboxd.ini, starts outboxd in the background (log appended to
# $T/outboxd.log) and, unless --no-wait, waits until its slot is active.
outboxd_start() {
    local wait=1 i
    if [[ "${1:-}" == --no-wait ]]; then
        wait=0
        shift
    fi
    [[ -x "$OUTBOXD_BUILD_DIR/outboxd" ]] || fail "$OUTBOXD_BUILD_DIR/outboxd is not built"
    [[ -z "$OUTBOXD_PID" ]] || fail "outboxd_start: outboxd already running (pid $OUTBOXD_PID)"
    cat >"$T/outboxd.ini" <<EOF
[postgres]
conninfo = $PG_CONNINFO
slot = ${OUTBOXD_SLOT:-outboxd}
publication = outboxd_pub
plugin = $OUTBOXD_TEST_PLUGIN

[kafka]
bootstrap.servers = $KAFKA_BOOTSTRAP

[offsets]
file = $T/outboxd.offset

[log]
level = debug
format = ${OUTBOXD_LOG_FORMAT:-text}

[http]
listen = ${OUTBOXD_HTTP_LISTEN:-127.0.0.1:0}
EOF
    OUTBOXD_STARTS=$((OUTBOXD_STARTS + 1))
    step "starting outboxd (#$OUTBOXD_STARTS) $*"
    printf '===== e2e: start #%d at %s: outboxd -c %s %s\n' "$OUTBOXD_STARTS" \
        "$(_ts)" "$T/outboxd.ini" "$*" >>"$T/outboxd.log"
    # OUTBOXD_WRAPPER (e.g. "valgrind --error-exitcode=99") runs outboxd
    # under a tool; word splitting of it is intended.
    # shellcheck disable=SC2086
    { _close_sess_fds; exec "${OUTBOXD_ENV[@]}" ${E2E_SPAWN:-} ${OUTBOXD_WRAPPER:-} "$OUTBOXD_BUILD_DIR/outboxd" -c "$T/outboxd.ini" "$@" >>"$T/outboxd.log" 2>&1 </dev/null; } &
    OUTBOXD_PID=$!
    ((wait)) || return 0
    for ((i = 0; i < 300; i++)); do
        if [[ "$(psql_q "SELECT active FROM pg_replication_slots WHERE slot_name = '${OUTBOXD_SLOT:-outboxd}'")" == t ]]; then
            info "outboxd (pid $OUTBOXD_PID) is streaming from slot ${OUTBOXD_SLOT:-outboxd}"
            return 0
        fi
        if ! kill -0 "$OUTBOXD_PID" 2>/dev/null; then
            OUTBOXD_RC=0
            wait "$OUTBOXD_PID" || OUTBOXD_RC=$?
            OUTBOXD_PID=
            fail "outboxd exited with status $OUTBOXD_RC while starting"
        fi
        sleep 0.1
    done
    fail "outboxd's slot did not become active within 30s"
}

# outboxd_log_last_start: what outboxd logged since its last start (the
# lines after the "===== e2e: start #N" line outboxd_start writes). How
# many lines follow a given one (latency summaries, librdkafka's last
# words) varies with timing: look for a line here, not in `tail -n N`.
outboxd_log_last_start() {
    local n
    n=$(grep -n '^===== e2e: start #' "$T/outboxd.log" | tail -n 1 | cut -d: -f1)
    tail -n "+$((${n:-0} + 1))" "$T/outboxd.log"
}

# outboxd_http_port [LOG]: the port outboxd's HTTP server bound, from the
# last "http: serving ... (port N)" line of LOG (default $HTTP_LOG, else
# $T/outboxd.log). outboxd listens on port 0 (any free port, race-free
# however many tests run side by side) unless OUTBOXD_HTTP_LISTEN says
# otherwise.
outboxd_http_port() {
    grep -o 'http: serving /metrics, /healthz and /readyz on [^ ]* (port [0-9]*)' \
        "${1:-${HTTP_LOG:-$T/outboxd.log}}" 2>/dev/null | tail -n 1 |
        sed 's/.*(port \([0-9]*\))$/\1/'
}

# http_get PATH: GETs http://127.0.0.1:PORT/PATH from outboxd (PORT: see
# outboxd_http_port, kept in OUTBOXD_HTTP_PORT); prints the body (also
# left in $T/http.body) and sets HTTP_STATUS (000 when no answer). Call it
# directly, not in $(...), to see HTTP_STATUS.
http_get() {
    local body=$T/http.body
    OUTBOXD_HTTP_PORT=$(outboxd_http_port)
    [[ -n "$OUTBOXD_HTTP_PORT" ]] || fail "http_get: outboxd has not logged its HTTP port"
    HTTP_STATUS=$(curl -s -m 10 -o "$body" -w '%{http_code}' \
        "http://127.0.0.1:$OUTBOXD_HTTP_PORT/${1#/}") || true
    [[ -n "$HTTP_STATUS" ]] || HTTP_STATUS=000
    cat "$body" 2>/dev/null || true
}

# metric_value NAME_AND_LABELS: the value of one sample in a fresh /metrics
# scrape, e.g. metric_value 'outboxd_events_acked_total{topic="t"}'; prints
# nothing when the sample is absent.
metric_value() {
    http_get /metrics | awk -v k="$1" '$1 == k { print $2; exit }'
}

# pid_wait_exit PID S: waits up to S seconds for PID (a child of this
# shell) to exit by itself; fails if it is still running then. Sets EXIT_RC.
pid_wait_exit() {
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$1" 2>/dev/null && fail "outboxd (pid $1) did not stop by itself within ${2}s"
    EXIT_RC=0
    wait "$1" || EXIT_RC=$?
}

# outboxd_wait_exit [S]: waits up to S (60) seconds for outboxd to exit by
# itself; fails if it is still running then. Sets OUTBOXD_RC.
outboxd_wait_exit() {
    pid_wait_exit "$OUTBOXD_PID" "${1:-60}"
    OUTBOXD_RC=$EXIT_RC
    OUTBOXD_PID=
    info "outboxd exited with status $OUTBOXD_RC"
}

# outboxd_log_wait REGEX [S] [COUNT]: waits up to S (30) seconds until
# $T/outboxd.log has COUNT (1) lines matching the extended REGEX, failing
# (with the log's last lines) if outboxd exits first or time runs out.
# outboxd_start returns once the slot is active, which the server marks
# before it answers START_REPLICATION: a line outboxd logs after that answer
# may not be written yet, so it is waited for, not grepped once.
outboxd_log_wait() {
    local re=$1 timeout=${2:-30} want=${3:-1} start=$SECONDS n
    while :; do
        n=$(grep -cE -- "$re" "$T/outboxd.log" 2>/dev/null) || true
        ((${n:-0} >= want)) && break
        ((SECONDS - start < timeout)) ||
            fail "outboxd did not log /$re/ ($want time(s), seen ${n:-0}) within ${timeout}s; since its last start it logged:
$(outboxd_log_last_start | tail -n 40)"
        outboxd_assert_running
        sleep 0.1
    done
    info "ok: outboxd logged /$re/"
}

# outboxd_assert_running: fails when outboxd has exited.
outboxd_assert_running() {
    [[ -n "$OUTBOXD_PID" ]] && kill -0 "$OUTBOXD_PID" 2>/dev/null && return 0
    OUTBOXD_RC=0
    [[ -z "$OUTBOXD_PID" ]] || wait "$OUTBOXD_PID" || OUTBOXD_RC=$?
    OUTBOXD_PID=
    fail "outboxd is not running (exit status $OUTBOXD_RC)"
}

# outboxd_stop [TIMEOUT_S]: SIGTERM, waits; returns (and sets OUTBOXD_RC
# to) outboxd's exit status; kills -9 and returns 124 on timeout.
outboxd_stop() {
    local timeout=${1:-60} i
    [[ -n "$OUTBOXD_PID" ]] || fail "outboxd_stop: outboxd is not running"
    step "stopping outboxd (SIGTERM)"
    kill -TERM "$OUTBOXD_PID" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do
        kill -0 "$OUTBOXD_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$OUTBOXD_PID" 2>/dev/null; then
        info "outboxd did not exit within ${timeout}s of SIGTERM: killing it"
        kill -KILL "$OUTBOXD_PID" 2>/dev/null || true
        wait "$OUTBOXD_PID" 2>/dev/null || true
        OUTBOXD_PID=
        OUTBOXD_RC=124
        return 124
    fi
    OUTBOXD_RC=0
    wait "$OUTBOXD_PID" || OUTBOXD_RC=$?
    OUTBOXD_PID=
    info "outboxd exited with status $OUTBOXD_RC"
    return "$OUTBOXD_RC"
}

outboxd_kill9() {
    [[ -n "$OUTBOXD_PID" ]] || fail "outboxd_kill9: outboxd is not running"
    step "killing outboxd (SIGKILL)"
    kill -KILL "$OUTBOXD_PID" 2>/dev/null || true
    wait "$OUTBOXD_PID" 2>/dev/null || true
    OUTBOXD_PID=
    _slot_wait_released
}

# _slot_wait_released: after outboxd died, waits (up to 30 s) until the
# slot no longer shows its walsender as active. A walsender busy decoding
# notices the closed socket only when it next sends, and until then
# outboxd_start would take the stale "active" for the new instance's. Quiet
# when the server does not answer (a test that stopped it).
_slot_wait_released() {
    local rc=0
    # No slot: nothing holds it. -x: no server (a test stopped it): no wait.
    pg_wait -x 30 "SELECT coalesce((SELECT NOT active FROM pg_replication_slots WHERE slot_name = '${OUTBOXD_SLOT:-outboxd}'), true)" >/dev/null 2>&1 || rc=$?
    ((rc == 1)) || return 0
    info "the slot still shows a walsender as active 30 s after outboxd died"
}

# ---------------------------------------------------------------- checks

# judge_slot: a second logical slot (test_decoding, never confirmed) from
# which check_delivery reads the order in which the server decodes the
# outbox rows, the real commit order, to judge the order of first
# deliveries in each partition against it rather than against outboxd's
# own commit_lsn headers (issue 54). Call it after pg_start, before the
# first event. A server without test_decoding says so in the log, and the
# order is then judged on the headers only.
judge_slot() {
    if psql_q "SELECT pg_create_logical_replication_slot('outboxd_judge', 'test_decoding')" \
        >/dev/null 2>"$T/judge_slot.err"; then
        JUDGE_SLOT=1
        info "judge slot outboxd_judge (test_decoding): delivery order is judged against the real commit order"
    else
        JUDGE_SLOT=0
        info "no judge slot ($(head -n 1 "$T/judge_slot.err")): delivery order is judged on the commit_lsn headers only"
    fi
}

# check_delivery [--expected] [--exactly-once] [--dump FILE]
#
# Dumps every topic (or reads FILE) and compares the messages with the
# committed rows of public.outbox_events (--expected: of public.expected,
# see install_expected):
#  - every committed event_id arrived at least once (--exactly-once: once);
#  - no message whose event_id was not committed (rolled back, unknown);
#  - topic = outbox.event.<aggregate_type>, key bytes = aggregate_id,
#    value bytes = payload::text (null when payload is NULL);
#  - headers exactly event_id, event_type, aggregate_type, aggregate_id,
#    aggregate_version (only when not NULL), commit_lsn, with the row's
#    values; commit_lsn is the same for all events of a transaction (and,
#    with --expected, which knows top-level transaction ids, differs
#    between transactions);
#  - all messages of a key are on one partition; in partition offset order
#    (first delivery of each event) aggregate_version never goes backwards
#    per key, and commit_lsn never goes backwards per partition.
# The rows and messages compared are left in $T/check.*.
check_delivery() {
    local src=outbox dump= once=0 txcol strict=0
    while [[ $# -gt 0 ]]; do
        case $1 in
        --expected) src=expected ;;
        --exactly-once) once=1 ;;
        --dump) dump=$2; shift ;;
        *) fail "check_delivery: unknown option $1" ;;
        esac
        shift
    done
    step "checking delivery (rows of ${src}, exactly-once=$once)"
    if [[ -z "$dump" ]]; then
        dump=$T/check.dump.jsonl
        kdump_all >"$dump" 2>"$T/check.kdump.err" ||
            { cat "$T/check.kdump.err" >&2; fail "outboxd-kdump failed"; }
    fi
    if [[ $src == expected ]]; then
        src=public.expected txcol="txid::text" strict=1
    else
        src=public.outbox_events txcol="xmin::text"
    fi
    psql -XAtq -v ON_ERROR_STOP=1 -F $'\t' >"$T/check.rows.tsv" <<EOF ||
SELECT encode(convert_to(event_id::text, 'UTF8'), 'hex'),
       $txcol,
       'outbox.event.' || aggregate_type,
       encode(convert_to(aggregate_type, 'UTF8'), 'hex'),
       encode(convert_to(aggregate_id, 'UTF8'), 'hex'),
       coalesce(aggregate_version::text, '-'),
       encode(convert_to(event_type, 'UTF8'), 'hex'),
       coalesce(encode(convert_to(payload::text, 'UTF8'), 'hex'), '-')
FROM $src
EOF
        fail "reading $src failed"
    jq -r '[.topic, (.partition | tostring), (.offset | tostring),
            (.key_hex // "-"), (.value_hex // "-"),
            (.headers_hex.event_id // "-"),
            (.headers_hex.event_type // "-"),
            (.headers_hex.aggregate_type // "-"),
            (.headers_hex.aggregate_id // "-"),
            (.headers.aggregate_version // "-"),
            (.headers.commit_lsn // "-"),
            ([.headers_list[][0]] | sort | join(",")),
            (.headers_list | length | tostring)] | @tsv' \
        <"$dump" >"$T/check.msgs.tsv" || fail "jq could not read the dump"
    info "$(wc -l <"$T/check.rows.tsv") rows, $(wc -l <"$T/check.msgs.tsv") messages"
    # The real commit order (judge_slot): each outbox row's event_id, in the
    # order the server decodes them.
    : >"$T/check.order.tsv"
    if [[ "${JUDGE_SLOT:-0}" == 1 ]]; then
        psql -XAtq -v ON_ERROR_STOP=1 -F $'\t' >"$T/check.order.tsv" <<'SQL' ||
SELECT encode(convert_to(substring(data from $re$event_id\[[^]]*\]:'([^']*)'$re$), 'UTF8'), 'hex')
FROM pg_logical_slot_peek_changes('outboxd_judge', NULL, NULL, 'skip-empty-xacts', '1')
WHERE data LIKE 'table public.outbox_events: INSERT:%'
SQL
            fail "reading the judge slot failed"
        info "the judge slot decoded $(wc -l <"$T/check.order.tsv") outbox rows"
    fi
    awk -F '\t' -v once="$once" -v strict_tx="$strict" -f "$E2E_LIB_DIR/lsn.awk" -f "$E2E_LIB_DIR/check_delivery.awk" \
        "$T/check.rows.tsv" "$T/check.order.tsv" "$T/check.msgs.tsv" >&2 ||
        fail "delivery check failed (rows: $T/check.rows.tsv, messages: $T/check.msgs.tsv)"
}

# dump_count [FILE]: number of messages in a dump (or a fresh one).
dump_count() {
    if [[ $# -gt 0 ]]; then
        wc -l <"$1"
    else
        kdump_all | wc -l
    fi
}

# ---------------------------------------------------------------- debian root

# debian_root DIR: a clean Debian 12 root in DIR (debootstrap
# --variant=minbase bookworm, from the host's Debian mirror), with the
# host's apt sources; the log in $T/debootstrap.log. In two stages, so that
# the second (dpkg inside the new root) already runs with the setting of
# Debian's official images (debuerreotype's docker-apt-speedup): dpkg does
# not fsync every file it unpacks. In a CI run beside other tests
# debootstrap took 373 s (46 s alone) and the image build ran past its
# test's timeout; an fsync per unpacked file is what a busy disk makes
# slowest. The file stays in the root, as in the official images.
# With DEBIAN_ROOT_TAR (ctest sets it for e2e.container and e2e.package)
# the root is that tarball unpacked: one debootstrap per ctest run, made
# by the fixture e2e.debian_root (tests/e2e/debian_root.sh, which calls
# debian_root_debootstrap), instead of one per test; each test still
# unpacks a root of its own that no other test has touched.
debian_root() {
    local dir=$1 start=$SECONDS
    if [[ -n ${DEBIAN_ROOT_TAR:-} ]]; then
        [[ -s $DEBIAN_ROOT_TAR ]] ||
            fail "DEBIAN_ROOT_TAR: no $DEBIAN_ROOT_TAR (the fixture e2e.debian_root makes it)"
        mkdir -p "$dir"
        tar -C "$dir" --numeric-owner -xpf "$DEBIAN_ROOT_TAR" ||
            fail "unpacking $DEBIAN_ROOT_TAR into $dir failed"
        info "Debian 12 root unpacked in $dir in $((SECONDS - start)) s from $DEBIAN_ROOT_TAR (e2e.debian_root's debootstrap)"
        return 0
    fi
    debian_root_debootstrap "$dir"
}
# debian_root_debootstrap DIR: debian_root's debootstrap, always.
debian_root_debootstrap() {
    local dir=$1 mirror start=$SECONDS
    mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    : "${mirror:=http://deb.debian.org/debian}"
    debootstrap --foreign --variant=minbase bookworm "$dir" "$mirror" >"$T/debootstrap.log" 2>&1 ||
        { tail -n 20 "$T/debootstrap.log" >&2; fail "debootstrap from $mirror failed"; }
    echo force-unsafe-io >"$dir/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
    chroot "$dir" /debootstrap/debootstrap --second-stage >>"$T/debootstrap.log" 2>&1 ||
        { tail -n 20 "$T/debootstrap.log" >&2; fail "debootstrap's second stage failed"; }
    mkdir -p "$dir/etc/apt/sources.list.d"
    if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
        cp /etc/apt/sources.list.d/debian.sources "$dir/etc/apt/sources.list.d/"
    fi
    info "Debian 12 root made in $dir in $((SECONDS - start)) s (mirror $mirror)"
}
