#!/usr/bin/env bash
# tests/rehearse.sh [REV]: a rehearsal of CI. Clones this repository at REV
# (HEAD) into a fresh directory and runs .ci/run there as CI does: as root,
# no stdin, and an environment holding only PATH and HOME (CI's has no
# SHELL, TERM or LANG: stop 60's CI failed e2e.demo_tty on a missing SHELL
# that every rehearsal's inherited environment had). Under the heavy-test
# lock, so that nothing else runs beside it. The log goes to DIR.log and its
# table of times is printed at the end (tests/ci_times.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rev=${1:-HEAD}
dir=$(mktemp -d /tmp/outboxd-rehearsal.XXXXXX)
git clone -q "$root" "$dir/main"
git -C "$dir/main" checkout -q "$rev"
echo "rehearse: $(git -C "$dir/main" log --oneline -1) in $dir/main, log $dir.log"
rc=0
(cd "$dir/main" && flock /tmp/outboxd-heavy.lock \
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="$HOME" \
    bash .ci/run) </dev/null >"$dir.log" 2>&1 || rc=$?
echo "rehearse: .ci/run exited $rc after ${SECONDS} s"
bash "$root/tests/ci_times.sh" "$dir.log" | tail -n 25 || true
exit "$rc"
