#!/usr/bin/env bash
# Configures and builds into build/, then runs every test with ctest: the
# unit tests, then the end-to-end tests (each starts its own PostgreSQL,
# mock Kafka cluster and outboxd). ctest's summary ends the output.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build
cmake --build build -j"$jobs"
# Unit tests are declared before the e2e tests in tests/CMakeLists.txt; ctest
# runs tests in declaration order unless it has timing data from an earlier
# run (then it reorders by cost): drop that so unit tests always run first.
rm -f build/Testing/Temporary/CTestCostData.txt
exec ctest --test-dir build --output-on-failure --no-tests=error --no-label-summary "$@"
