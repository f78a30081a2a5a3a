#!/usr/bin/env bash
# The container image is real: deploy/Dockerfile is built with podman and
# the image streams events end to end.
#
#  1. A Debian 12 base image is made locally (debootstrap --variant=minbase,
#     in ctest made once for this test and e2e.package by the fixture
#     e2e.debian_root and unpacked here (lib.sh, debian_root); podman
#     import, tagged debian:bookworm-slim: no registry is reachable)
#     in podman storage of this test's own under $T, with podman settings
#     of its own (runc, ulimits: see the comments where they are written),
#     so the test needs nothing outside the repository.
#  2. `podman build --pull=never --format docker -f deploy/Dockerfile`; the
#     image must run as a non-root user, carry the HEALTHCHECK, hold no
#     compiler or curl, add at most 40 MB to the base, and resolve every
#     library of the binary, librdkafka from the image's own prefix.
#     The build stage's librdkafka: with CONTAINER_LIBRDKAFKA=host (the
#     default, CI's e2e.container) the host's build of the same pin, which
#     the suite's own build needs anyway (deploy/librdkafka.sh, run by
#     tests/run-all.sh), goes into the build context as
#     deploy/librdkafka-prebuilt.tar and the image compiles no librdkafka
#     (deploy/Dockerfile): checked in the build's output. Only on a Debian
#     12 host, whose libraries the image has, with that build there (the
#     log says when not); elsewhere, as with
#     CONTAINER_LIBRDKAFKA=source (e2e.container_from_source, full run
#     only), the image compiles it from Debian's source package, as a
#     user's `docker build` does: checked too.
#  3. outboxd runs in it with host networking against this test's
#     PostgreSQL and mock broker on 127.0.0.1, as the least-privilege role
#     of sql/role.sql with its password in PGPASSWORD (scram-sha-256), the
#     settings split between a mounted ini and OUTBOXD_* variables, the
#     offset file in a host directory mounted on the image's volume; with a
#     read-only root file system and no capabilities, as the Kubernetes
#     manifests in deploy/kubernetes/ run it.
#  4. 300 events in 30 transactions arrive exactly once (check_delivery);
#     /healthz and /readyz answer 200 from outside the container, /metrics
#     exports every metric deploy/prometheus/outboxd-alerts.yml uses, and
#     the image's own HEALTHCHECK reports healthy.
#  5. SIGTERM to the container: exit 0, the offset file in the volume holds
#     an LSN at least the slot's confirmed position, and the password is in
#     no line of the container's output.
# Everything built (images, storage) is removed at the end. podman,
# debootstrap and curl are in deploy/install-deps.sh: a missing one fails
# the test.
# (The image build: minutes on a busy machine, several more when it
# compiles librdkafka; ctest's TIMEOUT for this test is 1800 s,
# tests/CMakeLists.txt.)
: "${E2E_TIMEOUT:=1740}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init container

for tool in podman debootstrap curl; do
    command -v "$tool" >/dev/null ||
        fail "$tool is not installed (deploy/install-deps.sh installs it)"
done
# podman settings that work on Debian 12 VMs like the CI machines:
# - they lack CAP_SYS_RESOURCE, so podman's default ulimits
#   (nofile=1048576, nproc=4194304) cannot be set; podman caps its own NPROC
#   at 32768, so a container's value must not exceed it;
# - crun 1.8.1 refuses their hybrid cgroup layout; runc works.
cat >"$T/containers.conf" <<'CONF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
CONF

STORE=$T/containers
IMAGE=localhost/outboxd-e2e:$$
CNAME=outboxd-e2e-$$
PODMAN_PID=
SECRET=C0ntainer-pw-$$
mkdir -p "$STORE/graph" "$STORE/run"
cat >"$T/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$STORE/graph"
runroot = "$STORE/run"
EOF
export CONTAINERS_CONF=$T/containers.conf
export CONTAINERS_STORAGE_CONF=$T/storage.conf

# Removes the container, the images and the storage; runs before lib.sh's
# own clean-up (which stops PostgreSQL and the broker and removes $T).
container_cleanup() {
    local m
    if [[ -n "$PODMAN_PID" ]] && kill -0 "$PODMAN_PID" 2>/dev/null; then
        timeout 30 podman kill --signal KILL "$CNAME" >/dev/null 2>&1
    fi
    timeout 60 podman rm -f -t 0 "$CNAME" >/dev/null 2>&1
    [[ -z "$PODMAN_PID" ]] || wait "$PODMAN_PID" 2>/dev/null
    timeout 60 podman rmi -a -f >/dev/null 2>&1
    # Nothing of the storage may stay mounted before it is removed.
    while read -r _ m _; do
        [[ "$m" == "$STORE"/* ]] && umount -l "$m" 2>/dev/null
    done < <(tac /proc/mounts)
    rm -rf "$STORE" "$T/rootfs" "$T/rootfs.tar"
    if grep -qF " $STORE/" /proc/mounts; then
        printf 'container: storage %s still mounted\n' "$STORE" >&2
    fi
}
# Prefixes each line of stdin with the wall-clock time in seconds.
stamp_lines() {
    local line
    while IFS= read -r line; do printf '%(%s)T %s\n' -1 "$line"; done
}
# Prints how long each step of the image build took (seconds from the
# step's first line to the next step's, or to the log's last line).
build_steps() {
    [[ -s "$BUILD_LOG" ]] || return 0
    # podman prints "[1/2] STEP 3/7: RUN ..." (stage, step in the stage).
    awk '/^[0-9]+ (\[[0-9]+\/[0-9]+\] )?STEP [0-9]+\/[0-9]+:/ {
             if (name != "") printf "%5ds %s\n", $1 - t, name
             t = $1; name = substr($0, index($0, " ") + 1, 70) }
         { last = $1 }
         END { if (name != "") printf "%5ds %s%s\n", last - t, name, done ? "" : " (unfinished)" }' \
        done="${BUILD_DONE:-}" "$BUILD_LOG" | while IFS= read -r l; do info "build $l"; done
}
BUILD_LOG=
BUILD_DONE=
trap 'rc=$?; set +eE; [[ -n "$BUILD_DONE" ]] || build_steps; container_cleanup; (exit $rc); _e2e_cleanup' EXIT

# ---------------------------------------------------------------- image

step "base image: a Debian 12 root (lib.sh's debian_root), podman import"
start=$SECONDS
debian_root "$T/rootfs"
rm -rf "$T/rootfs/var/lib/apt/lists/"* "$T/rootfs/var/cache/apt/archives/"*.deb
tar -C "$T/rootfs" --numeric-owner -cf "$T/rootfs.tar" .
rm -rf "$T/rootfs"
podman import --change 'CMD ["/bin/bash"]' "$T/rootfs.tar" docker.io/library/debian:bookworm \
    >"$T/import.log" 2>&1 || { cat "$T/import.log" >&2; fail "podman import failed"; }
rm -f "$T/rootfs.tar"
podman tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
info "base image ready after $((SECONDS - start))s"

# The build context: what .dockerignore lets through from the repository
# (its "!" lines), copied into $T so that a tarball added to it stays out
# of the checkout (a second copy of this test may build beside this one).
LIBRDKAFKA_FROM=${CONTAINER_LIBRDKAFKA:-host}
[[ $LIBRDKAFKA_FROM == host || $LIBRDKAFKA_FROM == source ]] ||
    fail "CONTAINER_LIBRDKAFKA is '$LIBRDKAFKA_FROM', not host or source"
CTX=$T/context
mkdir -p "$CTX"
cp "$E2E_SRC_DIR/.dockerignore" "$CTX/"
# (A pattern that matches nothing, like the prebuilt tarball's in a
# checkout, copies nothing.)
while read -r pattern; do
    (
        cd "$E2E_SRC_DIR"
        # shellcheck disable=SC2086 # the pattern is a glob
        for p in ${pattern%/}; do
            if [[ -e $p ]]; then cp -a --parents "$p" "$CTX/"; fi
        done
    )
done < <(sed -n 's/^!//p' "$E2E_SRC_DIR/.dockerignore")
if [[ $LIBRDKAFKA_FROM == host ]] &&
    ! grep -qx 'VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
    info "not a Debian 12 host: the image compiles librdkafka itself"
    LIBRDKAFKA_FROM=source
fi
# tests/run-all.sh builds the pin before the suite's own build, which
# links it; a build directory of OUTBOXD_RDKAFKA=system may have none.
if [[ $LIBRDKAFKA_FROM == host ]] &&
    ! host_prefix=$(bash "$E2E_SRC_DIR/deploy/librdkafka.sh" --complete); then
    info "no complete build of the pinned librdkafka in $(bash "$E2E_SRC_DIR/deploy/librdkafka.sh" --prefix) (deploy/librdkafka.sh makes it): the image compiles librdkafka itself"
    LIBRDKAFKA_FROM=source
fi
if [[ $LIBRDKAFKA_FROM == host ]]; then
    tar -C "$host_prefix" --numeric-owner -cf "$CTX/deploy/librdkafka-prebuilt.tar" .
    info "the image's librdkafka: the host's build in $host_prefix ($(stat -c %s "$CTX/deploy/librdkafka-prebuilt.tar") bytes in the context)"
else
    rm -f "$CTX/deploy/librdkafka-prebuilt.tar"
    info "the image's librdkafka: compiled in the image's build (deploy/librdkafka.sh)"
fi

step "podman build -f deploy/Dockerfile (librdkafka: $LIBRDKAFKA_FROM)"
start=$SECONDS
# --network=host: the RUN steps reach the Debian mirror without a
# container network (none is configured on these machines).
# Each line of the build's output gets the time it was printed, so that a
# slow build says which of its steps was slow (build_steps, also on the
# watchdog's way out: CI's machines are slower than a quiet one).
BUILD_LOG=$T/build.log
rc=0
podman build --pull=never --format docker --network=host -f "$E2E_SRC_DIR/deploy/Dockerfile" \
    -t "$IMAGE" "$CTX" 2>&1 | stamp_lines >"$BUILD_LOG" || rc=$?
BUILD_DONE=1
build_steps
((rc == 0)) || { tail -n 40 "$BUILD_LOG" >&2; fail "podman build failed"; }
# Which librdkafka the build stage used: librdkafka.sh says "building"
# only when it compiles.
if [[ $LIBRDKAFKA_FROM == host ]]; then
    grep -q 'librdkafka-prebuilt.tar (built for .*) unpacked into' "$BUILD_LOG" ||
        fail "the image's build did not unpack the host's librdkafka"
    ! grep -q 'librdkafka.sh: building librdkafka' "$BUILD_LOG" ||
        fail "the image's build compiled librdkafka although the host's build of the pin was in its context"
    info "ok: the image's build reused the host's librdkafka and compiled none"
else
    grep -q 'librdkafka.sh: building librdkafka' "$BUILD_LOG" ||
        fail "the image's build did not compile librdkafka (no 'librdkafka.sh: building' line)"
    info "ok: the image's build compiled librdkafka from Debian's source package"
fi
build_s=$((SECONDS - start))
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
base=$(podman image inspect --format '{{.Size}}' docker.io/library/debian:bookworm-slim)
info "image built in ${build_s}s: $((size / 1000000)) MB ($size bytes; base image $((base / 1000000)) MB, outboxd's layers $(((size - base) / 1000000)) MB)"
# What outboxd adds to the base: 20 MB measured with libavro and libcurl
# (14-17 MB before them; the binary, the private
# librdkafka, the runtime libraries apt adds). A bound well above it, so
# that a build tool, a debug build or a second copy slipping into the
# image fails here rather than in a registry.
(((size - base) <= 40000000)) ||
    fail "outboxd's layers are $(((size - base) / 1000000)) MB, over the 40 MB bound (20 MB measured)"

user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
[[ -n "$user" && "${user%%:*}" != 0 && "${user%%:*}" != root ]] ||
    fail "the image runs as '$user', not as a non-root user"
info "ok: image user $user"
hc=$(podman image inspect --format '{{json .HealthCheck}}' "$IMAGE")
[[ "$hc" == *outboxd-healthcheck* ]] || fail "the image has no HEALTHCHECK with outboxd-healthcheck: $hc"
info "ok: HEALTHCHECK $hc"
# Only runtime libraries: no compiler, no curl, and every library found.
found=$(podman run --rm --pull=never --network=host --entrypoint /bin/bash "$IMAGE" \
    -c 'for t in gcc cc make cmake curl wget; do command -v $t; done; true')
[[ -z "$found" ]] || fail "build tools in the final image: $found"
libs=$(podman run --rm --pull=never --network=host --entrypoint /usr/bin/ldd "$IMAGE" \
    /usr/local/bin/outboxd)
missing=$(grep 'not found' <<<"$libs" || true)
[[ -z "$missing" ]] || fail "libraries missing in the image: $missing"
# The RPATH names the image's prefix, not the host's (whose rdkafka.pc the
# reused build came with).
assert_eq /opt/outboxd/librdkafka/lib/librdkafka.so.1 "$(awk '/librdkafka/ { print $3 }' <<<"$libs")" \
    "the librdkafka the binary loads in the image"
info "librdkafka.so.1 in the image: $(podman run --rm --pull=never --network=host --entrypoint /usr/bin/stat \
    "$IMAGE" -c %s /opt/outboxd/librdkafka/lib/librdkafka.so.1) bytes (stripped; librdkafka: $LIBRDKAFKA_FROM)"
# The image carries the pinned librdkafka (deploy/librdkafka.sh), not
# Debian 12's 2.0.2.
assert_eq "outboxd 0.1.0
librdkafka $(bash "$E2E_SRC_DIR/deploy/librdkafka.sh" --version)" \
    "$(podman run --rm --pull=never --network=host "$IMAGE" --version)" \
    "outboxd --version in the image"

# By hand (CONTAINER_COMPARE_DEBEZIUM=1): Debezium on the same base,
# tests/debezium/Containerfile, for the sizes side by side; it must at least
# start Kafka Connect's standalone runner (its usage line, no arguments).
if [[ -n "${CONTAINER_COMPARE_DEBEZIUM:-}" ]]; then
    step "Debezium's image on the same base (tests/debezium/Containerfile)"
    mkdir -p "$T/dbz"
    cp -r "$(bash "$E2E_SRC_DIR/tests/debezium/debezium.sh" resolve)" "$T/dbz/jars"
    rm -f "$T/dbz/jars/.complete"
    podman build --pull=never --format docker --network=host \
        -f "$E2E_SRC_DIR/tests/debezium/Containerfile" -t outboxd-test-debezium "$T/dbz" \
        >"$T/dbz/build.log" 2>&1 || { tail -n 30 "$T/dbz/build.log" >&2; fail "podman build of Debezium failed"; }
    dsize=$(podman image inspect --format '{{.Size}}' outboxd-test-debezium)
    # The usage line is logged at INFO; log4j's default configuration logs
    # only errors.
    usage=$(podman run --rm --pull=never --network=host --entrypoint java outboxd-test-debezium \
        -Dorg.apache.logging.log4j.level=INFO -cp '/opt/debezium/lib/*' \
        org.apache.kafka.connect.cli.ConnectStandalone 2>&1 || true)
    [[ "$usage" == *"Usage: ConnectStandalone"* ]] ||
        fail "the Debezium image does not run Kafka Connect: $(tail -n 3 <<<"$usage")"
    info "Debezium image $((dsize / 1000000)) MB (layers over the base $(((dsize - base) / 1000000)) MB) against outboxd's $((size / 1000000)) MB (layers $(((size - base) / 1000000)) MB)"
fi

# ---------------------------------------------------------------- run it

pg_start
broker_start --partitions 3
step "role outboxd (sql/role.sql) with a password, scram-sha-256 for it"
pg_role_outboxd "$SECRET"
if PGPASSWORD=wrong psql -XAtq -U outboxd -c "SELECT 1" >/dev/null 2>&1; then
    fail "the role outboxd connects without its password: pg_hba.conf not in force"
fi

# A port below the kernel's ephemeral range, reserved for this test
# (tests/free_port.sh).
HTTP_PORT=$(_free_port) || fail "no free TCP port"
mkdir -p "$T/state"
chown 10001:10001 "$T/state" # the image's user owns its volume
cat >"$T/outboxd.ini" <<EOF
[postgres]
slot = outboxd
publication = outboxd_pub
plugin = $OUTBOXD_TEST_PLUGIN

[log]
level = info
EOF
chmod 644 "$T/outboxd.ini"

step "podman run --network=host (ini mounted, OUTBOXD_* and PGPASSWORD in the environment)"
{
    _close_sess_fds
    exec podman run --name "$CNAME" --pull=never --network=host --health-interval=disable \
        --read-only --cap-drop=ALL --security-opt=no-new-privileges \
        -v "$T/outboxd.ini:/etc/outboxd/outboxd.ini:ro" \
        -v "$T/state:/var/lib/outboxd" \
        -e "OUTBOXD_POSTGRES_CONNINFO=host=127.0.0.1 port=$PGPORT user=outboxd dbname=postgres" \
        -e "OUTBOXD_KAFKA_BOOTSTRAP_SERVERS=$KAFKA_BOOTSTRAP" \
        -e "OUTBOXD_HTTP_LISTEN=127.0.0.1:$HTTP_PORT" \
        -e "PGPASSWORD=$SECRET" \
        "$IMAGE" >>"$T/outboxd.log" 2>&1 </dev/null
} &
PODMAN_PID=$!
for ((i = 0; i < 300; i++)); do
    [[ "$(psql_q "SELECT active FROM pg_replication_slots WHERE slot_name = 'outboxd'")" == t ]] && break
    kill -0 "$PODMAN_PID" 2>/dev/null || fail "the container exited while starting"
    sleep 0.1
done
[[ "$(psql_q "SELECT active FROM pg_replication_slots WHERE slot_name = 'outboxd'")" == t ]] ||
    fail "outboxd's slot did not become active within 30s"
assert_eq outboxd "$(psql_q "SELECT usename FROM pg_stat_replication")" \
    "the walsender's role (outboxd, with the password from PGPASSWORD)"

step "300 events in 30 transactions"
for ((tx = 0; tx < 30; tx++)); do
    echo "BEGIN;"
    echo "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
          SELECT gen_random_uuid(), (ARRAY['Order','Customer','Invoice'])[1 + i % 3], 'agg-' || (i % 17), $tx * 10 + i,
                 'Changed', jsonb_build_object('tx', $tx, 'i', i)
          FROM generate_series(0, 9) AS i;"
    echo "COMMIT;"
done | psql_q
wait_caught_up 60
check_delivery --exactly-once
assert_eq 300 "$(dump_count "$T/check.dump.jsonl")" "messages delivered from the container"

step "/healthz, /readyz and /metrics from outside the container"
code=$(curl -sS -o "$T/healthz.body" -w '%{http_code}' --max-time 5 \
    "http://127.0.0.1:$HTTP_PORT/healthz") || fail "GET /healthz on 127.0.0.1:$HTTP_PORT failed (curl exit $?)"
assert_eq 200 "$code" "GET /healthz status"
# Ready once streaming and a broker is UP in librdkafka's statistics.
for ((i = 0; i < 60; i++)); do
    code=$(curl -s -o "$T/readyz.body" -w '%{http_code}' --max-time 5 \
        "http://127.0.0.1:$HTTP_PORT/readyz" || true)
    [[ "$code" == 200 ]] && break
    sleep 0.5
done
assert_eq 200 "$code" "GET /readyz status ($(head -c 200 "$T/readyz.body" 2>/dev/null))"
curl -sS -f --max-time 5 -o "$T/metrics.txt" "http://127.0.0.1:$HTTP_PORT/metrics" ||
    fail "GET /metrics failed"
assert_eq 1 "$(awk '$1 == "outboxd_ready" { print $2 }' "$T/metrics.txt")" "outboxd_ready in /metrics"
# Every metric the example alert rules use has a sample in /metrics (a
# "# TYPE" line alone gives an alert nothing to evaluate); the polling
# ones are polling mode's (checked in e2e.observability).
for m in $(grep -o 'outboxd_[a-z_]*' "$E2E_SRC_DIR/deploy/prometheus/outboxd-alerts.yml" | sort -u); do
    [[ "$m" == outboxd_polling_* ]] && continue
    awk -v m="$m" '$1 == m || index($1, m "{") == 1 { found = 1 } END { exit !found }' "$T/metrics.txt" ||
        fail "deploy/prometheus/outboxd-alerts.yml uses $m, which has no sample in /metrics"
    info "ok: /metrics has a sample of $m (used by the alert rules)"
done
# The dead-letter counter is there at 0 before the first dead letter, so
# that the alert sees the first one as an increase.
assert_eq 0 "$(awk '$1 == "outboxd_events_dead_lettered_total{reason=\"NULL_AGGREGATE_ID\"}" { print $2 }' "$T/metrics.txt")" \
    'outboxd_events_dead_lettered_total{reason="NULL_AGGREGATE_ID"} in /metrics'
step "the image's HEALTHCHECK"
hc_out=$(podman healthcheck run "$CNAME" 2>&1) || fail "podman healthcheck run: unhealthy: $hc_out"
assert_eq healthy "$(podman inspect --format '{{.State.Health.Status}}' "$CNAME")" \
    "container health after podman healthcheck run"

step "SIGTERM to the container"
confirmed=$(slot_confirmed_lsn)
podman kill --signal TERM "$CNAME" >/dev/null
rc=$(timeout 60 podman wait "$CNAME") || fail "the container did not stop within 60s of SIGTERM"
assert_eq 0 "$rc" "container exit status after SIGTERM"
wait "$PODMAN_PID" || fail "podman run exited with status $?"
PODMAN_PID=
grep -q 'outboxd 0.1.0 starting' "$T/outboxd.log" || fail "no start line in the container's output"
off=$(offset_file_lsn "$T/state/outboxd.offset" || true)
[[ "$off" =~ ^[0-9A-F]+/[0-9A-F]+$ ]] || fail "offset file in the volume holds '$off', not an LSN"
lsn_ge "$off" "$confirmed" || fail "offset file LSN $off is behind the slot's confirmed_flush_lsn $confirmed"
assert_eq 10001 "$(stat -c %u "$T/state/outboxd.offset")" "owner of the offset file (the image's user)"
if grep -qF -- "$SECRET" "$T/outboxd.log"; then
    fail "the password is in the container's output"
fi
info "offset file $off; the password is in no output line"
step "image: $((size / 1000000)) MB, built in ${build_s}s (librdkafka: $LIBRDKAFKA_FROM)"
e2e_pass
