#!/usr/bin/env bash
# tests/debezium/debezium.sh - real Debezium (PostgreSQL connector + Outbox
# Event Router) in Kafka Connect standalone, beside outboxd in the tests:
# the way users run Debezium's outbox, so the producer is Connect's (the
# Java Kafka client), not an embedded engine.
#
#   debezium.sh resolve          jars into the cache (once per machine, Maven
#                                Central, tests/debezium/pom.xml); prints the
#                                folder
#   debezium.sh start DIR        writes DIR/worker.properties,
#                                DIR/connector.properties and
#                                DIR/log4j2.properties, starts Connect in the
#                                background, in its own session (pid in
#                                DIR/connect.pid, log in DIR/connect.log,
#                                stdout/stderr in DIR/connect.out, REST port
#                                in DIR/rest.port), waits until the connector
#                                and its task are RUNNING and the slot is
#                                active, and prints the REST base URL; the
#                                time that took is left in DIR/start.ms. On
#                                failure it kills the JVM, prints the log's
#                                first errors and last lines, exits 1.
#                                DIR/offsets.dat (Connect's source offsets)
#                                is kept, so a second start of the same DIR
#                                resumes where the first stopped. The caller
#                                stops it (stop or kill DIR, e.g. in its EXIT
#                                trap): it does not die with the caller
#   debezium.sh stop DIR         SIGTERM (Connect stops the task, flushes its
#                                producer and offsets), waits for the exit;
#                                after DBZ_STOP_TIMEOUT (60) s a thread dump
#                                (into DIR/connect.out), SIGKILL, exit 1
#   debezium.sh kill DIR         SIGKILL
#   debezium.sh status DIR       the connector's REST status JSON
#   debezium.sh pid DIR          the JVM's process id ("" if not running)
#
# Settings for start (environment):
#   DBZ_PG_HOST, DBZ_PG_PORT     PostgreSQL (default 127.0.0.1, $PGPORT)
#   DBZ_PG_USER, DBZ_PG_PASSWORD the connector's role (default postgres, ""
#                                - an empty password is left out)
#   DBZ_PG_DB                    the database (default postgres)
#   DBZ_SLOT                     slot.name (default debezium); Debezium
#                                creates it if it does not exist
#   DBZ_PUBLICATION              publication.name (default dbz_publication);
#                                publication.autocreate.mode=disabled: the
#                                caller creates it
#   DBZ_TABLE                    table.include.list (default public.outbox)
#   DBZ_BOOTSTRAP                bootstrap.servers (default $KAFKA_BOOTSTRAP)
#   DBZ_TOPIC_PREFIX             the connector's topic.prefix (default dbz.),
#                                also put before the routed topic:
#                                route.topic.replacement =
#                                ${DBZ_TOPIC_PREFIX}outbox.event.${routedByValue}
#                                so outboxd (outbox.event.*) and Debezium can
#                                share one broker. A trailing '.' is dropped
#                                for topic.prefix itself
#   DBZ_NAME                     the connector's name (default debezium-outbox)
#   DBZ_HEAP                     JVM heap options (default -Xmx512m)
#   DBZ_JAVA_OPTS                more JVM options (word-split)
#   DBZ_ROUTER_EXTRA             more Outbox Event Router settings, newline
#                                separated, appended to the connector's;
#                                "transforms.outbox." is added to a line
#                                without it (e.g.
#                                route.tombstone.on.empty.payload=true)
#   DBZ_CONNECTOR_EXTRA          more connector lines (newline separated)
#   DBZ_WORKER_EXTRA             more worker lines (newline separated), e.g.
#                                producer.max.request.size=16777216
#   DBZ_START_TIMEOUT            seconds to wait for RUNNING (default 180)
# Later lines win, so the *_EXTRA variables override the defaults below.
#
# Defaults written: plugin.name=pgoutput, snapshot.mode=no_data (stream
# only, from the slot's position), tombstones.on.delete=false,
# transforms=outbox (io.debezium.transforms.outbox.EventRouter, its
# defaults otherwise: Debezium's outbox columns id, aggregatetype,
# aggregateid, type, payload); worker: StringConverter for keys and values
# (a jsonb payload is a String in Debezium, so the value is its text),
# the default SimpleHeaderConverter, offsets in DIR/offsets.dat flushed
# every second, producer.acks=all and producer.enable.idempotence=true (the
# settings users are told to use for no loss), REST on a free 127.0.0.1
# port, no plugin.path (one class path: the cache folder) and
# plugin.discovery=service_load (every plugin on it has a ServiceLoader
# manifest; the default hybrid_warn also scans the class path reflectively,
# 5-7.5 s more per start on 2 cores and about 450 MB more peak RSS, and
# logs a warning saying so).
# Debezium 3.6 adds four headers of its own to every record,
# __debezium.context.{connectorLogicalName,taskId,connectorName,runId}
# (connector setting extended.headers.enabled, default true), beside the
# router's "id" header.
# The cache is ${DEBEZIUM_TEST_CACHE:-$HOME/.cache/outboxd-debezium}/DEBEZIUM_VERSION.
# Needs java (17+), mvn (resolve), curl, jq and psql.
set -euo pipefail

DBZ_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DBZ_VERSION=$(sed -n 's:.*<debezium.version>\(.*\)</debezium.version>.*:\1:p' "$DBZ_DIR/pom.xml")
CACHE_ROOT=${DEBEZIUM_TEST_CACHE:-$HOME/.cache/outboxd-debezium}

die() {
    echo "debezium.sh: $*" >&2
    exit 1
}

# ---------------------------------------------------------------- jars

lib_dir() { echo "$CACHE_ROOT/$DBZ_VERSION"; }

resolve() {
    local lib
    lib=$(lib_dir)
    if [[ -f "$lib/.complete" ]]; then
        echo "$lib"
        return 0
    fi
    command -v mvn >/dev/null || die "mvn not found: install Maven (Debian: apt-get install maven)"
    command -v java >/dev/null || die "java not found: install a JDK 17+ (Debian: openjdk-17-jdk-headless)"
    rm -rf "$lib"
    mkdir -p "$lib"
    mvn -q -B -Dstyle.color=never -f "$DBZ_DIR/pom.xml" \
        dependency:copy-dependencies -DoutputDirectory="$lib" >&2 ||
        die "could not resolve Debezium $DBZ_VERSION and Kafka Connect from Maven Central"
    ls "$lib"/debezium-connector-postgres-"$DBZ_VERSION".jar "$lib"/connect-runtime-*.jar >/dev/null 2>&1 ||
        die "debezium-connector-postgres or connect-runtime missing after resolving"
    touch "$lib/.complete"
    echo "$lib"
}

# ---------------------------------------------------------------- ports

source "$DBZ_DIR/../free_port.sh"

# ---------------------------------------------------------------- config

# extra_lines TEXT [PREFIX]: TEXT's non-empty lines, PREFIX put before a
# line that does not start with it.
extra_lines() {
    local line
    while IFS= read -r line; do
        [[ -n "${line//[[:space:]]/}" ]] || continue
        if [[ -n "${2:-}" && "$line" != "$2"* ]]; then
            line="$2$line"
        fi
        printf '%s\n' "$line"
    done <<<"$1"
}

write_config() { # DIR PORT
    local dir=$1 port=$2 prefix=${DBZ_TOPIC_PREFIX-dbz.} tp
    tp=${prefix%.}
    [[ -n "$tp" ]] || tp=dbz
    cat >"$dir/worker.properties" <<EOF
# written by tests/debezium/debezium.sh
bootstrap.servers=$DBZ_BOOTSTRAP
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.storage.StringConverter
offset.storage.file.filename=$dir/offsets.dat
offset.flush.interval.ms=1000
producer.acks=all
producer.enable.idempotence=true
listeners=http://127.0.0.1:$port
rest.advertised.host.name=127.0.0.1
rest.advertised.port=$port
plugin.discovery=service_load
EOF
    extra_lines "${DBZ_WORKER_EXTRA:-}" >>"$dir/worker.properties"

    {
        cat <<EOF
# written by tests/debezium/debezium.sh
name=$DBZ_NAME
connector.class=io.debezium.connector.postgresql.PostgresConnector
tasks.max=1
plugin.name=pgoutput
database.hostname=${DBZ_PG_HOST:-127.0.0.1}
database.port=${DBZ_PG_PORT:-${PGPORT:-5432}}
database.user=${DBZ_PG_USER:-postgres}
database.dbname=${DBZ_PG_DB:-postgres}
topic.prefix=$tp
slot.name=$DBZ_SLOT
publication.name=${DBZ_PUBLICATION:-dbz_publication}
publication.autocreate.mode=disabled
snapshot.mode=no_data
table.include.list=${DBZ_TABLE:-public.outbox}
tombstones.on.delete=false
transforms=outbox
transforms.outbox.type=io.debezium.transforms.outbox.EventRouter
transforms.outbox.route.topic.replacement=${prefix}outbox.event.\${routedByValue}
EOF
        [[ -z "${DBZ_PG_PASSWORD:-}" ]] || echo "database.password=$DBZ_PG_PASSWORD"
        extra_lines "${DBZ_ROUTER_EXTRA:-}" transforms.outbox.
        extra_lines "${DBZ_CONNECTOR_EXTRA:-}"
    } >"$dir/connector.properties"

    cat >"$dir/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $dir/connect.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
EOF
}

# ---------------------------------------------------------------- process

connect_pid() { # DIR: prints the pid if the process lives
    local f="$1/connect.pid" p
    [[ -s "$f" ]] || return 0
    p=$(cat "$f")
    kill -0 "$p" 2>/dev/null && echo "$p"
    return 0
}

log_tail() { # DIR: the first ERROR lines of the log, then its last lines
    echo "----- first errors in $1/connect.log -----"
    grep -m 5 -E '^\[[^]]*\] (ERROR|FATAL) ' "$1/connect.log" 2>/dev/null | cut -c1-600 || true
    tail -n "${DBZ_LOG_LINES:-30}" "$1/connect.out" "$1/connect.log" 2>&1 | cut -c1-600
}

rest_status() { # DIR: the status JSON (curl's exit status on failure)
    curl -sf -m 5 "http://127.0.0.1:$(cat "$1/rest.port")/connectors/$(cat "$1/name")/status"
}

slot_active() { # SLOT: t when the slot exists and a walsender uses it
    PGPASSWORD=${DBZ_PG_PASSWORD:-${PGPASSWORD:-}} psql -XAtq -v ON_ERROR_STOP=1 \
        "host=${DBZ_PG_HOST:-127.0.0.1} port=${DBZ_PG_PORT:-${PGPORT:-5432}} user=${DBZ_PG_USER:-postgres} dbname=${DBZ_PG_DB:-postgres}" \
        -c "SELECT active FROM pg_replication_slots WHERE slot_name = '$1'" 2>/dev/null
}

start() {
    local dir=$1 lib port i st cstate tstate t0 timeout=${DBZ_START_TIMEOUT:-180}
    command -v java >/dev/null || die "java not found"
    command -v curl >/dev/null || die "curl not found"
    command -v jq >/dev/null || die "jq not found"
    command -v psql >/dev/null || die "psql not found"
    : "${DBZ_BOOTSTRAP:=${KAFKA_BOOTSTRAP:-}}"
    [[ -n "$DBZ_BOOTSTRAP" ]] || die "DBZ_BOOTSTRAP (or KAFKA_BOOTSTRAP) is not set"
    : "${DBZ_SLOT:=debezium}" "${DBZ_NAME:=debezium-outbox}"
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [[ -z "$(connect_pid "$dir")" ]] || die "Connect is already running in $dir (pid $(cat "$dir/connect.pid"))"
    lib=$(resolve)
    port=$(free_port)
    echo "$port" >"$dir/rest.port"
    echo "$DBZ_NAME" >"$dir/name"
    echo "$DBZ_SLOT" >"$dir/slot"
    echo "$lib" >"$dir/lib"
    write_config "$dir" "$port"
    rm -f "$dir/connect.pid"
    t0=$(date +%s%N)
    (
        exec </dev/null >>"$dir/connect.out" 2>&1
        # shellcheck disable=SC2016,SC2086
        setsid bash -c 'echo $$ >"$1/connect.pid"; shift; exec "$@"' _ "$dir" \
            java ${DBZ_HEAP:--Xmx512m} ${DBZ_JAVA_OPTS:-} -Djava.awt.headless=true \
            -Dlog4j2.configurationFile="$dir/log4j2.properties" \
            -cp "$lib/*" org.apache.kafka.connect.cli.ConnectStandalone \
            "$dir/worker.properties" "$dir/connector.properties" &
    )
    for ((i = 0; i < 50; i++)); do
        [[ -s "$dir/connect.pid" ]] && break
        sleep 0.1
    done
    [[ -s "$dir/connect.pid" ]] || die "Connect did not start"
    # From here on a failed start kills the JVM it started (it would hold
    # the slot and the REST port otherwise).
    start_fail() {
        stop "$dir" KILL || true
        die "$@"
    }
    for ((i = 0; i < timeout * 5; i++)); do
        [[ -n "$(connect_pid "$dir")" ]] ||
            start_fail "Connect exited while starting: $(log_tail "$dir")"
        if st=$(rest_status "$dir" 2>/dev/null); then
            cstate=$(jq -r '.connector.state // ""' <<<"$st")
            tstate=$(jq -r '.tasks[0].state // ""' <<<"$st")
            if [[ "$cstate" == FAILED || "$tstate" == FAILED ]]; then
                start_fail "connector $DBZ_NAME FAILED: $(jq -r '[.connector.trace // empty, .tasks[0].trace // empty] | join("\n")' <<<"$st" | head -n 20)
$(log_tail "$dir")"
            fi
            if [[ "$cstate" == RUNNING && "$tstate" == RUNNING && "$(slot_active "$DBZ_SLOT")" == t ]]; then
                echo "$(( ($(date +%s%N) - t0) / 1000000 ))" >"$dir/start.ms"
                echo "http://127.0.0.1:$port"
                return 0
            fi
        fi
        sleep 0.2
    done
    start_fail "connector $DBZ_NAME not RUNNING with slot $DBZ_SLOT active within ${timeout}s (status: ${st:-no answer}): $(log_tail "$dir")"
}

stop() { # DIR SIGNAL
    local dir=$1 sig=$2 p i timeout=${DBZ_STOP_TIMEOUT:-60}
    p=$(connect_pid "$dir")
    [[ -n "$p" ]] || { rm -f "$dir/connect.pid"; return 0; }
    kill "-$sig" "$p" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do
        kill -0 "$p" 2>/dev/null || { rm -f "$dir/connect.pid"; return 0; }
        sleep 0.1
    done
    # A thread dump (SIGQUIT: the JVM prints it on its stdout) says where
    # the shutdown hung.
    kill -QUIT "$p" 2>/dev/null && sleep 1
    kill -KILL "$p" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    rm -f "$dir/connect.pid"
    echo "debezium.sh: Connect did not stop within $timeout s of SIG$sig; killed (thread dump in $dir/connect.out)" >&2
    return 1
}

cmd=${1:-}
shift || true
case $cmd in
resolve) resolve ;;
start) (($# == 1)) || die "usage: start DIR"; start "$1" ;;
stop) (($# == 1)) || die "usage: stop DIR"; stop "$1" TERM ;;
kill) (($# == 1)) || die "usage: kill DIR"; stop "$1" KILL ;;
status)
    (($# == 1)) || die "usage: status DIR"
    [[ -f "$1/rest.port" ]] || die "no Connect in $1"
    rest_status "$1" || die "no answer from Connect's REST API on port $(cat "$1/rest.port")"
    echo ;;
pid) (($# == 1)) || die "usage: pid DIR"; connect_pid "$1" ;;
*) die "usage: debezium.sh resolve|start|stop|kill|status|pid ..." ;;
esac
