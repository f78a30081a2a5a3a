# shellcheck shell=bash
#
# tests/e2e/standby_lib.sh - a primary with a physical streaming standby
# (or two), for the tests of the database's own failures (failover_slots.sh
# on PostgreSQL 17, failover_repair.sh on 15, standby_decoding.sh and
# standby_promote_other.sh on 16+). Source it after lib.sh.
#
#   pg_start                         # the primary (lib.sh)
#   standby_create standby1 [LINE...] # a standby on physical slot standby1;
#                                    # LINEs go to its postgresql.conf
#   at "$P2" "SELECT pg_is_in_recovery()"
#   standby_create_second standby2 [LINE...] # (optional, right after
#                                    # standby_create) a second standby
#   standby_start                    # all started, streaming
#   primary_kill                     # SIGKILL of the postmaster and children
#   standby_promote
#   verify_promoted                  # outboxd verify against its table
#
# The standby is a copy of the primary's data directory taken after a
# clean stop (Debian's pg_basebackup is 15 and refuses a newer server), so
# both have the same system identifier, and the promoted standby starts a
# new timeline. Sets P1 and P2 (the ports) and SB (the standby's data
# directory); the standby is stopped at exit like the primary. A second
# standby (standby_create_second) is P3 in SB2.

# at PORT SQL: one query on the server at PORT (not following the primary).
at() { PGTARGETSESSIONATTRS=any psql -XAtq -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -c "$2"; }

_standby_cleanup() {
    local rc=$?
    set +eE
    trap - ERR
    if [[ -n "${SB:-}" && -f "$SB/postmaster.pid" ]]; then
        _as_pg "$PG_BINDIR/pg_ctl" -D "$SB" -m immediate -w -t 30 stop >/dev/null 2>&1
    fi
    if [[ -n "${SB2:-}" && -f "$SB2/postmaster.pid" ]]; then
        _as_pg "$PG_BINDIR/pg_ctl" -D "$SB2" -m immediate -w -t 30 stop >/dev/null 2>&1
    fi
    (exit "$rc")
    _e2e_cleanup
}

# standby_create PHYS [CONF_LINE...]: stops the primary (started by
# pg_start), copies it to $T/standby, configures the copy as a hot standby
# streaming from the primary on physical slot PHYS (created here) with the
# extra postgresql.conf lines given, starts both and waits until the
# standby streams.
standby_create() {
    local phys=${1:?standby_create PHYS} i line
    shift
    P1=$PGPORT
    SB=$T/standby
    trap _standby_cleanup EXIT
    at "$P1" "SELECT pg_create_physical_replication_slot('$phys', true)" >/dev/null
    pg_stop
    step "copying the primary's data directory to the standby"
    cp -a "$T/pgdata" "$SB"
    rm -rf "${SB:?}/pg_replslot/$phys" "$SB/postmaster.pid" # the primary's own slot
    mkdir -p "$T/pgsock2"
    [[ $(id -u) -ne 0 ]] || chown postgres "$T/pgsock2"
    P2=$(_free_port)
    while [[ $P2 == "$P1" ]]; do P2=$(_free_port); done
    cat >>"$SB/postgresql.conf" <<EOF

# the standby (standby_lib.sh)
port = $P2
unix_socket_directories = '$T/pgsock2'
primary_conninfo = 'host=127.0.0.1 port=$P1 user=postgres dbname=postgres application_name=$phys'
primary_slot_name = '$phys'
hot_standby = on
EOF
    for line in "$@"; do echo "$line" >>"$SB/postgresql.conf"; done
    touch "$SB/standby.signal"
    [[ $(id -u) -ne 0 ]] || chown postgres "$SB/standby.signal"
}

# standby_create_second PHYS [CONF_LINE...]: after standby_create (the
# primary stopped), a second copy in $T/standby2 on port P3, streaming from
# the primary on physical slot PHYS, which must exist on the primary already
# (created before standby_create: the copy must not need WAL the primary
# has recycled). standby_start starts it too.
standby_create_second() {
    local phys=${1:?standby_create_second PHYS} line
    shift
    SB2=$T/standby2
    cp -a "$T/pgdata" "$SB2"
    rm -rf "${SB2:?}/pg_replslot/"* "$SB2/postmaster.pid" # the primary's slots
    mkdir -p "$T/pgsock3"
    [[ $(id -u) -ne 0 ]] || chown postgres "$T/pgsock3"
    P3=$(_free_port)
    while [[ $P3 == "$P1" || $P3 == "$P2" ]]; do P3=$(_free_port); done
    cat >>"$SB2/postgresql.conf" <<EOF

# the second standby (standby_lib.sh)
port = $P3
unix_socket_directories = '$T/pgsock3'
primary_conninfo = 'host=127.0.0.1 port=$P1 user=postgres dbname=postgres application_name=$phys'
primary_slot_name = '$phys'
hot_standby = on
EOF
    for line in "$@"; do echo "$line" >>"$SB2/postgresql.conf"; done
    touch "$SB2/standby.signal"
    [[ $(id -u) -ne 0 ]] || chown postgres "$SB2/standby.signal"
}

# standby_start: starts the primary again and the standby (and the second
# one, if made) after standby_create and any change to the primary's
# configuration, and waits until they stream.
standby_start() {
    _as_pg "$PG_BINDIR/pg_ctl" -D "$T/pgdata" -l "$T/postgres.log" -w -t 60 -o "$PG_CTL_OPTS" \
        start >>"$T/pg_ctl.log" 2>&1 || fail "the primary did not start again"
    _as_pg "$PG_BINDIR/pg_ctl" -D "$SB" -l "$T/standby.log" -w -t 60 -o "$PG_CTL_OPTS" \
        start >>"$T/pg_ctl.log" 2>&1 ||
        { tail -n 20 "$T/standby.log" >&2; fail "the standby did not start"; }
    local n=1
    if [[ -n "${SB2:-}" ]]; then
        n=2
        _as_pg "$PG_BINDIR/pg_ctl" -D "$SB2" -l "$T/standby2.log" -w -t 60 -o "$PG_CTL_OPTS" \
            start >>"$T/pg_ctl.log" 2>&1 ||
            { tail -n 20 "$T/standby2.log" >&2; fail "the second standby did not start"; }
    fi
    for ((i = 0; i < 300; i++)); do
        [[ $(at "$P1" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'") == "$n" ]] && break
        sleep 0.2
    done
    assert_eq "$n" "$(at "$P1" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" \
        "standbys streaming from the primary"
    assert_eq t "$(at "$P2" "SELECT pg_is_in_recovery()")" "the standby is in recovery"
}

# primary_kill: SIGKILL of the primary's postmaster and its children (a
# crash); sets KILL_T (epoch ms).
primary_kill() {
    local pm
    pm=$(head -n 1 "$T/pgdata/postmaster.pid")
    KILL_T=$(date +%s%3N)
    # shellcheck disable=SC2046 # the children's pids, one word each
    kill -KILL "$pm" $(pgrep -P "$pm") 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do kill -0 "$pm" 2>/dev/null || break; sleep 0.1; done
    ! kill -0 "$pm" 2>/dev/null || fail "the primary's postmaster survived SIGKILL"
}

# standby_promote: pg_ctl promote; sets PROMOTE_T (epoch ms).
standby_promote() {
    step "promoting the standby"
    _as_pg "$PG_BINDIR/pg_ctl" -D "$SB" -w -t 60 promote >>"$T/pg_ctl.log" 2>&1 ||
        fail "pg_ctl promote failed"
    PROMOTE_T=$(date +%s%3N)
    assert_eq f "$(at "$P2" "SELECT pg_is_in_recovery()")" "the standby is promoted"
}

# verify_promoted: `outboxd verify --json` (the test's outboxd.ini and
# OUTBOXD_ARGS) against the table of the server outboxd follows (the
# promoted one); prints the counts and sets V_RC (verify's exit status),
# V_ROWS, V_MESSAGES, V_MISSING, V_UNKNOWN (in Kafka, not in the table),
# V_ORDER, V_DUPS and V_DUP_EVENTS. Judging them is the caller's.
verify_promoted() {
    local v=$T/verify.json
    step "outboxd verify against the promoted server's table"
    V_RC=0
    "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" verify -c "$T/outboxd.ini" "${OUTBOXD_ARGS[@]}" --json >"$v" \
        2>"$T/verify.err" || V_RC=$?
    jq -c '{rows, messages, missing, duplicates, duplicate_events, unknown, order_violations, ok}' \
        "$v" >&2 || { cat "$T/verify.err" >&2; fail "outboxd verify gave no JSON (exit $V_RC)"; }
    V_ROWS=$(jq -r .rows "$v")
    V_MESSAGES=$(jq -r .messages "$v")
    V_MISSING=$(jq -r .missing "$v")
    V_UNKNOWN=$(jq -r .unknown "$v")
    V_ORDER=$(jq -r .order_violations "$v")
    V_DUPS=$(jq -r .duplicates "$v")
    V_DUP_EVENTS=$(jq -r .duplicate_events "$v")
}
