#!/usr/bin/env bash
# sanitize.sh [ctest args] - builds the whole project and its tests with
# AddressSanitizer + UndefinedBehaviorSanitizer (OUTBOXD_SANITIZE=ON) in
# build-asan/ and runs the unit tests and the end-to-end tests there with
# ctest (the tests that use valgrind are left out: valgrind cannot run ASan
# binaries). The e2e tests get OUTBOXD_BUILD_DIR=build-asan from ctest, so
# they start the sanitized outboxd, mock broker and kdump.
#
# Every sanitizer report of every process (outboxd, the helpers, the unit
# tests) is written to build-asan/sanitizer-logs/ rather than into the logs
# the tests read; the script prints them all at the end and fails when
# there is any, even for a process whose exit status no test looked at.
# Leaks are suppressed only for third-party frames (tests/lsan.supp).
#
# --build-only / --no-build (first argument): only the build, or only the
# tests of a build made before (CI: sanitize.build, then sanitize.unit_e2e,
# so the image's build can run beside the sanitized tests, not the
# sanitized build).
#
# Examples:  tests/sanitize.sh                 # everything (unit + e2e)
#            tests/sanitize.sh -L unit         # unit tests only
#            tests/sanitize.sh -R 'e2e.pgoutput.test_basic'
#            tests/sanitize.sh -E 'faults|e2e\.wal2json\.'   # shorter
# Environment: ASAN_BUILD_DIR (default build-asan in the source tree),
# CC (default: cmake's choice, gcc on Debian), SANITIZE_JOBS (ctest -j of
# the run inside, default 1; sanitize.unit_e2e sets it, tests/CMakeLists.txt).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${ASAN_BUILD_DIR:-$src/build-asan}
logs=$build/sanitizer-logs
jobs=$(nproc 2>/dev/null || echo 2)

do_build=1 do_tests=1
case ${1:-} in
--build-only) do_tests=0; shift ;;
--no-build) do_build=0; shift ;;
esac

mkdir -p "$build"
if ((do_build)); then
    echo "== configuring $build (OUTBOXD_SANITIZE=ON)"
    # -O1: usable stack traces at a tolerable speed; Debug keeps assert().
    cmake -S "$src" -B "$build" -DOUTBOXD_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
        -DCMAKE_C_FLAGS_DEBUG="-g -O1" >"$build/configure.log" 2>&1 ||
        { cat "$build/configure.log" >&2; exit 2; }
    echo "== building"
    cmake --build "$build" -j"$jobs" >"$build/build.log" 2>&1 ||
        { tail -n 50 "$build/build.log" >&2; exit 2; }
fi
# The binaries the tests start must be the instrumented ones.
for bin in outboxd tests/outboxd-mockbroker tests/outboxd-kdump; do
    syms=$(nm "$build/$bin" 2>/dev/null || true)
    if [[ "$syms" != *__asan_init* ]]; then
        echo "sanitize.sh: $build/$bin is not built with ASan" >&2
        exit 2
    fi
done
if ((!do_tests)); then
    echo "== $build is built with ASan and UBSan"
    exit 0
fi

rm -rf "$logs"
mkdir -p "$logs"
# halt_on_error: the first error ends the process (UBSan too, and the build
# has -fno-sanitize-recover=undefined). log_path: one file per process that
# reports, <log>.<pid>. detect_leaks: LeakSanitizer at every normal exit.
common="print_stacktrace=1:halt_on_error=1:log_path=$logs/report"
export ASAN_OPTIONS="$common:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1"
export LSAN_OPTIONS="suppressions=$src/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="$common"
# Check's per-test timeouts (default 4 s) assume an uninstrumented build.
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-10}
echo "== ASAN_OPTIONS=$ASAN_OPTIONS"
echo "== LSAN_OPTIONS=$LSAN_OPTIONS"
echo "== UBSAN_OPTIONS=$UBSAN_OPTIONS"

# Tests that run outboxd under valgrind cannot run ASan binaries: left out
# (label memcheck, and e2e.valgrind_*), also when the caller excludes more
# with -E REGEX (the two regexes are joined).
exclude='valgrind'
args=()
while (($#)); do
    case $1 in
    -E | --exclude-regex)
        exclude="$exclude|${2:?$1 needs a regex}"
        shift 2
        ;;
    *)
        args+=("$1")
        shift
        ;;
    esac
done

# The mock copies of e2e tests that also run on real Kafka (label
# mock_dup, see tests/run-all.sh) are left out here too unless
# OUTBOXD_TESTS=full, and listed, except the ones whose code paths only a
# sanitizer checks well: the two stream readers' buffers
# (test_stream_reader, where UBSan found a memmove from NULL), the 10 MB
# transaction (test_large_txn) and the relation cache under ALTER TABLE
# (test_alter_table). With the mock copies of test_basic, test_poison and
# test_broker_down and every once-only e2e test, that still reaches every
# decoder, the producer, the tracker, dead-lettering and the confirmation.
if [[ "${OUTBOXD_TESTS:-}" != full ]]; then
    keep='test_stream_reader|test_large_txn|test_alter_table'
    mapfile -t dups < <(ctest --test-dir "$build" -N -L mock_dup |
        sed -n 's/^ *Test *#[0-9]*: //p' | grep -Ev "\.($keep)\$" || true)
    if ((${#dups[@]})); then
        echo "== not run under the sanitizers (label mock_dup; OUTBOXD_TESTS=full runs them):"
        printf '  %s\n' "${dups[@]}"
        dup_re=$(printf '%s|' "${dups[@]}")
        exclude="$exclude|^(${dup_re%|})\$"
    fi
fi

# The PostgreSQL 16-18 matrix (label pgmatrix) runs outboxd's same code on
# other servers; its sanitizer coverage is the PostgreSQL 15 tests', and CI
# has no time for a second matrix: left out, and said.
echo "== not run under the sanitizers: the PostgreSQL 16-18 matrix (label pgmatrix; tests/run-all.sh runs it)"

rm -f "$build/Testing/Temporary/CTestCostData.txt" # tests/costs.txt orders the run, not an earlier run's file
rc=0
ctest --test-dir "$build" -LE 'memcheck|pgmatrix' -E "$exclude" --output-on-failure \
    --no-tests=error --no-label-summary -j"${SANITIZE_JOBS:-1}" "${args[@]}" || rc=1

# Which build did the e2e tests use? lib.sh names it in its first line.
if grep -q '(plugin [a-z0-9]*, build ' "$build/Testing/Temporary/LastTest.log" 2>/dev/null; then
    others=$(grep -o '(plugin [a-z0-9]*, build [^)]*)' "$build/Testing/Temporary/LastTest.log" |
        grep -v "build $build)" | sort -u || true)
    if [[ -n "$others" ]]; then
        echo "sanitize.sh: some e2e tests did not use $build:" >&2
        echo "$others" >&2
        rc=1
    else
        echo "== every e2e test ran the binaries of $build"
    fi
fi

shopt -s nullglob
reports=("$logs"/report.*)
if ((${#reports[@]})); then
    echo "== ${#reports[@]} sanitizer report(s) in $logs:"
    for f in "${reports[@]}"; do
        echo "----- $f"
        cat "$f"
    done
    rc=1
else
    echo "== no sanitizer reports"
fi
exit "$rc"
