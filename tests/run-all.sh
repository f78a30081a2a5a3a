#!/usr/bin/env bash
# Configures and builds into build/, then runs the tests with ctest, several
# at a time: the unit tests and the end-to-end tests (each starts its own
# PostgreSQL, mock Kafka cluster or real Kafka broker, and outboxd, on
# ports and in a directory of its own). ctest's summary ends the output.
# OUTBOXD_TESTS=full also runs the mock_dup tests and the whole PostgreSQL
# version matrix (below).
#
# Parallelism: ctest -j OUTBOXD_TEST_JOBS, by default twice the cores: most
# end-to-end tests wait on their servers most of the time (about 0.2-0.5
# of a core each). The valgrind tests run one at a time, as do the two
# three-broker fault suites (RESOURCE_LOCK; tests/CMakeLists.txt,
# "Scheduling"). OUTBOXD_TEST_JOBS=1 runs one test at a time, as before.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

jobs=$(nproc 2>/dev/null || echo 2)
# The suite's client is the pinned librdkafka (deploy/librdkafka.sh: built
# from source once per machine, a few minutes; nothing when it is there).
# Debian's 2.0.2 gets its own build tree and subset (label rdkafka_compat).
bash deploy/librdkafka.sh >/dev/null
cmake -S . -B build -DOUTBOXD_RDKAFKA=pinned
cmake --build build -j"$jobs"
test_jobs=${OUTBOXD_TEST_JOBS:-$((2 * jobs))}
# ctest starts the costliest tests first (longest first keeps every slot
# busy to the end): each test's COST comes from tests/costs.txt, a measured
# run; a cost file of an earlier run here
# (build/Testing/Temporary/CTestCostData.txt) takes precedence.
# The mock-broker copies of the end-to-end tests that also run against a
# real broker, and inject nothing only the mock can, carry the label
# mock_dup (tests/CMakeLists.txt): left out here unless OUTBOXD_TESTS=full,
# and listed, so that nothing is left out unsaid.
# Likewise the PostgreSQL 16-18 matrix (label pgmatrix) runs only its
# representative subset per version here; the rest of it has the label
# pgmatrix_full (tests/CMakeLists.txt, tests/brokers-and-postgres.md "Tested PostgreSQL versions").
# And the tests with the label full_only: copies kept out of CI for its
# time budget, each with its reason beside it in tests/CMakeLists.txt.
source tests/ci_labels.sh
exclude=()
if [[ "${OUTBOXD_TESTS:-}" != full ]]; then
    exclude=(-LE "$CI_EXCLUDE_LABELS")
    echo "run-all: not running the mock-broker copies of tests that run on real Kafka too" \
        "(label mock_dup; OUTBOXD_TESTS=full tests/run-all.sh runs them):"
    ctest --test-dir build -N -L mock_dup | sed -n 's/^ *Test *#[0-9]*: /  /p'
    echo "run-all: not running the PostgreSQL 16-18 matrix beyond its subset" \
        "(label pgmatrix_full; OUTBOXD_TESTS=full tests/run-all.sh runs them):"
    # -FA: not the resolves ctest would add as the fixtures these need (they run).
    ctest --test-dir build -N -L pgmatrix_full -FA '.*' | sed -n 's/^ *Test *#[0-9]*: /  /p'
    echo "run-all: not running the copies of tests left to the full run for the CI budget" \
        "(label full_only, each says why in tests/CMakeLists.txt; OUTBOXD_TESTS=full runs them):"
    ctest --test-dir build -N -L full_only -FA '.*' | sed -n 's/^ *Test *#[0-9]*: /  /p'
fi
echo "run-all: ctest -j$test_jobs on $jobs cores (OUTBOXD_TEST_JOBS)"
exec ctest --test-dir build --output-on-failure --no-tests=error --no-label-summary \
    -j"$test_jobs" "${exclude[@]}" "$@"
