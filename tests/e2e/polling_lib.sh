# shellcheck shell=bash
#
# tests/e2e/polling_lib.sh - helpers of the polling-mode tests; source it
# after lib.sh.
#
#   polling_schema                 replaces the logical schema pg_start made
#                                  with sql/outbox_polling.sql
#   relay_start NAME [args]        starts outboxd in polling mode as relay
#                                  NAME (owner_id NAME, $T/relay.NAME.ini,
#                                  log $T/relay.NAME.log); RELAY_PID[NAME]
#   relay_stop NAME                SIGTERM; fails unless it exits 0
#   relay_kill9 NAME               SIGKILL
#   relay_running NAME             true while it runs
#   wait_rows SQL_COND N TIMEOUT   waits until N rows match SQL_COND
#   wait_log NAME REGEX TIMEOUT    waits until relay NAME's log matches
#   ev_state EVENT_ID              "status|attempts|lease_owner|lease_generation"
#   polling_verify FILE            outboxd verify --json into FILE (exit 0,
#                                  no unknown message and some rows required)
declare -A RELAY_PID=()

polling_schema() {
    step "polling schema (sql/outbox_polling.sql)"
    # CASCADE: tables made LIKE it INCLUDING ALL share its seq column's
    # sequence (sql/outbox.sql); they lose that default, nothing else.
    psql_q "DROP PUBLICATION IF EXISTS outboxd_pub; DROP TABLE public.outbox_events CASCADE"
    psql -XAtq -v ON_ERROR_STOP=1 -f "$E2E_SRC_DIR/sql/outbox_polling.sql" \
        >"$T/polling_schema.log" 2>&1 ||
        { cat "$T/polling_schema.log" >&2; fail "loading sql/outbox_polling.sql failed"; }
}

# relay_ini NAME: the relay's configuration file (extra keys via --set).
relay_ini() {
    cat >"$T/relay.$1.ini" <<EOF
[postgres]
conninfo = $PG_CONNINFO
retry_min_ms = 200
retry_max_ms = 2000

[source]
mode = polling

[polling]
owner_id = $1
poll_interval_ms = ${RELAY_POLL_MS:-500}

[kafka]
bootstrap.servers = $KAFKA_BOOTSTRAP
linger.ms = 5

[log]
level = ${RELAY_LOG_LEVEL:-debug}

[http]
listen = 127.0.0.1:0
EOF
}

relay_start() {
    local name=$1
    shift
    relay_ini "$name"
    printf '===== e2e: start at %s: %s\n' "$(_ts)" "$*" >>"$T/relay.$name.log"
    # shellcheck disable=SC2086 # OUTBOXD_WRAPPER (e.g. valgrind) is split on purpose
    { _close_sess_fds; exec "${OUTBOXD_ENV[@]}" ${OUTBOXD_WRAPPER:-} "$OUTBOXD_BUILD_DIR/outboxd" -c "$T/relay.$name.ini" "$@" \
        >>"$T/relay.$name.log" 2>&1 </dev/null; } &
    RELAY_PID[$name]=$!
    E2E_BG_PIDS+=("$!")
    info "relay $name started (pid $!) $*"
}

relay_running() { [[ -n "${RELAY_PID[$1]:-}" ]] && kill -0 "${RELAY_PID[$1]}" 2>/dev/null; }

relay_stop() {
    local name=$1 rc=0 i
    relay_running "$name" || fail "relay $name is not running"
    kill -TERM "${RELAY_PID[$name]}"
    for ((i = 0; i < 300; i++)); do
        kill -0 "${RELAY_PID[$name]}" 2>/dev/null || break
        sleep 0.1
    done
    wait "${RELAY_PID[$name]}" || rc=$?
    RELAY_PID[$name]=
    [[ $rc -eq 0 ]] || fail "relay $name exited $rc after SIGTERM (log $T/relay.$name.log)"
    info "relay $name stopped (exit 0)"
}

relay_kill9() {
    local name=$1
    kill -KILL "${RELAY_PID[$name]}" 2>/dev/null || true
    wait "${RELAY_PID[$name]}" 2>/dev/null || true
    RELAY_PID[$name]=
    info "relay $name killed (SIGKILL)"
}

# wait_rows "SQL condition" N TIMEOUT_S: count(*) of the outbox WHERE cond = N.
wait_rows() {
    local cond=$1 n=$2 timeout=${3:-30} start=$SECONDS got
    while :; do
        got=$(psql_q "SELECT count(*) FROM public.outbox_events WHERE $cond")
        [[ "$got" == "$n" ]] && { info "ok: $n rows with $cond after $((SECONDS - start))s"; return 0; }
        ((SECONDS - start < timeout)) || fail "waited ${timeout}s for $n rows with $cond; have $got"
        sleep 0.2
    done
}

wait_log() {
    local name=$1 re=$2 timeout=${3:-30} start=$SECONDS
    while ! grep -qE "$re" "$T/relay.$name.log"; do
        ((SECONDS - start < timeout)) || fail "relay $name did not log /$re/ within ${timeout}s"
        sleep 0.2
    done
    info "ok: relay $name logged /$re/"
}

ev_state() {
    psql_q "SELECT status || '|' || attempts || '|' || coalesce(lease_owner, '-') || '|' || lease_generation FROM public.outbox_events WHERE event_id = '$1'"
}

polling_verify() {
    local out=$1 rc=0
    [[ -f "$T/relay.verify.ini" ]] || relay_ini verify
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/relay.verify.ini" --json >"$out" \
        2>"$out.err" || rc=$?
    [[ $rc -eq 0 ]] || { cat "$out" "$out.err" >&2; fail "outboxd verify exited $rc"; }
    info "verify: $(jq -c '{rows, messages, missing, duplicates, duplicate_events, unknown, order_violations}' "$out")"
    # A message of no row is a row lost from the table or an event from
    # nowhere: never ignored (issue 54).
    [[ "$(jq .unknown "$out")" == 0 ]] ||
        { cat "$out" >&2; fail "outboxd verify found $(jq .unknown "$out") messages of no committed row"; }
    ((${POLLING_VERIFY_ALLOW_EMPTY:-0} || $(jq .rows "$out") > 0)) ||
        fail "outboxd verify audited no row: nothing was compared"
}

# uuid N: a fixed event_id ending in N.
uuid() { printf '00000000-0000-4000-8000-%012d' "$1"; }

# ins EVENT_NO AGG VERSION [TYPE] [PAYLOAD_SQL]: one committed event.
ins() {
    psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload) VALUES ('$(uuid "$1")', '${4:-Order}', '$2', $3, 'Tick', ${5:-jsonb_build_object('n', $1)})"
}
