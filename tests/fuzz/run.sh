#!/usr/bin/env bash
# run.sh [SECONDS] - builds the libFuzzer harnesses of the two decoders with
# clang-14 in build-fuzz/, seeds their corpora from tests/data and runs each
# for SECONDS (default 60). Prints libFuzzer's "Done N runs" line and the
# result per harness; exits 1 when either found a crash, leak, UB, timeout
# or broken check (the reproducer is left in build-fuzz/artifacts/ and the
# whole libFuzzer log in build-fuzz/fuzz_<name>.log), 2 on a usage or build
# error.
#
# Needs clang-14 and libclang-rt-14-dev (deploy/install-deps.sh).
# Environment: FUZZ_CC (default clang-14), FUZZ_BUILD_DIR (default build-fuzz in
# the source tree), FUZZ_ARGS (more libFuzzer options, e.g. -jobs=2).
#
# The working corpora (build-fuzz/corpus/<name>) keep what earlier runs
# found; remove them to start from the seeds alone. A reproducer runs as
#   build-fuzz/tests/fuzz/fuzz_pgoutput build-fuzz/artifacts/pgoutput-crash-...
set -euo pipefail

secs=${1:-60}
if ! [[ "$secs" =~ ^[0-9]+$ ]] || ((secs < 1)); then
    echo "usage: $0 [SECONDS]" >&2
    exit 2
fi
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${FUZZ_BUILD_DIR:-$src/build-fuzz}
cc=${FUZZ_CC:-clang-14} # not CC: CI often sets that to gcc
command -v "$cc" >/dev/null || {
    echo "run.sh: $cc not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
    exit 2
}

mkdir -p "$build"
# CMake cannot switch the compiler of an existing build dir (it wipes the
# cache and drops the -D options): start that one afresh.
if [[ -f "$build/CMakeCache.txt" ]] &&
    ! grep -qx "CMAKE_C_COMPILER:[A-Z]*=$(command -v "$cc")" "$build/CMakeCache.txt"; then
    echo "== $build was configured with another compiler: reconfiguring from scratch"
    rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
echo "== configuring $build with $cc"
cmake -S "$src" -B "$build" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOUTBOXD_FUZZ=ON -DOUTBOXD_TESTS=OFF \
    >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 2; }
echo "== building fuzz_pgoutput fuzz_wal2json"
cmake --build "$build" --target fuzz_pgoutput fuzz_wal2json -j "$(nproc)" \
    >"$build/build.log" 2>&1 || { cat "$build/build.log" >&2; exit 2; }

echo "== seeding"
rm -rf "$build/corpus/seeds"
bash "$src/tests/fuzz/make-corpus.sh" "$build/corpus/seeds"
mkdir -p "$build/artifacts"

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:print_stacktrace=1}

rc=0
for name in pgoutput wal2json; do
    fuzzer=$build/tests/fuzz/fuzz_$name
    log=$build/fuzz_$name.log
    mkdir -p "$build/corpus/$name"
    echo "== fuzz_$name for ${secs}s (log: $log)"
    frc=0
    # -max_len: the captures hold a 100 kB TOASTed message; mutating inputs
    # that long is slow and finds nothing a 16 kB one would not.
    # shellcheck disable=SC2086
    "$fuzzer" -max_total_time="$secs" -max_len=16384 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/artifacts/$name-" ${FUZZ_ARGS:-} \
        "$build/corpus/$name" "$build/corpus/seeds/$name" >"$log" 2>&1 || frc=$?
    done_line=$(grep -E '^Done [0-9]+ runs' "$log" | tail -n 1 || true)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[^ ]+' || true)
    echo "fuzz_$name: ${done_line:-no Done line} (executions: ${execs:-?}; ${cov:-no stats})"
    if ((frc != 0)) || grep -qE '^==[0-9]+== ?ERROR|^SUMMARY: |Test unit written to' "$log"; then
        rc=1
        echo "fuzz_$name: FAILED (exit $frc)"
        grep -E 'ERROR|SUMMARY|check failed|Test unit written to|runtime error' "$log" |
            head -n 20 | sed 's/^/    /' || true
    else
        echo "fuzz_$name: OK, no crash"
    fi
done
exit "$rc"
