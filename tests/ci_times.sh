#!/usr/bin/env bash
# ci_times.sh LOG - the per-group test times of a tests/run-all.sh (or
# .ci/run) output, as the Markdown table of tests/README.md ("How long CI
# takes"): for each group the number of tests, the sum of ctest's times of
# its tests (what the group costs run one at a time) and its longest test.
# The wall time is what the caller measured (.ci/run's whole run); with
# tests side by side it is well below the sum.
#
#   bash tests/ci_times.sh /tmp/ci.log
#   bash tests/ci_times.sh /tmp/ci.log --tests   # every test, longest first
#   bash tests/ci_times.sh /tmp/ci.log --costs   # tests/costs.txt from it
set -euo pipefail
log=${1:?usage: ci_times.sh LOG [--tests]}

# ctest's result lines: "  12/203 Test  #45: e2e.faults ....   Passed  139.05 sec"
results() {
    sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) \.*[ *]*\([A-Za-z][A-Za-z ]*[a-z]\) *\([0-9.]*\) sec$/\1 \2 \3/p' "$log"
}

if [[ "${2:-}" == --costs ]]; then
    echo "# tests/costs.txt - each test's seconds in a measured run (ctest's COST:"
    echo "# ctest -j starts the costliest first; tests/CMakeLists.txt, Scheduling)."
    echo "# Written by: bash tests/ci_times.sh LOG --costs > tests/costs.txt"
    echo "# from the output of tests/run-all.sh or .ci/run. A test not listed costs 0."
    results | awk '{ printf "%s %.0f\n", $1, $NF }' | sort
    exit 0
fi
if [[ "${2:-}" == --tests ]]; then
    results | sort -k3,3 -rn -t' ' | awk '{ printf "%8.1f  %-10s %s\n", $NF, $2, $1 }'
    exit 0
fi

results | awk '
    function group(t) {
        if (t ~ /^unit\./) return "`unit.*`"
        if (t ~ /^memcheck\./) return "`memcheck.*` (valgrind)"
        if (t ~ /^docs\./) return "`docs.*`"
        if (t ~ /^e2e\.(pgoutput|wal2json)\./) return "`e2e.<plugin>.test_*` (mock)"
        if (t ~ /^e2e\.polling_/) return "`e2e.polling_*`"
        if (t ~ /^e2e\./) return "`e2e.*` run once"
        if (t ~ /^real\.(pgoutput|wal2json)\.test_/) return "`real.<plugin>.test_*`"
        if (t ~ /^real\.faults/) return "`real.faults`, `real.faults_exactly_once` (three brokers)"
        if (t ~ /^real\.hot_standby/) return "`real.hot_standby*`"
        if (t ~ /^real\.(pgoutput|wal2json)\.exactly_once$/) return "`real.<plugin>.exactly_once`"
        if (t ~ /^real\.(resolve|resolve_kafka4|resolve_debezium)$/ || t ~ /^pg[0-9]+\.resolve$/) return "the resolves (fixtures)"
        if (t ~ /^real\./) return "`real.*` run once"
        if (t ~ /^pg[0-9]+\./) return "`pg16/17/18.*` (matrix subset)"
        if (t ~ /^bench\./) return "`bench.*`"
        if (t ~ /^fuzz\./) return "`fuzz.decoders`"
        if (t ~ /^sanitize\./) return "`sanitize.unit_e2e`"
        return "other"
    }
    {
        g = group($1); n[g]++; s[g] += $NF; all += $NF; tests++
        if ($NF > max[g]) { max[g] = $NF; maxt[g] = $1 }
        if ($2 != "Passed") bad = bad " " $1 "(" $2 ")"
        if (!(g in seen)) { seen[g] = 1; order[++k] = g }
    }
    END {
        print "| group | tests | sum of test times (s) | longest |"
        print "| --- | --- | --- | --- |"
        for (i = 1; i <= k; i++) {
            g = order[i]
            printf "| %s | %d | %.0f | `%s` %.0f s |\n", g, n[g], s[g], maxt[g], max[g]
        }
        printf "| all | %d | %.0f | |\n", tests, all
        if (bad != "") print "not passed:" bad > "/dev/stderr"
    }'
