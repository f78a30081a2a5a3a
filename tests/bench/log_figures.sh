# shellcheck shell=bash
#
# tests/bench/log_figures.sh - the figures outboxd logs at stop, read out
# of its log as JSON for tests/bench/run.sh (sourced by it; needs jq).
# Only what a line says is taken: a figure printed as n/a becomes null, a
# line that is absent gives nothing, so no figure is ever made up.
#
# The lines (one each, anywhere in a line of the log; X may be n/a, and
# " us" may then be missing):
#
#   stage STAGE over N events: p50 X us, p99 X us, max X us
#   stage ack-to-confirm over N transactions: p50 X us, p99 X us, max X us
#       (STAGE: commit-to-receive, receive-to-produce, produce-to-ack)
#   kafka broker NAME over W windows: rtt avg X us p99 X us; int_latency avg
#       X us p99 X us; outbuf_latency avg X us p99 X us; produce requests X,
#       bytes per request X; thread wake-ups X               (on one line)

# A figure: a number or n/a, its unit optional.
_LF_NUM='([0-9]+(\.[0-9]+)?|n/a)( us)?'
_LF_STAGE="stage [a-z-]+ over [0-9]+ (events|transactions): p50 $_LF_NUM, p99 $_LF_NUM, max $_LF_NUM"
_LF_BROKER="kafka broker [^ ]+ over [0-9]+ windows: rtt avg $_LF_NUM p99 $_LF_NUM; int_latency avg $_LF_NUM p99 $_LF_NUM; outbuf_latency avg $_LF_NUM p99 $_LF_NUM; produce requests $_LF_NUM, bytes per request $_LF_NUM; thread wake-ups $_LF_NUM"

# _lf_lines LOG PREFIX_RE FULL_RE: the parts of LOG's lines that match
# FULL_RE; a line that starts like one (PREFIX_RE) but does not match it
# is reported on stderr, not guessed at.
_lf_lines() {
    local bad
    bad=$(grep -oE "$2.*" "$1" | grep -vE "^$3" || true)
    [[ -z "$bad" ]] || printf 'log_figures: %s: lines not understood (skipped):\n%s\n' "$1" "$bad" >&2
    grep -oE "$3" "$1" || true
}

# stages_json LOG: {"commit-to-receive": {"n":N,"p50_us":X,"p99_us":X,
# "max_us":X}, ...} from LOG's stage lines ({} when there are none; the
# last line of a stage wins).
stages_json() {
    _lf_lines "$1" 'stage [a-z-]+ over [0-9]+ ' "$_LF_STAGE" | jq -Rn '
        def num: if . == "n/a" then null else tonumber end;
        [inputs | capture("^stage (?<stage>[a-z-]+) over (?<n>[0-9]+) [a-z]+: "
                          + "p50 (?<p50_us>[0-9.]+|n/a)( us)?, p99 (?<p99_us>[0-9.]+|n/a)( us)?, "
                          + "max (?<max_us>[0-9.]+|n/a)")
         | {key: .stage, value: {n: (.n | tonumber), p50_us: (.p50_us | num),
                                 p99_us: (.p99_us | num), max_us: (.max_us | num)}}]
        | from_entries'
}

# brokers_json LOG: [{"name":NAME,"windows":W,"rtt_avg_us":X,"rtt_p99_us":X,
# "int_latency_avg_us":X,"int_latency_p99_us":X,"outbuf_latency_avg_us":X,
# "outbuf_latency_p99_us":X,"produce_requests":X,"bytes_per_request":X,
# "thread_wakeups":X},
# ...] from LOG's broker lines, in their order ([] when there are none).
brokers_json() {
    _lf_lines "$1" 'kafka broker [^ ]+ over [0-9]+ windows' "$_LF_BROKER" | jq -Rn '
        def num: if . == "n/a" then null else tonumber end;
        def f($name): "(?<" + $name + ">[0-9.]+|n/a)( us)?";
        [inputs | capture("^kafka broker (?<name>[^ ]+) over (?<windows>[0-9]+) windows: "
                          + "rtt avg " + f("rtt_avg_us") + " p99 " + f("rtt_p99_us")
                          + "; int_latency avg " + f("int_latency_avg_us")
                          + " p99 " + f("int_latency_p99_us")
                          + "; outbuf_latency avg " + f("outbuf_latency_avg_us")
                          + " p99 " + f("outbuf_latency_p99_us")
                          + "; produce requests " + f("produce_requests")
                          + ", bytes per request " + f("bytes_per_request")
                          + "; thread wake-ups " + f("thread_wakeups"))
         | {name, windows: (.windows | tonumber)}
           + (to_entries | map(select(.key != "name" and .key != "windows"))
              | map(.value |= num) | from_entries)]'
}
