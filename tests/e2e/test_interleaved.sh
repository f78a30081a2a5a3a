#!/usr/bin/env bash
# Concurrent transactions whose statements interleave and which commit in a
# different order than they began: each arrives whole, in commit order (a
# key written by two transactions keeps commit order), and all events of a
# transaction carry that transaction's commit_lsn.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init interleaved
pg_start
judge_slot
broker_start
outboxd_start

ins() { # aggregate_id version event_type -> an INSERT statement
    printf "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload) VALUES (gen_random_uuid(), 'Acct', '%s', %s, '%s', '{\"v\": %s}');" "$1" "$2" "$3" "$2"
}

sess_open A
sess_open B
sess_open C

step "A begins first, B second; B commits first, then C (autocommit), then A"
sess_run A "BEGIN;"
sess_run A "$(ins acct-a 1 A1)"
sess_run B "BEGIN;"
sess_run B "$(ins acct-b 1 B1)"
sess_run A "$(ins acct-a 2 A2)"
# The shared key: B's write (version 1) commits before A's (version 2).
sess_run B "$(ins shared 1 B-shared)"
sess_run A "$(ins shared 2 A-shared)"
sess_run B "$(ins acct-b 2 B2)"
sess_run B "COMMIT;"
sess_run C "$(ins acct-c 1 C1)"
sess_run A "$(ins acct-a 3 A3)"
sess_run A "COMMIT;"
wait_caught_up 60
check_delivery --exactly-once

d=$T/check.dump.jsonl
lsn_of() { jq -r --arg t "$1" 'select(.headers.event_type == $t) | .headers.commit_lsn' "$d"; }
a=$(lsn_of A1) b=$(lsn_of B1) c=$(lsn_of C1)
info "commit_lsn: A=$a B=$b C=$c"
assert_eq "$a" "$(lsn_of A3)" "A1 and A3 share A's commit_lsn"
assert_eq "$b" "$(lsn_of B2)" "B1 and B2 share B's commit_lsn"
assert_sql "SELECT '$b'::pg_lsn < '$c'::pg_lsn AND '$c'::pg_lsn < '$a'::pg_lsn" "commit_lsn order B < C < A (commit order, not begin order)"
assert_eq "B-shared A-shared" "$(jq -r 'select(.key == "shared") | .headers.event_type' "$d" | xargs)" "order of the shared key's events"

step "a long transaction open across many short ones"
sess_run A "BEGIN;"
sess_run A "$(ins long 1 L1)"
for i in $(seq 1 30); do
    sess_run B "$(ins "short-$((i % 3))" "$i" S)"
    if ((i % 10 == 0)); then sess_run A "$(ins long "$((i / 10 + 1))" L)"; fi
done
# A key written by the short ones and, later in commit order, by the long one.
sess_run A "$(ins short-0 1000 L-on-short)"
sess_run A "COMMIT;"
wait_caught_up 60
check_delivery --exactly-once
assert_eq 1 "$(jq -r 'select(.key == "long" or .headers.event_type == "L-on-short") | .headers.commit_lsn' "$d" | sort -u | wc -l)" \
    "one commit_lsn for the long transaction"

step "a transaction that began before outboxd restarted and commits after"
sess_run A "BEGIN;"
sess_run A "$(ins restart 1 R1)"
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
sess_run B "$(ins restart-other 1 R-other)"
outboxd_start
sess_run A "$(ins restart 2 R2)"
sess_run A "COMMIT;"
wait_caught_up 60
check_delivery --exactly-once

sess_close A
sess_close B
sess_close C
outboxd_stop || fail "outboxd exited with status $OUTBOXD_RC on SIGTERM, expected 0"
e2e_pass
