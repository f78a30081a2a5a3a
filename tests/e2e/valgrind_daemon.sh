#!/usr/bin/env bash
# A normal start - stream - stop run of the daemon under valgrind memcheck:
# no invalid access, no definite or indirect leak (valgrind exits 99 then),
# and the events still arrive. Both plugins, one after the other; with
# heartbeats, the monitoring connection and HTTP scrapes (the server's
# thread) in the run.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
E2E_TIMEOUT=600
e2e_init valgrind_daemon
pg_start
broker_start
# --soname-synonyms: the daemon links jemalloc (CMakeLists.txt), whose
# malloc valgrind must replace to see the heap at all.
export OUTBOXD_WRAPPER="valgrind --soname-synonyms=somalloc=*jemalloc* --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect"

for plugin in pgoutput wal2json; do
    export OUTBOXD_TEST_PLUGIN=$plugin OUTBOXD_SLOT=vg_$plugin
    step "outboxd under valgrind ($plugin)"
    outboxd_start --set "offsets.file=$T/$plugin.offset" --set "outbox.topic=$plugin.\${aggregate_type}" \
        --set postgres.heartbeat_interval_ms=200 --set postgres.monitor_interval_ms=200
    psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
            SELECT gen_random_uuid(), 'Order', 'o-' || (i % 10), i, 'Created', jsonb_build_object('i', i, 'note', 'Zoë')
            FROM generate_series(1, 500) AS i"
    psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
            VALUES (gen_random_uuid(), 'Order', 'o-big', 'Big', jsonb_build_object('blob', repeat('x', 100000)))"
    wait_caught_up 120
    for path in metrics healthz readyz; do
        # ready once librdkafka's first statistics say a broker is up
        deadline=$((SECONDS + 90))
        while :; do
            http_get "/$path" >/dev/null
            [[ "$HTTP_STATUS" == 200 ]] && break
            ((SECONDS < deadline)) || break
            sleep 0.3
        done
        [[ "$HTTP_STATUS" == 200 ]] || fail "/$path answered $HTTP_STATUS under valgrind for 90 s: $(cat "$T/http.body")"
    done
    # The first heartbeat needs the monitor's connection, slow under
    # valgrind: wait for it (the snapshot is published every 500 ms), as
    # long as a loaded machine may take (20 s was too little once in CI).
    deadline=$((SECONDS + 90))
    while :; do
        grep -q '^outboxd_heartbeats_received_total [1-9]' <(http_get /metrics) && break
        ((SECONDS < deadline)) || break
        sleep 0.2
    done
    grep -q '^outboxd_heartbeats_received_total [1-9]' <(http_get /metrics) ||
        fail "no heartbeat came back under valgrind within 90 s"
    rc=0
    outboxd_stop 120 || rc=$?
    if [[ $rc -ne 0 ]]; then
        grep -E '^==[0-9]+==' "$T/outboxd.log" | head -60 >&2 || true
        fail "outboxd under valgrind exited with $rc (99: valgrind found errors or leaks)"
    fi
    n=$(kdump_all | jq -r "select(.topic == \"$plugin.Order\") | .headers.event_id" | sort -u | wc -l)
    # the slot of each round is created when outboxd starts: it sees its own 501
    assert_eq 501 "$n" "events delivered under valgrind ($plugin)"
done
e2e_pass
