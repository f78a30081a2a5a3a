#!/usr/bin/env bash
# tests/kafka/kafka.sh - a real Apache Kafka cluster (KRaft, no ZooKeeper)
# for the tests, on free loopback ports, in a directory of the caller's.
#
#   kafka.sh resolve [VERSION]        jars into the cache (once per machine);
#                                     prints the folder
#   kafka.sh start DIR N [VERSION]    formats and starts N brokers (N = 1: one
#                                     combined broker+controller, RF 1; N > 1:
#                                     one controller and N brokers, RF N,
#                                     min.insync.replicas 2); waits until every
#                                     broker answers metadata; prints the
#                                     bootstrap servers
#   kafka.sh bootstrap DIR [LISTENER] prints the bootstrap servers (of the
#                                     PLAINTEXT listener, or of an extra one)
#   kafka.sh admin DIR OP...          creates topics and ACLs in one JVM
#                                     start (tests/kafka/Admin.java: OPs
#                                     topic:NAME:PARTITIONS[:K=V,...],
#                                     allow|deny:User:NAME:OPERATION:TOPIC)
#   kafka.sh tool DIR CLASS ARGS...   runs one of Kafka's command-line tools
#                                     with the cluster's jars, e.g.
#                                     kafka.admin.TopicCommand or
#                                     kafka.admin.AclCommand (a JVM start:
#                                     batch the work into few calls)
#   kafka.sh stop DIR I               controlled shutdown of broker I (SIGTERM,
#                                     waits for the process to end)
#   kafka.sh kill DIR I               SIGKILL of broker I
#   kafka.sh restart DIR I            starts broker I again, data kept; waits
#                                     until it answers metadata
#   kafka.sh down DIR | up DIR        every broker stopped / started again
#                                     (the controller stays up)
#   kafka.sh pid DIR I                the process id of broker I ("" if down)
#   kafka.sh destroy DIR              every process of the cluster killed
#
# Brokers are numbered 1..N (their node.id); the controller of a multi-broker
# cluster is node 100 and is never a fault target (the fault suite is about
# brokers and partition leaders, not the metadata quorum).
# Extra settings for start (read once, when the cluster is formatted):
#   KAFKA_EXTRA_LISTENERS="NAME[:PROTOCOL] ..."  one more listener each (e.g.
#       "SSL SASL_SSL") on its own free port per broker, advertised and
#       mapped to PROTOCOL (default NAME); inter-broker and controller
#       traffic stays on PLAINTEXT, which remains the first listener
#   DIR/extra.properties  appended to every node's server.properties (TLS
#       keys, SASL mechanisms, the authorizer ...); written by the caller
#       before start
#   KAFKA_FORMAT_ARGS  more arguments to the storage format, e.g.
#       --add-scram 'SCRAM-SHA-512=[name=u,password=p]' (word-split)
#   KAFKA_AUTO_CREATE  auto.create.topics.enable (default true)
#   KAFKA_JVM_OPTS  more options of every node's JVM (kept in DIR/jvm.opts for
#       restarts), e.g. Kafka 4's -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls
#       (the JWKS and token URLs a broker may fetch)
#   KAFKA_EXTRA_CLASSPATH  more jars or class folders (':'-separated) on every
#       node's classpath, after Kafka's (kept in DIR/extra.classpath), e.g. a
#       test's SASL callback handler (tests/aws/MskIamValidator.java)
#   KAFKA_HOSTS="ID=NETNS@ADDR ..."  runs node ID (1..N, or 100 for the
#       controller) inside network namespace NETNS, listening on ADDR
#       instead of 127.0.0.1 (the partition tests' test hosts,
#       tests/e2e/netns_lib.sh); kept in DIR/nodeID/host
# The cache is ${KAFKA_TEST_CACHE:-$HOME/.cache/outboxd-kafka}/VERSION.
# Heap per JVM: ${KAFKA_HEAP:--Xms256m -Xmx768m}, sized so a controller and
# three brokers fit beside PostgreSQL on a 2-core, 24 GiB machine.
set -euo pipefail

KAFKA_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEFAULT_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$KAFKA_DIR/pom.xml")
CACHE_ROOT=${KAFKA_TEST_CACHE:-$HOME/.cache/outboxd-kafka}
CONTROLLER_ID=100

die() {
    echo "kafka.sh: $*" >&2
    exit 1
}

# ---------------------------------------------------------------- jars

lib_dir() { echo "$CACHE_ROOT/$1/lib"; }

resolve() {
    local version=${1:-$DEFAULT_VERSION} lib
    lib=$(lib_dir "$version")
    if [[ -f "$lib/.complete" ]]; then
        echo "$lib"
        return 0
    fi
    command -v mvn >/dev/null || die "mvn not found: install Maven (Debian: apt-get install maven)"
    command -v java >/dev/null || die "java not found: install a JDK 17 (Debian: openjdk-17-jdk-headless: tests/kafka/Admin.java runs from source, which needs the compiler)"
    rm -rf "$lib"
    mkdir -p "$lib"
    mvn -q -B -Dstyle.color=never -f "$KAFKA_DIR/pom.xml" -Dkafka.version="$version" \
        dependency:copy-dependencies -DoutputDirectory="$lib" >&2 ||
        die "could not resolve org.apache.kafka:kafka_2.13:$version from Maven Central"
    ls "$lib"/kafka_2.13-"$version".jar >/dev/null 2>&1 ||
        die "kafka_2.13-$version.jar missing after resolving"
    touch "$lib/.complete"
    echo "$lib"
}

# ---------------------------------------------------------------- ports

source "$KAFKA_DIR/../free_port.sh"

# ---------------------------------------------------------------- config

# node_addr DIR ID: the address node ID listens on (its test host's, or
# 127.0.0.1); node_ns DIR ID: its network namespace ("" for this one).
node_addr() {
    local h
    [[ -s "$1/node$2/host" ]] || { echo 127.0.0.1; return 0; }
    read -r _ h <"$1/node$2/host"
    echo "$h"
}
node_ns() {
    local ns=
    [[ -s "$1/node$2/host" ]] && read -r ns _ <"$1/node$2/host"
    echo "$ns"
}

# The extra listeners of the cluster (DIR/listeners: "NAME PROTOCOL" lines,
# written by start from KAFKA_EXTRA_LISTENERS; broker I's port of NAME in
# DIR/nodeI/NAME.port).
extra_listeners() { # DIR ID: ",NAME://ADDR:PORT..." for broker ID
    local name proto
    [[ -s "$1/listeners" && -f "$1/node$2/port" ]] || return 0
    while read -r name proto; do
        printf ',%s://%s:%s' "$name" "$(node_addr "$1" "$2")" "$(cat "$1/node$2/$name.port")"
    done <"$1/listeners"
}
extra_protocol_map() { # DIR: ",NAME:PROTOCOL..."
    local name proto
    [[ -s "$1/listeners" ]] || return 0
    while read -r name proto; do printf ',%s:%s' "$name" "$proto"; done <"$1/listeners"
}

# node_config DIR ID ROLES: writes DIR/nodeID/server.properties.
node_config() {
    local dir=$1 id=$2 roles=$3 n nd addr
    n=$(cat "$dir/brokers")
    nd="$dir/node$id"
    addr=$(node_addr "$dir" "$id")
    mkdir -p "$nd/data"
    local rf=$n mir=2
    ((n == 1)) && mir=1
    {
        echo "node.id=$id"
        echo "process.roles=$roles"
        echo "controller.quorum.voters=$(cat "$dir/voters")"
        echo "controller.listener.names=CONTROLLER"
        echo "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT$(extra_protocol_map "$dir")"
        echo "log.dirs=$nd/data"
        case $roles in
        controller)
            echo "listeners=CONTROLLER://$addr:$(cat "$dir/controller.port")" ;;
        broker)
            echo "listeners=PLAINTEXT://$addr:$(cat "$nd/port")$(extra_listeners "$dir" "$id")"
            echo "advertised.listeners=PLAINTEXT://$addr:$(cat "$nd/port")$(extra_listeners "$dir" "$id")"
            echo "inter.broker.listener.name=PLAINTEXT" ;;
        broker,controller)
            echo "listeners=PLAINTEXT://$addr:$(cat "$nd/port"),CONTROLLER://$addr:$(cat "$dir/controller.port")$(extra_listeners "$dir" "$id")"
            echo "advertised.listeners=PLAINTEXT://$addr:$(cat "$nd/port")$(extra_listeners "$dir" "$id")"
            echo "inter.broker.listener.name=PLAINTEXT" ;;
        esac
        echo "num.partitions=${KAFKA_PARTITIONS:-4}"
        echo "default.replication.factor=$rf"
        echo "min.insync.replicas=$mir"
        echo "offsets.topic.replication.factor=$rf"
        echo "transaction.state.log.replication.factor=$rf"
        echo "transaction.state.log.min.isr=$mir"
        echo "auto.create.topics.enable=${KAFKA_AUTO_CREATE:-true}"
        echo "group.initial.rebalance.delay.ms=0"
        # Small segments and few threads: a test cluster, not a production one.
        echo "num.network.threads=2"
        echo "num.io.threads=2"
        echo "num.recovery.threads.per.data.dir=1"
        echo "log.segment.bytes=67108864"
        echo "unclean.leader.election.enable=false"
        # Anything else the caller wants (TLS listeners, ACLs ...).
        [[ -f "$dir/extra.properties" ]] && cat "$dir/extra.properties"
    } >"$nd/server.properties"
    cat >"$nd/log4j.properties" <<EOF
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$nd/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
EOF
}

java_cmd() { # DIR ID MAINCLASS ARGS...
    local dir=$1 id=$2 main=$3
    shift 3
    local lib opts=
    lib=$(cat "$dir/lib")
    [[ -f "$dir/jvm.opts" ]] && opts=$(cat "$dir/jvm.opts")
    local cp="$lib/*"
    [[ -s "$dir/extra.classpath" ]] && cp+=":$(cat "$dir/extra.classpath")"
    # shellcheck disable=SC2086
    exec java ${KAFKA_HEAP:--Xms256m -Xmx768m} $opts -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        -Djava.awt.headless=true -Dlog4j.configuration="file:$dir/node$id/log4j.properties" \
        -cp "$cp" "$main" "$@"
}

format_node() { # DIR ID
    local dir=$1 id=$2
    # shellcheck disable=SC2086
    (java_cmd "$dir" "$id" kafka.tools.StorageTool format -t "$(cat "$dir/cluster.id")" \
        -c "$dir/node$id/server.properties" --ignore-formatted ${KAFKA_FORMAT_ARGS:-}) \
        >"$dir/node$id/format.log" 2>&1 ||
        die "formatting node $id failed: $(tail -5 "$dir/node$id/format.log")"
}

launch_node() { # DIR ID
    local dir=$1 id=$2
    (
        exec </dev/null >>"$dir/node$id/stdout.log" 2>&1
        local ns
        ns=$(node_ns "$dir" "$id")
        setsid ${ns:+ip netns exec "$ns"} bash -c 'echo $$ >"$1/node$2/pid"; exec "$0" _java "$1" "$2"' \
            "${BASH_SOURCE[0]}" "$dir" "$id" &
    )
    local i
    for ((i = 0; i < 50; i++)); do
        [[ -s "$dir/node$id/pid" ]] && return 0
        sleep 0.1
    done
    die "node $id did not start"
}

node_pid() { # DIR ID: prints the pid if the process lives
    local f="$1/node$2/pid" p
    [[ -s "$f" ]] || return 0
    p=$(cat "$f")
    kill -0 "$p" 2>/dev/null && echo "$p"
    return 0
}

# wait_broker DIR ID: until broker ID is listed by a metadata request to it.
wait_broker() {
    local dir=$1 id=$2 port i
    port=$(node_addr "$dir" "$id"):$(cat "$dir/node$id/port")
    for ((i = 0; i < 600; i++)); do
        [[ -n "$(node_pid "$dir" "$id")" ]] ||
            die "broker $id exited while starting (pid file: $(cat "$dir/node$id/pid" 2>/dev/null || echo none); files: $(ls "$dir/node$id" 2>&1 | tr '\n' ' ')): $(tail -n 20 "$dir/node$id/stdout.log" "$dir/node$id/server.log" 2>&1)"
        # (kcat's answer read whole: with pipefail, `kcat | grep -q` is
        # false when kcat, still writing, dies of SIGPIPE.)
        if grep -qE "^ *broker $id at " <<<"$(kcat -L -b "$port" -m 2 2>/dev/null)"; then
            return 0
        fi
        sleep 0.2
    done
    die "broker $id did not answer metadata within 120 s"
}

bootstrap() { # DIR [LISTENER]
    local dir=$1 name=${2:-} id out= f
    for ((id = 1; id <= $(cat "$dir/brokers"); id++)); do
        f="$dir/node$id/port"
        [[ -z "$name" || "$name" == PLAINTEXT ]] || f="$dir/node$id/$name.port"
        [[ -f "$f" ]] || die "no listener $name in $dir"
        out+="${out:+,}$(node_addr "$dir" "$id"):$(cat "$f")"
    done
    echo "$out"
}

# tool DIR CLASS ARGS...: one of Kafka's command-line tools, its own log
# (WARN and above) on stderr.
run_tool() {
    local dir=$1 main=$2 lib
    shift 2
    lib=$(cat "$dir/lib")
    [[ -f "$dir/tools-log4j.properties" ]] || cat >"$dir/tools-log4j.properties" <<EOF
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
EOF
    exec java -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
        -Dlog4j.configuration="file:$dir/tools-log4j.properties" -cp "$lib/*" "$main" "$@"
}

start_cluster() {
    local dir=$1 n=$2 version=${3:-$DEFAULT_VERSION} id
    [[ "$n" =~ ^[1-9]$ ]] || die "start: N must be 1..9"
    command -v kcat >/dev/null || die "kcat not found (Debian: apt-get install kcat)"
    mkdir -p "$dir"
    resolve "$version" >"$dir/lib"
    echo "$n" >"$dir/brokers"
    echo "$version" >"$dir/version"
    echo "${KAFKA_JVM_OPTS:-}" >"$dir/jvm.opts"
    echo "${KAFKA_EXTRA_CLASSPATH:-}" >"$dir/extra.classpath"
    free_port >"$dir/controller.port"
    : >"$dir/listeners"
    local l h
    for h in ${KAFKA_HOSTS:-}; do
        [[ "$h" =~ ^([0-9]+)=([^@]+)@([0-9.]+)$ ]] || die "KAFKA_HOSTS: '$h' is not ID=NETNS@ADDR"
        mkdir -p "$dir/node${BASH_REMATCH[1]}"
        echo "${BASH_REMATCH[2]} ${BASH_REMATCH[3]}" >"$dir/node${BASH_REMATCH[1]}/host"
    done
    for l in ${KAFKA_EXTRA_LISTENERS:-}; do
        [[ "${l%%:*}" =~ ^[A-Z][A-Z0-9_]*$ && "${l%%:*}" != PLAINTEXT && "${l%%:*}" != CONTROLLER ]] ||
            die "KAFKA_EXTRA_LISTENERS: bad listener name in '$l'"
        echo "${l%%:*} ${l#*:}" >>"$dir/listeners"
    done
    for ((id = 1; id <= n; id++)); do
        mkdir -p "$dir/node$id"
        free_port >"$dir/node$id/port"
        while read -r l _; do free_port >"$dir/node$id/$l.port"; done <"$dir/listeners"
    done
    java_cmd_uuid() { (java_cmd "$dir" 1 kafka.tools.StorageTool random-uuid); }
    mkdir -p "$dir/node1"
    java_cmd_uuid >"$dir/cluster.id" 2>"$dir/uuid.err" || die "random-uuid failed: $(cat "$dir/uuid.err")"
    if ((n == 1)); then
        echo "1@$(node_addr "$dir" 1):$(cat "$dir/controller.port")" >"$dir/voters"
        node_config "$dir" 1 broker,controller
        format_node "$dir" 1
        launch_node "$dir" 1
    else
        echo "$CONTROLLER_ID@$(node_addr "$dir" "$CONTROLLER_ID"):$(cat "$dir/controller.port")" >"$dir/voters"
        node_config "$dir" "$CONTROLLER_ID" controller
        format_node "$dir" "$CONTROLLER_ID"
        launch_node "$dir" "$CONTROLLER_ID"
        for ((id = 1; id <= n; id++)); do
            node_config "$dir" "$id" broker
            format_node "$dir" "$id"
            launch_node "$dir" "$id"
        done
    fi
    for ((id = 1; id <= n; id++)); do wait_broker "$dir" "$id"; done
    bootstrap "$dir"
}

stop_node() { # DIR ID SIGNAL
    local dir=$1 id=$2 sig=$3 p i
    p=$(node_pid "$dir" "$id")
    [[ -n "$p" ]] || return 0
    kill "-$sig" "$p" 2>/dev/null || true
    for ((i = 0; i < 600; i++)); do
        kill -0 "$p" 2>/dev/null || { rm -f "$dir/node$id/pid"; return 0; }
        sleep 0.1
    done
    kill -KILL "$p" 2>/dev/null || true
    rm -f "$dir/node$id/pid"
    echo "kafka.sh: broker $id did not stop within 60 s; killed" >&2
}

restart_node() { # DIR ID
    local dir=$1 id=$2
    [[ -z "$(node_pid "$dir" "$id")" ]] || die "broker $id is running"
    launch_node "$dir" "$id"
    wait_broker "$dir" "$id"
}

check_broker_id() { # DIR ID
    [[ -f "$1/brokers" ]] || die "no cluster in $1"
    [[ "$2" =~ ^[0-9]+$ ]] && (($2 >= 1 && $2 <= $(cat "$1/brokers"))) ||
        die "no broker $2 in $1 (brokers are 1..$(cat "$1/brokers"))"
}

cmd=${1:-}
shift || true
case $cmd in
resolve) resolve "$@" ;;
start) (($# >= 2)) || die "usage: start DIR N [VERSION]"; start_cluster "$@" ;;
bootstrap) bootstrap "$@" ;;
admin)
    (($# >= 2)) || die "usage: admin DIR OP..."
    [[ -f "$1/lib" ]] || die "no cluster in $1"
    d=$1
    shift
    run_tool "$d" "$KAFKA_DIR/Admin.java" "$(bootstrap "$d")" "$@" ;;
tool) (($# >= 2)) || die "usage: tool DIR CLASS ARGS..."; [[ -f "$1/lib" ]] || die "no cluster in $1"; run_tool "$@" ;;
stop) check_broker_id "$1" "$2"; stop_node "$1" "$2" TERM ;;
kill) check_broker_id "$1" "$2"; stop_node "$1" "$2" KILL ;;
restart) check_broker_id "$1" "$2"; restart_node "$1" "$2" ;;
down)
    for ((id = 1; id <= $(cat "$1/brokers"); id++)); do stop_node "$1" "$id" TERM; done ;;
up)
    for ((id = 1; id <= $(cat "$1/brokers"); id++)); do
        [[ -n "$(node_pid "$1" "$id")" ]] || launch_node "$1" "$id"
    done
    for ((id = 1; id <= $(cat "$1/brokers"); id++)); do wait_broker "$1" "$id"; done ;;
pid) node_pid "$1" "$2" ;;
destroy)
    [[ -d "$1" ]] || exit 0
    for f in "$1"/node*/pid; do
        [[ -s "$f" ]] && kill -KILL "$(cat "$f")" 2>/dev/null || true
        rm -f "$f"
    done ;;
_java)
    # internal: the broker process itself (launched by launch_node)
    java_cmd "$1" "$2" kafka.Kafka "$1/node$2/server.properties" ;;
*) die "usage: kafka.sh resolve|start|bootstrap|admin|tool|stop|kill|restart|down|up|pid|destroy ..." ;;
esac
