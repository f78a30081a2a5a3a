#!/usr/bin/env bash
# tests/bench/plots.sh - the peer benchmark's figures as pictures: draws
# the JSON tests/bench/peer.sh writes into three SVG files with gnuplot
# (Debian's gnuplot-nox):
#   drain.svg    drain rate of pg_recvlogical, outboxd and Debezium (the
#                medians of the pairs, events/s);
#   latency.svg  commit-to-consumer latency at the steady rate, as a
#                distribution: percentile against milliseconds (log), one
#                curve per relay (each percentile the median of the pairs);
#   rss.svg      resident memory over the first pair's drain, outboxd and
#                Debezium (sampled every 100 ms from the moment the slot
#                turned active).
#
# Usage: tests/bench/plots.sh [PEER_JSON] [--out DIR | --check]
#   PEER_JSON: default the newest tests/bench/results/*-peer*.json (the
#   committed run that tests/bench/peers.md shows); DIR: default
#   tests/bench/plots. The files are regenerated from the JSON alone:
#   nothing is measured here. --check: draws into a temporary directory
#   and fails (exit 1) unless the committed tests/bench/plots/ files are
#   the same bytes (docs.plots in CI). Exit 2 on a JSON without the
#   figures.
set -Eeuo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
JSON= OUTDIR=$HERE/plots CHECK=0
while [[ $# -gt 0 ]]; do
    case $1 in
    --out) OUTDIR=$2; shift 2 ;;
    --check) CHECK=1; shift ;;
    -h | --help) sed -n '2,/^$/p' "$0"; exit 0 ;;
    -*) echo "plots.sh: unknown option '$1'" >&2; exit 2 ;;
    *) JSON=$1; shift ;;
    esac
done
if [[ -z $JSON ]]; then
    JSON=$(ls "$HERE"/results/*-peer*.json 2>/dev/null | sort | tail -n 1) ||
        { echo "plots.sh: no tests/bench/results/*-peer*.json" >&2; exit 2; }
fi
[[ -f $JSON ]] || { echo "plots.sh: no such file: $JSON" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "plots.sh: gnuplot is not installed (gnuplot-nox)" >&2; exit 2; }
jq -e '.drain.outboxd.events_per_s and .drain.debezium.events_per_s and
       ([.runs[] | select(.kind == "steady") | .cdf_us | length] | min >= 101) and
       ([.runs[] | select(.kind == "drain" and .relay != "recvlogical") | .rss_series | length] | min > 0)' \
    "$JSON" >/dev/null ||
    { echo "plots.sh: $JSON lacks a figure (drain rates, cdf_us, rss_series: a peer.sh run of this version)" >&2; exit 2; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
((CHECK)) && OUTDIR=$W/out
mkdir -p "$OUTDIR"

# The run's conditions, under each title.
sub=$(jq -r '"\(.events) events per drain, \(.pairs) pair(s); steady \(.steady_rate) events/s"' "$JSON")
src=$(basename "$JSON")
# Labels of the relays, in the order drawn.
label() {
    case $1 in
    recvlogical) echo "pg_recvlogical" ;;
    outboxd) echo "outboxd" ;;
    debezium) echo "Debezium" ;;
    debezium_small) echo "Debezium -Xmx128m" ;;
    esac
}

# ---------------------------------------------------------------- drain
jq -r '.drain | to_entries[] | "\(.key) \(.value.events_per_s)"' "$JSON" |
    while read -r relay rate; do
        case $relay in recvlogical) o=1 ;; outboxd) o=2 ;; debezium) o=3 ;; *) o=4 ;; esac
        printf '%d "%s" %.0f\n' "$o" "$(label "$relay")" "$rate"
    done | sort -n >"$W/drain.dat"
gnuplot <<GP
set terminal svg size 720,400 dynamic font "sans,12"
set output "$OUTDIR/drain.svg"
set title "Drain of one backlog, events/s (higher is better)\n{/*0.8 $sub; $src}"
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.6
set yrange [0:*]
set offsets 0, 0, graph 0.12, 0
set xtics noenhanced # "_" is not a subscript in the names
set grid ytics
set ylabel "events/s"
unset key
plot "$W/drain.dat" using 3:xtic(2) linecolor rgb "#4472c4" title "events/s", \
     "" using 0:3:(sprintf("%'.0f", \$3)) with labels offset 0,0.8 notitle
GP

# ---------------------------------------------------------------- latency
for relay in outboxd debezium; do
    jq -r --arg r "$relay" '
        def median: sort | if length % 2 == 1 then .[length / 2 | floor]
                           else (.[length / 2 - 1] + .[length / 2]) / 2 end;
        [.runs[] | select(.kind == "steady" and .relay == $r) | .cdf_us] | transpose
        | map(median) | to_entries[]
        | "\(if .key < 99 then .key + 1 elif .key == 99 then 99.5 else 99.9 end) \(.value / 1000)"' \
        "$JSON" >"$W/lat.$relay.dat"
done
gnuplot <<GP
set terminal svg size 720,420 dynamic font "sans,12"
set output "$OUTDIR/latency.svg"
set title "Commit to consumer, steady state (further left is better)\n{/*0.8 $sub; $src}"
set logscale x 10
set xlabel "milliseconds from the commit to the consumer's receipt (log scale)"
set ylabel "percentile of events"
set yrange [0:100]
set grid xtics ytics mxtics
set key bottom right
plot "$W/lat.outboxd.dat" using 2:1 with lines linewidth 2 linecolor rgb "#4472c4" title "outboxd", \
     "$W/lat.debezium.dat" using 2:1 with lines linewidth 2 linecolor rgb "#c55a11" title "Debezium"
GP

# ---------------------------------------------------------------- rss
for relay in outboxd debezium; do
    jq -r --arg r "$relay" '[.runs[] | select(.kind == "drain" and .relay == $r)][0].rss_series[]
        | "\(.[0]) \(.[1] / 1024)"' "$JSON" >"$W/rss.$relay.dat"
done
gnuplot <<GP
set terminal svg size 720,420 dynamic font "sans,12"
set output "$OUTDIR/rss.svg"
set title "Resident memory over a drain, first pair (lower is better)\n{/*0.8 $sub; $src}"
set xlabel "seconds since the relay's slot turned active"
set ylabel "RSS, MiB"
set yrange [0:*]
set grid ytics
set key right center
plot "$W/rss.outboxd.dat" using 1:2 with lines linewidth 2 linecolor rgb "#4472c4" title "outboxd", \
     "$W/rss.debezium.dat" using 1:2 with lines linewidth 2 linecolor rgb "#c55a11" title "Debezium"
GP
for f in drain latency rss; do
    [[ -s $OUTDIR/$f.svg ]] || { echo "plots.sh: gnuplot wrote no $OUTDIR/$f.svg" >&2; exit 1; }
done
if ((CHECK)); then
    for f in drain latency rss; do
        cmp -s "$OUTDIR/$f.svg" "$HERE/plots/$f.svg" ||
            { echo "plots.sh: tests/bench/plots/$f.svg is not what $src draws: run tests/bench/plots.sh" >&2; exit 1; }
    done
    echo "plots.sh: tests/bench/plots/ is what $src draws"
    exit 0
fi
echo "plots.sh: $OUTDIR/drain.svg, latency.svg, rss.svg from $src"
