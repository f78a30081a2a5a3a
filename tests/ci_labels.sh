# shellcheck shell=bash
# tests/ci_labels.sh - CI_EXCLUDE_LABELS: the ctest labels of the tests that
# tests/run-all.sh leaves out unless OUTBOXD_TESTS=full (the mock copies of
# tests that also run on real Kafka, the PostgreSQL matrix beyond its
# subset, the copies kept out for CI's time; tests/CMakeLists.txt says why
# for each). Sourced by tests/run-all.sh and tests/guarantees.sh.
CI_EXCLUDE_LABELS='mock_dup|pgmatrix_full|full_only'
