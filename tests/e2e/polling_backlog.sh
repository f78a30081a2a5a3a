#!/usr/bin/env bash
# Polling mode, the backlog: rows that are not delivered (PENDING not due
# yet, CLAIMED under another relay's live lease, QUARANTINED) beside SENT
# ones. `outboxd check` reports them in one line; /metrics has the rows
# by status, the age of the oldest row of each status by created_at, the
# most attempts, and the table's size, each equal to what SQL says; the
# gauges follow new rows at the next backlog query (every 15 s), and every
# polling metric the alert rules use has a sample.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/polling_lib.sh"
e2e_init polling_backlog
command -v promtool >/dev/null || fail "promtool is not installed (Debian package prometheus)"
pg_start
broker_start
polling_schema

# rows N STATUS AGE ATTEMPTS: N rows nobody claims (not due, or leased by
# "elsewhere" for a day), created AGE ago, with ATTEMPTS failed attempts.
rows() {
    psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type,
                created_at, status, attempts, next_attempt_at, lease_owner, lease_until, sent_at)
            SELECT gen_random_uuid(), 'Order', 'agg-$2-' || g || '-' || random(), 'Tick',
                   now() - interval '$3', '$2', $4, now() + interval '1 day',
                   CASE WHEN '$2' = 'CLAIMED' THEN 'elsewhere' END,
                   CASE WHEN '$2' = 'CLAIMED' THEN now() + interval '1 day' END,
                   CASE WHEN '$2' = 'SENT' THEN now() END
            FROM generate_series(1, $1) g"
}
rows 5 SENT '3 hours' 0
rows 3 PENDING '1 hour' 2
rows 1 PENDING '10 minutes' 4
rows 1 CLAIMED '30 minutes' 1
rows 2 QUARANTINED '2 hours' 5

# sql_backlog STATUS: "rows|oldest age s|max attempts" of STATUS, by SQL.
sql_backlog() {
    psql_q "SELECT count(*) || '|' || coalesce(floor(extract(epoch FROM now() - min(created_at))), 0)
                   || '|' || coalesce(max(attempts), 0)
            FROM public.outbox_events WHERE status = '$1'"
}
table_bytes() { psql_q "SELECT pg_total_relation_size('public.outbox_events')"; }

step "outboxd check: the backlog in one line"
relay_ini C
rc=0
"${OUTBOXD_ENV[@]}" "$OUTBOXD_BUILD_DIR/outboxd" check -c "$T/relay.C.ini" >"$T/check.out" 2>&1 || rc=$?
assert_eq 0 "$rc" "outboxd check exit status ($(cat "$T/check.out"))"
line=$(grep '^ok   polling backlog: ' "$T/check.out") ||
    { cat "$T/check.out" >&2; fail "no 'ok   polling backlog' line"; }
size=$(awk -v n="$(table_bytes)" 'BEGIN { v = n / 1024; u = "KiB"; if (v >= 1024) { v /= 1024; u = "MiB" } printf "%.1f %s", v, u }')
assert_eq "ok   polling backlog: 7 undelivered rows: 4 pending, 1 claimed, 2 quarantined; oldest created 2h 0m ago (quarantined); at most 5 failed attempts; table $size" \
    "$line" "check's backlog line"

step "the backlog gauges equal what SQL says"
relay_start A
HTTP_LOG=$T/relay.A.log
wait_log A 'http: serving /metrics' 30
m() { awk -v k="$1" '$1 == k { print $2; exit }' "$T/metrics.txt"; }
scrape() {
    http_get /metrics >"$T/metrics.txt"
    [[ "$HTTP_STATUS" == 200 ]] || fail "/metrics answered $HTTP_STATUS"
}
for _ in $(seq 1 150); do
    scrape
    [[ -n "$(m 'outboxd_polling_backlog_rows{status="pending"}')" ]] && break
    sleep 0.2
done
promtool check metrics <"$T/metrics.txt" >"$T/promtool.out" 2>&1 ||
    { cat "$T/promtool.out" >&2; fail "promtool check metrics rejected /metrics"; }
for st in PENDING CLAIMED QUARANTINED; do
    l=${st,,}
    IFS='|' read -r n age att <<<"$(sql_backlog "$st")"
    assert_eq "$n" "$(m "outboxd_polling_backlog_rows{status=\"$l\"}")" "rows $l"
    assert_eq "$att" "$(m "outboxd_polling_backlog_max_attempts{status=\"$l\"}")" "max attempts $l"
    got=$(m "outboxd_polling_backlog_oldest_age_seconds{status=\"$l\"}")
    # The gauge is from the last query (at most 15 s before SQL's now()).
    awk -v g="$got" -v a="$age" 'BEGIN { exit !(g != "" && g <= a + 1 && g >= a - 20) }' ||
        fail "oldest age $l: /metrics says '$got', SQL $age s"
    info "ok: $l: $n rows, oldest ${got}s (SQL ${age}s), at most $att attempts"
done
assert_eq "$(table_bytes)" "$(m outboxd_polling_table_bytes)" "table bytes"
assert_eq 5 "$(psql_q "SELECT count(*) FROM public.outbox_events WHERE status = 'SENT'")" "SENT rows (not in the backlog)"

step "every polling metric the alert rules use has a sample"
n=0
for name in $(grep -o 'outboxd_polling_[a-z_]*' "$E2E_SRC_DIR/deploy/prometheus/outboxd-alerts.yml" | sort -u); do
    awk -v n="$name" '$1 == n || index($1, n "{") == 1 { f = 1 } END { exit !f }' "$T/metrics.txt" ||
        fail "deploy/prometheus/outboxd-alerts.yml uses $name, which has no sample in /metrics"
    n=$((n + 1))
done
((n > 0)) || fail "the alert rules use no outboxd_polling_ metric"
info "ok: the $n polling metrics of the alert rules have samples"

step "new rows show at the next backlog query (within 15 s)"
rows 6 PENDING '1 minute' 0
t0=$SECONDS
for _ in $(seq 1 100); do
    scrape
    [[ "$(m 'outboxd_polling_backlog_rows{status="pending"}')" == 10 ]] && break
    sleep 0.3
done
assert_eq 10 "$(m 'outboxd_polling_backlog_rows{status="pending"}')" "pending rows after 6 more"
info "ok: seen after $((SECONDS - t0)) s"
assert_eq "$(table_bytes)" "$(m outboxd_polling_table_bytes)" "table bytes after 6 more"
relay_stop A
e2e_pass
