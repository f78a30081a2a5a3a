#!/usr/bin/env bash
# The Grafana dashboard (deploy/grafana/outboxd.json) and the alert rules
# (deploy/prometheus/outboxd-alerts.yml) against a real Prometheus server
# (Debian's prometheus package) that scrapes two live outboxd: one in
# logical mode under load, one in polling mode with a backlog.
#
#  - every metric a panel names is one outboxd exports (the names
#    Prometheus scraped from both); the check itself is tried on a name
#    that does not exist, and must refuse it;
#  - every panel's every query, its variables set to match all ($job,
#    $instance: ".*"; $__rate_interval: 15s), evaluated through
#    Prometheus's HTTP API, returns at least one series;
#  - the alert rules load in the same server (its rules API lists them),
#    and OutboxdSlotLost is seen firing there once the logical instance
#    halts on a dropped slot.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init dashboard
command -v prometheus >/dev/null || fail "prometheus is not installed (Debian package prometheus)"
DASH=$E2E_SRC_DIR/deploy/grafana/outboxd.json
RULES=$E2E_SRC_DIR/deploy/prometheus/outboxd-alerts.yml
jq -e '.panels | length > 0' "$DASH" >/dev/null || fail "$DASH is not a dashboard with panels"

pg_start
broker_start
create_load_procedure

# ---------------------------------------------------------------- outboxd

step "logical mode: outboxd A under load"
# A fixed port: Prometheus scrapes the same target after A's restart.
OUTBOXD_HTTP_LISTEN=127.0.0.1:$(free_port)
outboxd_start
psql_q "CALL public.load(300, 50, 2, 'warm')"
wait_caught_up 60
port_a=$(outboxd_http_port)
# A writer that keeps events flowing while Prometheus scrapes.
{
    _close_sess_fds
    while :; do psql_q "CALL public.load(40, 50, 2, 'live')" >/dev/null 2>&1 || true; done
} &
WRITER=$!
E2E_BG_PIDS+=("$WRITER")

step "polling mode: outboxd B on a database of its own, with a backlog"
psql_q "CREATE DATABASE polling"
psql -XAtq -v ON_ERROR_STOP=1 -d polling -f "$E2E_SRC_DIR/sql/outbox_polling.sql" >"$T/polling_schema.log" 2>&1 ||
    { cat "$T/polling_schema.log" >&2; fail "loading sql/outbox_polling.sql failed"; }
psql -XAtq -v ON_ERROR_STOP=1 -d polling <<'SQL' >/dev/null
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
SELECT gen_random_uuid(), 'Order', 'p-' || g, 'Placed', jsonb_build_object('g', g)
FROM generate_series(1, 200) g;
-- undelivered rows nobody claims: the backlog gauges have series
INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type,
                                  created_at, status, attempts, next_attempt_at)
SELECT gen_random_uuid(), 'Order', 'later-' || g, 'Placed', now() - interval '1 hour',
       'PENDING', 1, now() + interval '1 day'
FROM generate_series(1, 3) g;
SQL
cat >"$T/polling.ini" <<EOF
[postgres]
conninfo = ${PG_CONNINFO/dbname=postgres/dbname=polling}

[source]
mode = polling

[polling]
owner_id = B
poll_interval_ms = 200

[kafka]
bootstrap.servers = $KAFKA_BOOTSTRAP

[log]
level = info

[http]
listen = 127.0.0.1:0
EOF
{ _close_sess_fds; exec "${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" -c "$T/polling.ini" >"$T/polling.log" 2>&1 </dev/null; } &
POLLING_PID=$!
E2E_BG_PIDS+=("$POLLING_PID")
wait_until 30 "outboxd B serves /metrics" grep -q "http: serving /metrics" "$T/polling.log"
port_b=$(outboxd_http_port "$T/polling.log")

# ---------------------------------------------------------------- prometheus

step "Prometheus scrapes both every second and loads the alert rules"
PROM_PORT=$(free_port)
cp "$RULES" "$T/outboxd-alerts.yml"
cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [outboxd-alerts.yml]
scrape_configs:
  - job_name: outboxd
    static_configs:
      - targets: ['127.0.0.1:$port_a', '127.0.0.1:$port_b']
EOF
{
    _close_sess_fds
    exec prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/prom-data" \
        --web.listen-address="127.0.0.1:$PROM_PORT" >"$T/prometheus.log" 2>&1 </dev/null
} &
E2E_BG_PIDS+=("$!")
PROM=http://127.0.0.1:$PROM_PORT

# prom_query EXPR: the JSON answer of an instant query (status checked).
prom_query() {
    local out
    out=$(curl -s -m 10 -G "$PROM/api/v1/query" --data-urlencode "query=$1") || return 1
    jq -e '.status == "success"' <<<"$out" >/dev/null || { echo "$out" >&2; return 1; }
    echo "$out"
}
targets_up() { [[ $(prom_query 'count(up{job="outboxd"} == 1)' 2>/dev/null | jq -r '.data.result[0].value[1] // 0') == 2 ]]; }
wait_until 60 "Prometheus has both outboxd targets up" targets_up
info "both targets up ($PROM)"

# ---------------------------------------------------------------- names

# Every outboxd_* metric name Prometheus scraped from the two (histograms
# as their _bucket/_sum/_count series).
scraped_names() {
    curl -s -m 10 "$PROM/api/v1/label/__name__/values" |
        jq -r '.data[] | select(startswith("outboxd_"))' | sort -u
}
wait_until 30 "Prometheus has outboxd's metrics of both modes" \
    bash -c "curl -s '$PROM/api/v1/label/__name__/values' | grep -q outboxd_polling_backlog_rows"
scraped_names >"$T/names.txt"
info "$(wc -l <"$T/names.txt") outboxd metric names scraped"

# unknown_names EXPR...: the outboxd_* names in the expressions that
# Prometheus did not scrape (none: prints nothing).
unknown_names() {
    printf '%s\n' "$@" | grep -o 'outboxd_[a-z0-9_]*' | sort -u | grep -vxF -f "$T/names.txt" || true
}
bogus=$(unknown_names 'rate(outboxd_events_sent_totally[5m])')
assert_eq outboxd_events_sent_totally "$bogus" "the name check on a metric outboxd does not export"

mapfile -t EXPRS < <(jq -r '.panels[] | .targets[]? | .expr' "$DASH")
((${#EXPRS[@]} >= 16)) || fail "only ${#EXPRS[@]} queries in $DASH"
unknown=$(unknown_names "${EXPRS[@]}")
[[ -z $unknown ]] || fail "the dashboard names metrics outboxd does not export: $unknown"
mapfile -t VARQ < <(jq -r '.templating.list[] | select(.type == "query") | .definition' "$DASH")
unknown=$(unknown_names "${VARQ[@]}")
[[ -z $unknown ]] || fail "the dashboard's variables name metrics outboxd does not export: $unknown"
info "all ${#EXPRS[@]} panel queries and ${#VARQ[@]} variables name exported metrics"

# ---------------------------------------------------------------- queries

# with_vars EXPR: the expression as Grafana sends it with "All" selected.
with_vars() {
    local e=$1
    e=${e//\$__rate_interval/15s}
    e=${e//\$job/.*}
    e=${e//\$instance/.*}
    printf '%s' "$e"
}
# series EXPR: how many series the expression returns now.
series() { prom_query "$(with_vars "$1")" | jq -r '.data.result | length'; }

step "every panel query returns a series"
deadline=$((SECONDS + 90))
left=("${EXPRS[@]}")
while ((${#left[@]} > 0)); do
    still=()
    for e in "${left[@]}"; do
        n=$(series "$e") || fail "Prometheus refused the query: $(with_vars "$e")"
        if ((n > 0)); then info "$n series: $(with_vars "$e")"; else still+=("$e"); fi
    done
    left=("${still[@]}")
    ((${#left[@]} == 0)) && break
    ((SECONDS < deadline)) || fail "no series within 90 s for: $(printf '\n  %s' "${left[@]}")"
    sleep 1
done
# The variables' own queries: label_values(M, L) is Grafana's; Prometheus
# answers the same with /api/v1/label/L/values?match[]=M.
for q in "${VARQ[@]}"; do
    [[ $q =~ ^label_values\((.*),\ *([a-z_]+)\)$ ]] || fail "variable query '$q' is not label_values(METRIC, LABEL)"
    m=$(with_vars "${BASH_REMATCH[1]}") l=${BASH_REMATCH[2]}
    n=$(curl -s -m 10 -G "$PROM/api/v1/label/$l/values" --data-urlencode "match[]=$m" | jq -r '.data | length')
    ((n > 0)) || fail "variable query $q gives no values"
    info "variable $q: $n values"
done
# The load really moved the counters the rate panels show.
n=$(prom_query 'sum(rate(outboxd_events_acked_total{job="outboxd"}[15s])) > 0' | jq -r '.data.result | length')
assert_eq 1 "$n" "events ACKed per second > 0 under load"

# ---------------------------------------------------------------- alerts

step "the alert rules are loaded, and OutboxdSlotLost fires when A halts on a dropped slot"
nrules=$(curl -s -m 10 "$PROM/api/v1/rules" | jq '[.data.groups[].rules[] | select(.type == "alerting")] | length')
want=$(grep -c '^ *- alert:' "$RULES")
assert_eq "$want" "$nrules" "alerting rules Prometheus loaded from $RULES"
kill "$WRITER" 2>/dev/null || true
wait "$WRITER" 2>/dev/null || true
wait_caught_up 60
outboxd_stop || fail "outboxd A exited $OUTBOXD_RC on SIGTERM"
psql_q "SELECT pg_drop_replication_slot('${OUTBOXD_SLOT:-outboxd}')" >/dev/null
outboxd_start --no-wait --set postgres.halt_linger=120s
wait_until 30 "outboxd A halts on the missing slot" grep -q 'halted: serving /readyz' "$T/outboxd.log"
firing() {
    curl -s -m 10 "$PROM/api/v1/alerts" |
        jq -e '.data.alerts[] | select(.labels.alertname == "OutboxdSlotLost" and .state == "firing")' >/dev/null
}
wait_until 60 "OutboxdSlotLost firing in Prometheus" firing
info "OutboxdSlotLost is firing: $(curl -s "$PROM/api/v1/alerts" | jq -c '[.data.alerts[] | select(.state == "firing") | .labels.alertname]')"
e2e_pass
