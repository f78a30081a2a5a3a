#!/usr/bin/env bash
# deploy/demo.sh as a newcomer runs it (issue 56): in a terminal (a
# pseudo-terminal from util-linux's script), stopped with Ctrl-C once its
# first OrderUpdated message is printed. It must:
#  - print each message whole (topic, headers, value lines together; two
#    consumers used to interleave them character by character);
#  - end on Ctrl-C with its summary and exit 0, no failure words, no logs;
#  - leave no process and no file behind;
#  - print what README.md's first screen shows (the block between the
#    demo-output markers), up to what varies from run to run (times,
#    ports, LSNs, event ids, paths), which both are normalized for.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init demo_tty
command -v script >/dev/null || fail "script (util-linux) is not installed"
mkdir -m 755 "$T/tmp" # the demo's own directory goes in here
mkfifo "$T/tty_in"
out=$T/tty.out

step "deploy/demo.sh in a pseudo-terminal; Ctrl-C after its first OrderUpdated"
# The keyboard: holds the terminal's input open, types Ctrl-C (^C: the
# terminal sends SIGINT to the demo) once the condition holds.
keyboard() {
    exec 3>"$T/tty_in"
    local i
    for ((i = 0; i < 1200; i++)); do
        grep -q '"step": 3' "$out" 2>/dev/null && break
        sleep 0.1
    done
    printf '\003' >&3
    # Keep the input open until the demo is gone (script ends then).
    while :; do sleep 1; done
}
e2e_bg keyboard
kb=$E2E_BG_PID
rc=0
# script runs its command with $SHELL -c, or /bin/sh -c where SHELL is unset
# (as in CI): exec, so that no other shell stands between the terminal and
# the demo (dash, waiting for the demo, died of the same Ctrl-C: exit 130).
timeout 180 script -qefc "exec env TMPDIR='$T/tmp' DEMO_BUILD='$OUTBOXD_BUILD_DIR' bash '$E2E_SRC_DIR/deploy/demo.sh'" \
    /dev/null <"$T/tty_in" >"$out" 2>&1 || rc=$?
kill "$kb" 2>/dev/null || true
wait "$kb" 2>/dev/null || true
tr -d '\r' <"$out" >"$T/demo.out"
sed 's/^/        | /' "$T/demo.out" >&2
assert_eq 0 "$rc" "the demo's exit status after Ctrl-C"

step "the output"
if grep -nE 'FAIL|interrupted|-----.*log|ERROR' "$T/demo.out" >&2; then
    fail "failure words or a log dump in the demo's output"
fi
grep -q '^\^C' "$T/demo.out" || fail "the terminal did not echo the Ctrl-C"
grep -q 'demo: stopped; everything it started is removed$' "$T/demo.out" ||
    fail "no closing line"
grep -q '^demo: the rolled-back order o-18 never appeared in Kafka$' "$T/demo.out" ||
    fail "the summary does not say the rolled-back event never appeared"
read -r committed inkafka acked < <(sed -nE 's/^demo: ([0-9]+) events committed, ([0-9]+) in Kafka, ([0-9]+) ACKed to outboxd.*/\1 \2 \3/p' "$T/demo.out")
[[ -n "${committed:-}" && $committed -ge 4 && $committed == "$inkafka" && $committed == "$acked" ]] ||
    fail "the summary's counts: committed ${committed:-?}, in Kafka ${inkafka:-?}, ACKed ${acked:-?}"
grep -qE '^demo: slot "outboxd" confirmed up to [0-9A-F]+/[0-9A-F]+ ' "$T/demo.out" ||
    fail "the summary does not give the slot's confirmed position"
grep -qE '^demo: the metrics were at http://127.0.0.1:[0-9]+/metrics' "$T/demo.out" ||
    fail "the summary does not say where the metrics were"
# Each message whole: a topic line, then its headers, then its value.
awk '/^topic=/ { if (s != 0) bad++; s = 1; n++; next }
     /^  headers: / { if (s != 1) bad++; s = 2; next }
     /^  value: / { if (s != 2) bad++; s = 0; next }
     /topic=|headers: |value: / { bad++ }
     END { if (bad || n < 4) { printf "%d messages, %d out of place\n", n, bad; exit 1 } }' \
    "$T/demo.out" >&2 || fail "the messages are not printed whole"
printed=$(grep -c '^topic=' "$T/demo.out")
assert_eq "$inkafka" "$printed" "messages printed (all that are in Kafka)"

step "nothing left behind"
if pgrep -af -- "$T/tmp" >&2; then fail "processes of the demo are still running"; fi
left=$(find "$T/tmp" -mindepth 1 | head -n 5)
[[ -z "$left" ]] || fail "the demo left files: $left"
info "ok: no process, no file"

step "README.md's first screen is this output"
# normalize: what varies from run to run, in both.
normalize() {
    sed -E -e 's/^\[[0-9:.]+\]/[TIME]/' \
        -e 's/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/UUID/g' \
        -e 's#[0-9A-F]+/[0-9A-F]+#LSN#g' -e 's/127\.0\.0\.1:[0-9]+/127.0.0.1:PORT/g' \
        -e 's/pid [0-9]+/pid PID/g' -e 's#/[^ ]*/outboxd-e2e-demo\.[A-Za-z0-9]+#DIR#g' \
        -e 's#built [^ ]*/outboxd #built BUILD/outboxd #' -e 's#build /[^)]*\)#build BUILD)#' \
        -e 's/after [0-9]+s$/after Ns/' -e 's/PostgreSQL [0-9.]+ \([^)]*\)/PostgreSQL VERSION/' \
        -e 's/ \(\/usr\/lib\/postgresql\/[0-9]+\/bin\)//' \
        -e 's/ +$//' -e 's/^demo: [0-9]+ events committed, [0-9]+ in Kafka, [0-9]+ ACKed/demo: N events committed, N in Kafka, N ACKed/'
}
awk '/<!-- demo-output:end -->/ { p = 0 } p && !/^```/ { print } /<!-- demo-output:begin -->/ { p = 1 }' \
    "$E2E_SRC_DIR/README.md" | grep -v '^\$ ' | normalize >"$T/readme.norm"
[[ $(wc -l <"$T/readme.norm") -ge 10 ]] || fail "README.md has no demo-output block"
normalize <"$T/demo.out" >"$T/demo.norm"
missing=$(grep -vxF -f "$T/demo.norm" "$T/readme.norm" || true)
[[ -z "$missing" ]] || fail "README.md shows lines the demo did not print: $missing"
info "ok: all $(wc -l <"$T/readme.norm") lines of README.md's block are in the demo's output"
e2e_pass
