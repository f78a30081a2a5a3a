# check_delivery.awk - compares committed outbox rows with dumped messages.
# Used by check_delivery in lib.sh; POSIX awk (runs under mawk).
#
# awk -F '\t' -v once=0|1 -f check_delivery.awk ROWS ORDER MSGS
#
# ROWS (from psql), one committed event per line:
#   1 event_id hex  2 txid  3 expected topic  4 aggregate_type hex
#   5 aggregate_id hex  6 aggregate_version or -  7 event_type hex
#   8 payload::text hex or -
# -v strict_tx=1: the txids are top-level transaction ids (then two
# transactions must not share a commit_lsn); with xmin, rows inserted in
# subtransactions (savepoints) have their own xids, so only "same xid, same
# commit_lsn" is checked.
# ORDER (from lib.sh's judge slot; may be empty): the event_id hex of every
#   outbox row in the order the server decodes them, the real commit order
#   (statement order inside a transaction). When it is there, the first
#   deliveries in each partition must follow it.
# MSGS (from jq over outboxd-kdump's output, in topic/partition/offset order):
#   1 topic  2 partition  3 offset  4 key hex or -  5 value hex or -
#   6 event_id header hex  7 event_type hex  8 aggregate_type hex
#   9 aggregate_id hex  10 aggregate_version  11 commit_lsn
#   12 sorted header names, comma-joined  13 number of headers
# ("-" = absent/null.)
# -v allow_empty=1: no row at all is not a failure (otherwise it is: an
# empty comparison proves nothing).
# Prints findings; exits 1 when anything is wrong.

function err(cat, msg) {
    nerr[cat]++
    total++
    if (nerr[cat] <= 10)
        print "  " cat ": " msg
    else if (nerr[cat] == 11)
        print "  " cat ": ... (more)"
}

# Hex bytes to printable text (for messages): ASCII as is, others \xNN.
function unhex(h,    i, c, out, n) {
    if (h == "-") return "<null>"
    out = ""
    for (i = 1; i < length(h); i += 2) {
        n = (index(HEX, substr(h, i, 1)) - 1) * 16 + index(HEX, substr(h, i + 1, 1)) - 1
        if (n >= 32 && n < 127)
            out = out sprintf("%c", n)
        else
            out = out "\\x" substr(h, i, 2)
        if (length(out) > 80) return out "..."
    }
    return out
}

function bytes(h) { return h == "-" ? "null" : (length(h) / 2) " bytes" }

BEGIN {
    HEX = "0123456789abcdef"
    nrows = 0; nmsgs = 0; dups = 0; total = 0; ndistinct = 0; ntx = 0; nkeys = 0; njudge = 0
}

FILENAME == ARGV[1] {
    if ($1 in exp_tx) err("row", "event_id " unhex($1) " listed twice")
    exp_tx[$1] = $2; exp_topic[$1] = $3; exp_atype[$1] = $4; exp_aid[$1] = $5
    exp_ver[$1] = $6; exp_etype[$1] = $7; exp_payload[$1] = $8
    nrows++
    next
}

FILENAME == ARGV[2] {
    if (!($1 in judge_pos)) judge_pos[$1] = ++njudge
    next
}

{
    nmsgs++
    ev = $6
    where = $1 "[" $2 "]@" $3
    if (ev == "-") { err("no-event-id", where " has no event_id header"); next }
    if (!(ev in exp_tx)) {
        err("unexpected", where ": event_id " unhex(ev) " is not a committed outbox row (rolled back / unknown)")
        next
    }
    id = unhex(ev)

    # Content.
    if ($1 != exp_topic[ev])
        err("topic", where ": event " id " in topic " $1 ", expected " exp_topic[ev])
    if ($4 != exp_aid[ev])
        err("key", where ": event " id ": key '" unhex($4) "' != aggregate_id '" unhex(exp_aid[ev]) "'")
    if ($5 != exp_payload[ev])
        err("value", where ": event " id ": value (" bytes($5) ") != payload::text (" bytes(exp_payload[ev]) "): '" unhex($5) "' vs '" unhex(exp_payload[ev]) "'")
    if ($7 != exp_etype[ev])
        err("header", where ": event " id ": event_type header '" unhex($7) "' != '" unhex(exp_etype[ev]) "'")
    if ($8 != exp_atype[ev])
        err("header", where ": event " id ": aggregate_type header '" unhex($8) "' != '" unhex(exp_atype[ev]) "'")
    if ($9 != exp_aid[ev])
        err("header", where ": event " id ": aggregate_id header '" unhex($9) "' != '" unhex(exp_aid[ev]) "'")
    if (exp_ver[ev] == "-") {
        names = "aggregate_id,aggregate_type,commit_lsn,event_id,event_type"; cnt = 5
    } else {
        names = "aggregate_id,aggregate_type,aggregate_version,commit_lsn,event_id,event_type"; cnt = 6
        if ($10 != exp_ver[ev])
            err("header", where ": event " id ": aggregate_version header '" $10 "' != " exp_ver[ev])
    }
    if ($12 != names || $13 != cnt)
        err("header-set", where ": event " id ": headers [" $12 "] (" $13 "), expected [" names "]")
    if ($11 !~ /^[0-9A-F]+\/[0-9A-F]+$/)
        err("commit_lsn", where ": event " id ": commit_lsn header '" $11 "' is not an LSN")

    # One commit_lsn per transaction, a different one for each.
    tx = exp_tx[ev]
    if (tx in tx_lsn) {
        if (tx_lsn[tx] != $11)
            err("commit_lsn-tx", where ": event " id ": commit_lsn " $11 " but other events of its transaction (" tx ") have " tx_lsn[tx])
    } else {
        tx_lsn[tx] = $11; ntx++
        if (strict_tx + 0 && ($11 in lsn_tx) && lsn_tx[$11] != tx)
            err("commit_lsn-tx", where ": transactions " tx " and " lsn_tx[$11] " share commit_lsn " $11)
        lsn_tx[$11] = tx
    }

    # A key's messages all on one partition.
    stream = $1 SUBSEP $4
    if (stream in key_part) {
        if (key_part[stream] != $2)
            err("key-partition", "key '" unhex($4) "' of " $1 " is on partitions " key_part[stream] " and " $2)
    } else {
        key_part[stream] = $2; nkeys++
    }

    seen[ev]++
    if (seen[ev] > 1) {
        dups++
        if (first_lsn[ev] != $11)
            err("dup-lsn", where ": duplicate of event " id " has commit_lsn " $11 ", first had " first_lsn[ev])
        next
    }
    ndistinct++
    first_lsn[ev] = $11

    # Order of first deliveries: commit order per partition, versions per key.
    pk = $1 SUBSEP $2
    l = lsnnum($11)
    if ((pk in part_lsn) && l < part_lsn[pk])
        err("partition-order", where ": event " id " (commit_lsn " $11 ") after an event with commit_lsn " part_lsnstr[pk])
    if (!(pk in part_lsn) || l > part_lsn[pk]) { part_lsn[pk] = l; part_lsnstr[pk] = $11 }
    # ... and against the real commit order, when the judge slot gave it.
    if (njudge > 0) {
        if (!(ev in judge_pos))
            err("commit-order", where ": event " id " is not among the rows the server decoded")
        else {
            jp = judge_pos[ev]
            if ((pk in part_judge) && jp < part_judge[pk])
                err("commit-order", where ": event " id " (decoded " jp "th) first delivered after event " part_judge_id[pk] " (decoded " part_judge[pk] "th): not in commit order")
            if (!(pk in part_judge) || jp > part_judge[pk]) { part_judge[pk] = jp; part_judge_id[pk] = id }
        }
    }
    if (exp_ver[ev] != "-") {
        v = exp_ver[ev] + 0
        if ((stream in key_ver) && v < key_ver[stream])
            err("key-order", where ": key '" unhex($4) "': version " v " after version " key_ver[stream])
        if (!(stream in key_ver) || v > key_ver[stream]) key_ver[stream] = v
    }
}

END {
    # Nothing to compare proves nothing: a test that committed no row (or
    # read the wrong table) must not pass as "nothing missing".
    if (nrows == 0 && !(allow_empty + 0))
        err("empty", "no committed outbox row to check (pass -v allow_empty=1 where none is the point)")
    nmissing = 0
    for (ev in exp_tx) {
        if (!(ev in seen)) {
            nmissing++
            err("missing", "event " unhex(ev) " (aggregate " unhex(exp_atype[ev]) "/" unhex(exp_aid[ev]) " version " exp_ver[ev] ", txid " exp_tx[ev] ") never arrived")
        }
    }
    if (once + 0 && dups > 0)
        err("duplicates", dups " duplicate deliveries where exactly-once was expected")
    printf "  check_delivery: %d committed events, %d messages (%d distinct, %d duplicates, %d missing), %d transactions, %d keys, order judged on %s: %s\n", \
        nrows, nmsgs, ndistinct, dups, nmissing, ntx, nkeys, (njudge ? "the real commit order and the commit_lsn headers" : "the commit_lsn headers"), (total ? "FAILED" : "OK")
    exit(total ? 1 : 0)
}
