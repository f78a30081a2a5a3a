#!/usr/bin/env bash
# Signals, in logical mode (relay.c) and in polling mode (pollrelay.c)
# (deploy/observability.md, "Signals"):
#  - SIGHUP re-reads the configuration file: a changed [log] level and
#    format take effect at once (the reload line itself and the lines
#    after it are JSON), and the one line it logs names what was reloaded
#    and which changed keys need a restart; a file that no longer parses
#    is logged and the running configuration kept; the daemon stays up
#    and keeps delivering;
#  - SIGUSR1 and SIGUSR2 do not kill it (a log line each);
#  - SIGTERM still drains and exits 0.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/polling_lib.sh"
e2e_init signals

# wait_grep FILE REGEX [TIMEOUT_S]: until FILE has a line matching REGEX;
# fails at once when the daemon ($WATCH_PID) has exited.
WATCH_PID=
wait_grep() {
    local file=$1 re=$2 timeout=${3:-15} start=$SECONDS
    while ! grep -qE -- "$re" "$file"; do
        [[ -z "$WATCH_PID" ]] || kill -0 "$WATCH_PID" 2>/dev/null ||
            fail "the daemon (pid $WATCH_PID) has exited; last line: $(tail -n 1 "$file")"
        ((SECONDS - start < timeout)) || fail "no line /$re/ in $file within ${timeout}s"
        sleep 0.2
    done
    info "ok: $(basename "$file"): $(grep -E -m1 -- "$re" "$file" | cut -c1-220)"
}

# signal_checks PID INI LOG: SIGHUP (new level and format, a key that needs
# a restart; then a broken file), SIGUSR1, SIGUSR2; the daemon stays up.
signal_checks() {
    local pid=$1 ini=$2 log=$3
    WATCH_PID=$pid
    cp "$ini" "$T/good.ini"
    sed -i -e 's/^level = .*/level = info/' -e '/^\[log\]/a format = json' "$ini"
    sed -i '/^format = text$/d' "$ini"
    sed -i 's/^\(bootstrap.servers = .*\)$/\1\nmessage.max.bytes = 500000/' "$ini"
    step "SIGHUP with [log] level = info, format = json and a new kafka key"
    kill -HUP "$pid"
    wait_grep "$log" '^\{.*"msg":"SIGHUP: reloaded [^"]*: log.level debug -> info, log.format text -> json; changed keys that need a restart to take effect: kafka.message.max.bytes"'
    kill -0 "$pid" 2>/dev/null || fail "outboxd died on SIGHUP"
    step "a file that no longer parses"
    cp "$ini" "$T/json.ini"
    printf '[log\nlevel = debug\n' >>"$ini"
    kill -HUP "$pid"
    wait_grep "$log" '^\{"ts":[^}]*"level":"error".*"msg":"SIGHUP: the configuration no longer loads \(.*syntax error.*\): keeping the running one"'
    kill -0 "$pid" 2>/dev/null || fail "outboxd died on SIGHUP with a broken file"
    cp "$T/json.ini" "$ini"
    for sig in USR1 USR2; do
        step "SIG$sig"
        kill -"$sig" "$pid"
        wait_grep "$log" "\"msg\":\"SIG$sig received: ignored"
        sleep 0.3
        kill -0 "$pid" 2>/dev/null || fail "outboxd died on SIG$sig"
    done
    # Every line after the reload is JSON (no text line slipped through).
    local after
    after=$(sed -n '/SIGHUP: reloaded/,$p' "$log" | grep -v '^=====' | grep -vc '^{' || true)
    assert_eq 0 "$after" "text lines after the reload to JSON"
    WATCH_PID=
}

pg_start
broker_start

step "logical mode"
outboxd_start
for i in 1 2 3; do
    psql_q "INSERT INTO outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES (gen_random_uuid(), 'Order', 'o$i', 'Created', '{}')"
done
wait_caught_up 60
signal_checks "$OUTBOXD_PID" "$T/outboxd.ini" "$T/outboxd.log"
for i in 4 5 6; do
    psql_q "INSERT INTO outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES (gen_random_uuid(), 'Order', 'o$i', 'Created', '{}')"
done
wait_caught_up 60
check_delivery --exactly-once
outboxd_stop || fail "logical mode: SIGTERM after the signals: exit status $OUTBOXD_RC, not 0"
assert_eq 0 "$OUTBOXD_RC" "logical mode: exit status after SIGTERM"
grep -q '"msg":"SIGHUP: reloaded' "$T/outboxd.log" || fail "no reload line"

step "polling mode"
polling_schema
relay_start p1
wait_log p1 'polling' 30
ins 1 a 1
wait_rows "status = 'SENT'" 1 30
signal_checks "${RELAY_PID[p1]}" "$T/relay.p1.ini" "$T/relay.p1.log"
ins 2 a 2
wait_rows "status = 'SENT'" 2 30
relay_stop p1
e2e_pass
