#!/usr/bin/env bash
# The delivery judge itself (check_delivery.awk) on hand-made inputs, no
# server (issue 54: judges that cannot pass by accident): it passes a
# correct delivery, and fails an empty comparison, a missing event, a
# duplicate where exactly once is expected, and first deliveries against
# the real commit order (the judge slot's) even when outboxd's own
# commit_lsn headers look ordered.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T=$(mktemp -d /tmp/outboxd-judges.XXXXXX)
trap 'rm -rf "$T"' EXIT
hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
# row ID TXID: a committed row of aggregate a-1 (columns as lib.sh reads them)
row() { printf '%s\t%s\toutbox.event.O\t%s\t%s\t%s\t%s\t%s\n' "$(hex "$1")" "$2" "$(hex O)" "$(hex a-1)" "$3" "$(hex E)" "$(hex '{}')"; }
# msg ID PARTITION OFFSET COMMIT_LSN VERSION: its message
msg() { printf 'outbox.event.O\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\taggregate_id,aggregate_type,aggregate_version,commit_lsn,event_id,event_type\t6\n' \
    "$2" "$3" "$(hex a-1)" "$(hex '{}')" "$(hex "$1")" "$(hex E)" "$(hex O)" "$(hex a-1)" "$5" "$4"; }
judge() { # NAME WANT(0|1) ARGS: runs the judge on $T/rows $T/order $T/msgs
    local name=$1 want=$2 rc=0
    shift 2
    awk -F '\t' "$@" -f "$here/lsn.awk" -f "$here/check_delivery.awk" \
        "$T/rows" "$T/order" "$T/msgs" >"$T/out" 2>&1 || rc=$?
    if [[ $rc != "$want" ]]; then
        cat "$T/out" >&2
        echo "judges_test: $name: exit $rc, expected $want" >&2
        exit 1
    fi
    echo "judges_test: ok: $name (exit $rc): $(tail -n 1 "$T/out")"
}
{ row e1 100 1; row e2 101 2; } >"$T/rows"
{ hex e1; echo; hex e2; echo; } >"$T/order"
{ msg e1 0 0 0/10 1; msg e2 0 1 0/20 2; } >"$T/msgs"
judge "a correct delivery" 0 -v once=1
: >"$T/rows"; : >"$T/msgs"
judge "nothing to compare" 1
judge "nothing to compare, allowed" 0 -v allow_empty=1
{ row e1 100 1; row e2 101 2; } >"$T/rows"
msg e1 0 0 0/10 1 >"$T/msgs"
judge "a missing event" 1
{ msg e1 0 0 0/10 1; msg e2 0 1 0/20 2; msg e2 0 2 0/20 2; } >"$T/msgs"
judge "a duplicate under exactly once" 1 -v once=1
judge "a duplicate under at least once" 0
# The server committed e2 first; outboxd's headers (and the versions) claim
# the opposite order and agree with the partition's: only the judge slot
# shows it.
{ hex e2; echo; hex e1; echo; } >"$T/order"
{ row e1 100 1; row e2 101 2; } >"$T/rows"
{ msg e1 0 0 0/10 1; msg e2 0 1 0/20 2; } >"$T/msgs"
judge "first deliveries against the real commit order" 1
: >"$T/order"
judge "the same without the judge slot (headers only)" 0
