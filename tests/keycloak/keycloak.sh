#!/usr/bin/env bash
# tests/keycloak/keycloak.sh - a real OIDC provider for the tests: Keycloak
# (its distribution org.keycloak:keycloak-quarkus-dist from Maven Central),
# on a free loopback port, in a directory of the caller's.
#
#   keycloak.sh resolve              the distribution into the cache, built
#                                    once for the way the tests run it
#                                    (kc.sh build: an in-memory database, a
#                                    local cache, no clustering); prints it
#   keycloak.sh start DIR [CERT KEY] starts it (plain HTTP on 127.0.0.1, a
#                                    bootstrap admin "admin" whose password
#                                    is in DIR/admin.password; with CERT and
#                                    KEY, PEM files, also HTTPS on 127.0.0.1
#                                    on a port of its own); waits until it
#                                    serves the master realm; prints the
#                                    base URL (http)
#   keycloak.sh https-url DIR        the HTTPS base URL (started with CERT)
#   keycloak.sh token DIR            an admin access token (master realm)
#   keycloak.sh stop DIR             SIGTERM, waits
#
# Runs as kc.sh start --optimized (production mode, built at resolve):
# start-dev rebuilds the server (about 30 s of CPU) at every start, and
# would write that build into the shared cache. DIR/home has its own bin,
# conf and data; lib, providers and themes are the cache's, read only.
# Keycloak 26 needs Java 21 or newer: KEYCLOAK_JAVA_HOME, else
# /usr/lib/jvm/temurin-25-jdk-amd64 (the second JDK of these machines),
# else the first /usr/lib/jvm/*-2[1-9]* with bin/java.
# The cache is ${KEYCLOAK_TEST_CACHE:-$HOME/.cache/outboxd-keycloak}/VERSION.
# Heap: ${KEYCLOAK_HEAP:--Xms64m -Xmx512m}.
set -euo pipefail

KEYCLOAK_VERSION=26.7.3
KC_TOOLS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${KEYCLOAK_TEST_CACHE:-$HOME/.cache/outboxd-keycloak}/$KEYCLOAK_VERSION
DIST=$CACHE/keycloak-$KEYCLOAK_VERSION

die() {
    echo "keycloak.sh: $*" >&2
    exit 1
}

java_home() {
    local j
    for j in "${KEYCLOAK_JAVA_HOME:-}" /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/*-2[1-9]*; do
        [[ -n "$j" && -x "$j/bin/java" ]] && { echo "$j"; return 0; }
    done
    die "no Java 21 or newer (Keycloak $KEYCLOAK_VERSION needs one): set KEYCLOAK_JAVA_HOME, or install a JDK 21+ under /usr/lib/jvm (these machines have Temurin 25 at /usr/lib/jvm/temurin-25-jdk-amd64)"
}

resolve() {
    if [[ -f "$CACHE/.complete" ]]; then
        echo "$DIST"
        return 0
    fi
    command -v mvn >/dev/null || die "mvn not found: install Maven (Debian: apt-get install maven)"
    local jh
    jh=$(java_home)
    rm -rf "$CACHE"
    mkdir -p "$CACHE/dl"
    mvn -q -B -Dstyle.color=never org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
        -Dartifact="org.keycloak:keycloak-quarkus-dist:$KEYCLOAK_VERSION:tar.gz" \
        -DoutputDirectory="$CACHE/dl" >&2 ||
        die "could not resolve org.keycloak:keycloak-quarkus-dist:$KEYCLOAK_VERSION:tar.gz from Maven Central"
    tar -xzf "$CACHE/dl/keycloak-quarkus-dist-$KEYCLOAK_VERSION.tar.gz" -C "$CACHE" ||
        die "could not unpack the distribution"
    rm -rf "$CACHE/dl"
    # The build the tests run: no database server (H2 in memory), no
    # cluster (a local cache: no JGroups ports, no discovery).
    JAVA_HOME=$jh "$DIST/bin/kc.sh" build --db=dev-mem --cache=local >"$CACHE/build.log" 2>&1 ||
        die "kc.sh build failed: $(tail -5 "$CACHE/build.log")"
    touch "$CACHE/.complete"
    echo "$DIST"
}

source "$KC_TOOLS/../free_port.sh"

base_url() { echo "http://127.0.0.1:$(cat "$1/port")"; }

start() {
    local dir=$1 jh i https=()
    resolve >/dev/null
    jh=$(java_home)
    mkdir -p "$dir/home/data"
    cp -a "$DIST/bin" "$DIST/conf" "$dir/home/"
    for d in lib providers themes; do ln -sfn "$DIST/$d" "$dir/home/$d"; done
    free_port >"$dir/port"
    head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/admin.password"
    if [[ -n "${2:-}" ]]; then # HTTPS binds to --http-host's address too
        free_port >"$dir/https_port"
        https=(--https-port="$(cat "$dir/https_port")" --https-certificate-file="$2"
            --https-certificate-key-file="$3")
    fi
    (
        exec </dev/null >>"$dir/keycloak.log" 2>&1
        JAVA_HOME=$jh JAVA_OPTS_KC_HEAP="${KEYCLOAK_HEAP:--Xms64m -Xmx512m}" \
            KC_BOOTSTRAP_ADMIN_USERNAME=admin \
            KC_BOOTSTRAP_ADMIN_PASSWORD=$(cat "$dir/admin.password") \
            setsid "$dir/home/bin/kc.sh" start --optimized --http-enabled=true \
            --http-host=127.0.0.1 --http-port="$(cat "$dir/port")" --hostname-strict=false "${https[@]}" &
        echo $! >"$dir/pid"
    )
    for ((i = 0; i < 900; i++)); do
        kill -0 "$(cat "$dir/pid")" 2>/dev/null ||
            die "Keycloak exited while starting: $(tail -n 20 "$dir/keycloak.log")"
        if curl -sf -o /dev/null "$(base_url "$dir")/realms/master/.well-known/openid-configuration"; then
            base_url "$dir"
            return 0
        fi
        sleep 0.2
    done
    die "Keycloak did not serve its master realm within 180 s: $(tail -n 20 "$dir/keycloak.log")"
}

token() {
    local dir=$1
    curl -sf -d grant_type=password -d client_id=admin-cli -d username=admin \
        --data-urlencode "password=$(cat "$dir/admin.password")" \
        "$(base_url "$dir")/realms/master/protocol/openid-connect/token" | jq -er .access_token ||
        die "no admin token from $(base_url "$dir")"
}

stop() {
    local dir=$1 p i
    [[ -s "$dir/pid" ]] || return 0
    p=$(cat "$dir/pid")
    # kc.sh forwards SIGTERM to its JVM, and the JVM is in kc.sh's session
    kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true
    for ((i = 0; i < 300; i++)); do
        kill -0 "$p" 2>/dev/null || { rm -f "$dir/pid"; return 0; }
        sleep 0.1
    done
    kill -KILL -- "-$p" 2>/dev/null || true
    rm -f "$dir/pid"
}

cmd=${1:-}
shift || true
case $cmd in
resolve) resolve ;;
start) (($# == 1 || $# == 3)) || die "usage: start DIR [CERT KEY]"; start "$@" ;;
https-url)
    (($# == 1)) && [[ -s "$1/https_port" ]] || die "usage: https-url DIR (of a start with CERT KEY)"
    echo "https://127.0.0.1:$(cat "$1/https_port")"
    ;;
token) (($# == 1)) || die "usage: token DIR"; token "$1" ;;
stop) (($# == 1)) || die "usage: stop DIR"; stop "$1" ;;
*) die "usage: keycloak.sh resolve|start DIR [CERT KEY]|https-url DIR|token DIR|stop DIR" ;;
esac
