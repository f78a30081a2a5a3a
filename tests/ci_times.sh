#!/usr/bin/env bash
# ci_times.sh LOG - the per-group test times of a tests/run-all.sh (or
# .ci/run) output, as the Markdown table of tests/ci.md ("How long CI
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
        if (t ~ /^unit\./) return "01|`unit.*`"
        if (t ~ /^memcheck\./) return "02|`memcheck.*` (valgrind)"
        if (t ~ /^docs\./) return "03|`docs.*`"
        if (t ~ /^e2e\.(pgoutput|wal2json)\./) return "04|`e2e.<plugin>.test_*` (mock)"
        if (t ~ /^e2e\.polling_/) return "05|`e2e.polling_*`"
        if (t ~ /^e2e\./) return "06|`e2e.*` run once"
        if (t ~ /^real\.(pgoutput|wal2json)\.test_/) return "07|`real.<plugin>.test_*`"
        if (t ~ /^real\.faults/) return "08|`real.faults`, `real.faults_exactly_once` (three brokers)"
        if (t ~ /^real\.hot_standby/) return "09|`real.hot_standby*`"
        if (t ~ /^real\.(pgoutput|wal2json)\.exactly_once$/) return "10|`real.<plugin>.exactly_once`"
        if (t ~ /^real\.(resolve|resolve_debezium)$/ || t ~ /^compat\.resolve_/ || t ~ /^pg[0-9]+\.resolve$/) return "11|the resolves (fixtures)"
        if (t ~ /^(compat|kafka39|rdkafka202)\./) return "12a|`kafka39.*`, `rdkafka202.*` (compatibility runs, their build)"
        if (t ~ /^real\./) return "12|`real.*` run once"
        if (t ~ /^pg[0-9]+\./) return "13|`pg16/17/18.*` (matrix subset)"
        if (t ~ /^bench\./) return "14|`bench.*`"
        if (t ~ /^fuzz\./) return "15|`fuzz.decoders`"
        if (t ~ /^sanitize\./) return "16|`sanitize.*` (the ASan build, then its tests)"
        return "99|other"
    }
    {
        g = group($1); n[g]++; s[g] += $NF; all += $NF; tests++
        if ($NF > max[g]) { max[g] = $NF; maxt[g] = $1 }
        if ($2 != "Passed") bad = bad " " $1 "(" $2 ")"
    }
    END {
        print "| group | tests | sum of test times (s) | longest |"
        print "| --- | --- | --- | --- |"
        m = 0
        for (g in n) keys[++m] = g
        # the groups in the order group() names them (a numeric prefix)
        for (i = 2; i <= m; i++)
            for (j = i; j > 1 && keys[j - 1] > keys[j]; j--) { t = keys[j]; keys[j] = keys[j - 1]; keys[j - 1] = t }
        for (i = 1; i <= m; i++) {
            g = keys[i]; label = g; sub(/^[0-9]+[a-z]?\|/, "", label)
            printf "| %s | %d | %.0f | `%s` %.0f s |\n", label, n[g], s[g], maxt[g], max[g]
        }
        printf "| all | %d | %.0f | |\n", tests, all
        if (bad != "") print "not passed:" bad > "/dev/stderr"
    }'
wall=$(sed -n 's/^Total Test time (real) = *\([0-9.]*\) sec$/\1/p' "$log" | tail -n 1)
[[ -z "$wall" ]] || printf '\nctest ran them in %.0f s of wall time.\n' "$wall"
