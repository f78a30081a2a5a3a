#!/usr/bin/env bash
# The HTTP server keeps answering its probes (deploy/observability.md, "Endpoints"):
#  - 40 slow clients from one address (127.0.0.2) that send their request
#    one byte every 5 s (then every second), and open a new connection
#    whenever one is closed, for at least 20 s (12 s): meanwhile /healthz
#    and /metrics from another address (127.0.0.1) answer 200 within 3 s
#    each, every 2 s;
#  - [http] listen = localhost:PORT (a host name) serves on 127.0.0.1.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init http_limits

TRICKLE=${OUTBOXD_TRICKLE:-$OUTBOXD_BUILD_DIR/tests/outboxd-trickle}
[[ -x "$TRICKLE" ]] || fail "$TRICKLE is not built (the outboxd-trickle target)"

pg_start
broker_start
outboxd_start
http_get /healthz >/dev/null
assert_eq 200 "$HTTP_STATUS" "/healthz before the slow clients"
port=$(outboxd_http_port)

# slow_clients INTERVAL_MS SECONDS PROBES: 40 slow clients from 127.0.0.2,
# one byte every INTERVAL_MS, for SECONDS and at least PROBES rounds of
# /healthz and /metrics from 127.0.0.1, 2 s apart, each 200 within 3 s.
# The clients run until the probes are done (SIGTERM then; their own
# bound is far beyond), so a slow machine lengthens the run rather than
# probing after the clients have gone.
slow_clients() {
    local interval=$1 secs=$2 probes=$3 trickle i path t0 code ms start
    step "40 slow clients from 127.0.0.2: one byte every $interval ms, for $secs s"
    "$TRICKLE" 127.0.0.2 127.0.0.1 "$port" 40 "$interval" $((secs + 600)) >"$T/trickle.out" 2>&1 &
    trickle=$!
    E2E_BG_PIDS+=("$trickle")
    start=$SECONDS
    wait_until 30 "a slow client connected from 127.0.0.2" slow_client_connected
    for ((i = 1; i <= probes || SECONDS - start < secs; i++)); do
        for path in healthz metrics; do
            t0=$(date +%s%N)
            code=$(curl -s -o /dev/null -m 3 -w '%{http_code}' "http://127.0.0.1:$port/$path") || true
            ms=$((($(date +%s%N) - t0) / 1000000))
            [[ "$code" == 200 ]] ||
                fail "probe $i: /$path answered '${code:-nothing}' after $ms ms while the slow clients are connected"
            info "ok: probe $i: /$path 200 in $ms ms"
        done
        kill -0 "$trickle" 2>/dev/null || fail "the slow clients ended early: $(cat "$T/trickle.out")"
        sleep 2
    done
    kill -TERM "$trickle"
    wait "$trickle" || fail "outboxd-trickle failed: $(cat "$T/trickle.out")"
    info "slow clients: $(cat "$T/trickle.out")"
}
slow_client_connected() {
    [[ -n "$(ss -Htn state established src 127.0.0.2 dst "127.0.0.1:$port" 2>/dev/null)" ]]
}
# One byte every 5 s: the idle timeout closes them (and the per-IP limit
# bounds them); one byte per second beats the timeout: only the per-IP
# limit keeps connections free.
slow_clients 5000 20 7
slow_clients 1000 12 4
outboxd_assert_running
outboxd_stop || fail "outboxd exited $OUTBOXD_RC after SIGTERM"

step "[http] listen = localhost:PORT"
hport=$(_free_port)
OUTBOXD_HTTP_LISTEN=localhost:$hport outboxd_start
grep -q "http: serving /metrics, /healthz and /readyz on localhost:$hport (port $hport)" "$T/outboxd.log" ||
    fail "no 'serving on localhost:$hport' line"
code=$(curl -s -o "$T/h.body" -m 5 -w '%{http_code}' "http://127.0.0.1:$hport/healthz") || true
assert_eq 200 "$code" "/healthz on 127.0.0.1:$hport (localhost)"
grep -q '^ok: event loop turned' "$T/h.body" || fail "unexpected body: $(cat "$T/h.body")"
outboxd_stop || fail "outboxd exited $OUTBOXD_RC after SIGTERM"
e2e_pass
