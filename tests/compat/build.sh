#!/usr/bin/env bash
# tests/compat/build.sh SRC BUILD - the second build tree of the
# librdkafka compatibility runs (rdkafka202.*, tests/CMakeLists.txt):
# outboxd and the test helpers linked against the system's librdkafka
# (Debian 12: 2.0.2) instead of the pinned release the suite uses
# (deploy/librdkafka.sh). Fails, naming why, when the system's librdkafka
# is missing or is the pinned release itself (nothing would be compared).
set -euo pipefail
src=$1 build=$2
pinned=$(bash "$src/deploy/librdkafka.sh" --version)
system=$(pkg-config --modversion rdkafka 2>/dev/null) ||
    { echo "compat/build.sh: FAIL: no system librdkafka (Debian: apt-get install librdkafka-dev)" >&2; exit 1; }
[[ "$system" != "$pinned" ]] ||
    { echo "compat/build.sh: FAIL: the system's librdkafka is the pinned $pinned: no older client to test" >&2; exit 1; }
log="$build.log"
mkdir -p "$build"
{
    cmake -S "$src" -B "$build" -DOUTBOXD_RDKAFKA=system
    cmake --build "$build" -j"$(nproc)" --target outboxd outboxd-mockbroker outboxd-kdump \
        outboxd-trickle outboxd-kwatch outboxd-kprobe outboxd-pgwait
} >"$log" 2>&1 || { tail -n 40 "$log" >&2; echo "compat/build.sh: FAIL: the build against librdkafka $system failed (above)" >&2; exit 1; }
got=$("$build/outboxd" --version | sed -n 's/^librdkafka //p')
[[ "$got" == "$system" ]] ||
    { echo "compat/build.sh: FAIL: $build/outboxd runs librdkafka $got, not the system's $system" >&2; exit 1; }
echo "compat/build.sh: $build: outboxd with librdkafka $got (the suite's: $pinned)"
