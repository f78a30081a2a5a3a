#!/usr/bin/env bash
# tests/sim/mutants.sh - proof that the simulator catches what it found
# (ctest sim.mutants; tests/simulator.md).
#
# Each mutant undoes one fix the simulator led to (or issue 53's dead-letter
# skip, which it had to find), alone, in a scratch worktree of HEAD; the
# simulator, built there, must then fail within CI's seeds (those of
# sim.core). A mutant that passes means the simulator no longer guards that
# path: the test fails and names it.
#
#   tests/sim/mutants.sh [SEEDS]     (default 3500, as sim.core)
set -euo pipefail

seeds=${1:-3500}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d /tmp/outboxd-mutants.XXXXXX)
cleanup() {
    git -C "$src" worktree remove --force "$work/tree" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
git -C "$src" worktree add -q --detach "$work/tree" HEAD
# uncommitted changes of the tree under test come along
git -C "$src" diff HEAD | git -C "$work/tree" apply --allow-empty
cd "$work/tree"
cmake -S . -B build -DOUTBOXD_RDKAFKA="${OUTBOXD_RDKAFKA:-pinned}" -DCMAKE_BUILD_TYPE=Release \
    >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }

# mutant NAME FILE: the python replacement on stdin, as OLD<TAB>NEW lines of
# a here-document would be unreadable; each mutant is a small python body
# that gets s (the file's text) and must return the mutated text.
mutant() {
    local name=$1 file=$2 body
    body=$(cat)
    git checkout -q -- src
    MUTANT_FILE=$file MUTANT_BODY=$body /usr/bin/python3 - <<'PY'
import os
p = os.environ["MUTANT_FILE"]
s = open(p).read()
env = {"s": s}
exec(os.environ["MUTANT_BODY"], env)
if env["out"] == s:
    raise SystemExit("mutant did not change " + p + ": the code moved; update tests/sim/mutants.sh")
open(p, "w").write(env["out"])
PY
    cmake --build build -j"$(nproc)" --target outboxd-sim >"$work/build.log" 2>&1 ||
        { tail -20 "$work/build.log"; echo "mutants: $name: does not build"; exit 1; }
    local out
    if out=$(./build/tests/outboxd-sim --seed 1 --seeds "$seeds" --events 3000); then
        echo "mutants: FAIL: $name: the simulator passed $seeds seeds without the fix"
        failures=$((failures + 1))
    else
        echo "mutants: $name: caught, $(grep -m1 'FAILED' <<<"$out" | sed 's/^sim: //')"
    fi
}

failures=0
mutant "issue 53's dead-letter skip" src/pipeline/changes.c <<'M'
old = """    if (c->cur_seq != 0 && decoder_failure(c->dec, f->data, f->len) == DF_CHANGE &&
        skip_event(c))
        return STEP_OK;"""
out = s.replace(old, "")
M
mutant "the drain writes dead letters (seed 273)" src/relay/relaystate.c <<'M'
old = """    enum step rc = tracker_failed(r->trk) ? STEP_FATAL : changes_resume(&r->chg);
    if (rc == STEP_OK) rc = changes_flush_dead_letters(&r->chg);
    int left = producer_outq_len(r->prod);
    bool more = left > 0 || rc == STEP_HELD || deadletter_busy(&r->chg.dlq);"""
new = """    enum step rc = STEP_OK;
    int left = producer_outq_len(r->prod);
    bool more = left > 0;"""
out = s.replace(old, new)
M
mutant "the progress record's lsn capped by the proof (seed 169)" src/relay/relaytxn.c <<'M'
old = """    lsn_t confirmable = confirm_position(flush, r->confirm.pub_capped, r->confirm.proven_lsn,
                                         r->txn.kt.committed.lsn);"""
out = s.replace(old, "    lsn_t confirmable = flush;")
M
mutant "a slot between lsn and acked is resumed (seed 13)" src/ack/resume.c <<'M'
old = "    if (srv->slot_confirmed <= offset_all_acked(file)) return false;"
out = s.replace(old, "    if (srv->slot_confirmed <= file->lsn) return false;")
M
mutant "the record's acked never goes back (seed 54)" src/relay/relaytxn.c <<'M'
out = s.replace("    if (flush < stored) flush = stored;", "    (void)stored;")
M
mutant "a shared slot is taken over only past acked (seed 60)" src/ack/resume.c <<'M'
old = """    if (srv->slot_confirmed > offset_all_acked(&at)) {
        take_over(&w, out);"""
new = """    if (srv->slot_confirmed > at.lsn &&
        (srv->shared || srv->slot_confirmed > offset_all_acked(&at))) {
        take_over(&w, out);"""
out = s.replace(old, new)
M
git checkout -q -- src
if ((failures > 0)); then
    echo "mutants: $failures mutant(s) not caught"
    exit 1
fi
echo "mutants: every mutant caught within seeds 1..$seeds"
