#!/usr/bin/env bash
# tests/registry/registry.sh - a real schema registry and real consumers'
# deserializers for the tests (tests/e2e/registry.sh): Apicurio Registry
# 3.0.9, which serves Confluent's Schema Registry API under
# /apis/ccompat/v7, from the distribution Maven Central publishes
# (io.apicurio:apicurio-registry-app:3.0.9:tar.gz:all, a Quarkus
# "runner" jar and its lib/), with its default in-memory storage; and the
# test's consumer (tests/registry/pom.xml: Apicurio's Kafka deserializers).
#
#   registry.sh resolve       the registry and the consumer into the cache
#                             (once per machine; Maven Central); prints the
#                             cache folder
#   registry.sh start DIR     starts the registry on a free 127.0.0.1 port
#                             in its own session (pid in DIR/registry.pid,
#                             log in DIR/registry.log), waits until
#                             /health/ready answers, prints its base URL
#                             (http://127.0.0.1:PORT); the caller stops it
#   registry.sh stop DIR      SIGTERM, waits for the exit (SIGKILL after 30 s)
#   registry.sh decode ARGS   runs the consumer (outboxd.test.Decode: see
#                             its comment for ARGS)
#
# Why 3.0.9: 3.1 and later are built for Java 21, and the tests run on
# Debian 12's Java 17. The ids the ccompat API gives out are content ids
# (the same schema text under two subjects gets one id, as in Confluent's
# registry); the consumer is configured for them.
#
# The cache is ${REGISTRY_TEST_CACHE:-$HOME/.cache/outboxd-registry}.
# Needs java (17+), mvn (resolve), curl.
set -euo pipefail

REG_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REG_VERSION=3.0.9
CACHE=${REGISTRY_TEST_CACHE:-$HOME/.cache/outboxd-registry}

die() {
    echo "registry.sh: $*" >&2
    exit 1
}

mvn_q() { mvn -q -B -Dstyle.color=never -s "$REG_DIR/settings.xml" "$@"; }

resolve() {
    if [[ -f "$CACHE/.complete" ]]; then
        echo "$CACHE"
        return 0
    fi
    command -v mvn >/dev/null || die "mvn not found: install Maven (Debian: apt-get install maven)"
    command -v java >/dev/null || die "java not found: install a JDK 17+ (Debian: openjdk-17-jdk-headless)"
    rm -rf "$CACHE"
    mkdir -p "$CACHE"
    local repo
    repo=$(mvn_q help:evaluate -Dexpression=settings.localRepository -DforceStdout \
        -f "$REG_DIR/pom.xml" | sed 's/\x1b\[[0-9;]*m//g') ||
        die "mvn cannot tell its local repository"
    # The artifact alone: its parent POM (io.apicurio:apicurio-registry:3.0.9)
    # is not on Central, so no dependency graph is resolved for it.
    mvn_q org.apache.maven.plugins:maven-dependency-plugin:2.8:get -Dtransitive=false \
        -Dartifact="io.apicurio:apicurio-registry-app:$REG_VERSION:tar.gz:all" >&2 ||
        die "could not fetch Apicurio Registry $REG_VERSION from Maven Central"
    mkdir -p "$CACHE/registry"
    tar xzf "$repo/io/apicurio/apicurio-registry-app/$REG_VERSION/apicurio-registry-app-$REG_VERSION-all.tar.gz" \
        -C "$CACHE/registry" || die "could not unpack the registry"
    ls "$CACHE"/registry/*-runner.jar >/dev/null 2>&1 || die "no runner jar in the registry's distribution"
    mvn_q -f "$REG_DIR/pom.xml" -Dregistry.build.dir="$CACHE/consumer" compile \
        dependency:build-classpath -Dmdep.outputFile="$CACHE/consumer.cp" >&2 ||
        die "could not build the test consumer (tests/registry/pom.xml)"
    touch "$CACHE/.complete"
    echo "$CACHE"
}

source "$REG_DIR/../free_port.sh"

start() {
    local dir=$1 port jar pid i
    [[ -f "$CACHE/.complete" ]] || die "not resolved: run registry.sh resolve first"
    mkdir -p "$dir"
    port=$(free_port)
    jar=$(ls "$CACHE"/registry/*-runner.jar | head -1)
    echo "$port" >"$dir/registry.port"
    setsid java -Xmx384m -XX:+UseSerialGC -Dfile.encoding=UTF-8 -Dquarkus.http.host=127.0.0.1 \
        -Dquarkus.http.port="$port" -jar "$jar" >"$dir/registry.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$dir/registry.pid"
    for ((i = 0; i < 1200; i++)); do
        if curl -sf -o /dev/null "http://127.0.0.1:$port/health/ready"; then
            echo "http://127.0.0.1:$port"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || {
            tail -20 "$dir/registry.log" >&2
            die "the registry exited while starting (log: $dir/registry.log)"
        }
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    tail -20 "$dir/registry.log" >&2
    die "the registry was not ready after 120 s (log: $dir/registry.log)"
}

stop() {
    local dir=$1 pid i
    pid=$(cat "$dir/registry.pid" 2>/dev/null) || return 0
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 300; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

decode() {
    [[ -f "$CACHE/.complete" ]] || die "not resolved: run registry.sh resolve first"
    # UTF-8 whatever the locale: Java 17 takes its charset from LANG, and
    # under CI's bare environment (no LANG: ASCII) every non-ASCII character
    # of a decoded value came out as '?' (real.registry: 30 of 60 orders).
    exec java -Xmx256m -Dfile.encoding=UTF-8 -Dsun.stdout.encoding=UTF-8 \
        -cp "$CACHE/consumer/classes:$(cat "$CACHE/consumer.cp")" \
        -Dorg.slf4j.simpleLogger.defaultLogLevel=warn outboxd.test.Decode "$@"
}

cmd=${1:-}
shift || true
case "$cmd" in
resolve) resolve ;;
start) (($# == 1)) || die "usage: start DIR"; start "$1" ;;
stop) (($# == 1)) || die "usage: stop DIR"; stop "$1" ;;
decode) decode "$@" ;;
*) die "usage: registry.sh resolve|start DIR|stop DIR|decode ARGS" ;;
esac
