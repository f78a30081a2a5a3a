#!/usr/bin/env bash
# Install and the systemd recipe (deploy/deploying.md, "systemd"):
#  - that section's commands, run as root as written (no sudo in them), with
#    /etc and /usr/local moved under $T/root and the systemctl line left
#    out: `cmake --install` puts the binary (0755), the unit, the SQL files
#    and the sample configuration (0644) in place, the installed unit's
#    ExecStart names the installed binary, and `systemd-analyze verify`
#    accepts the installed unit;
#  - what the unit would do, read from the installed unit: its ExecStart
#    with its EnvironmentFile (read as root), as uid 61234 (systemd's
#    dynamic-user range; DynamicUser=yes) without supplementary groups, in
#    its WorkingDirectory = StateDirectory owned by that uid with
#    StateDirectoryMode, under its UMask: the daemon reads the ini the
#    recipe installed, streams, delivers, writes its offset file there
#    (0600), reloads on the unit's ExecReload command and exits 0 on
#    SIGTERM.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init install

[[ $(id -u) -eq 0 ]] || fail "this test runs as root (it chowns files and drops to another uid)"
for tool in cmake setpriv systemd-analyze; do
    command -v "$tool" >/dev/null || fail "$tool is not installed (deploy/install-deps.sh)"
done
R=$T/root
UID_DYN=61234

# unit_value KEY: the value of KEY= in the installed unit (last one wins).
unit_value() { sed -n "s/^$1=//p" "$UNIT" | tail -n 1; }
# mode_of FILE: octal mode.
mode_of() { stat -c %a "$1"; }

step "deploy/deploying.md's systemd commands, as root, under $R"
awk '/^## systemd$/ { s = 1 } s && /^```sh$/ { c = 1; next } c && /^```$/ { exit } c' \
    "$E2E_SRC_DIR/deploy/deploying.md" >"$T/recipe.sh"
[[ -s "$T/recipe.sh" ]] || fail "no sh block in deploy/deploying.md's systemd section"
cat "$T/recipe.sh" >&2
grep -Eq '(^|[;&|] *)sudo ' "$T/recipe.sh" && fail "the recipe uses sudo (minimal images have none)"
grep -q '^systemctl daemon-reload && systemctl enable --now outboxd' "$T/recipe.sh" ||
    fail "the recipe does not enable the unit"
: >"$T/run.sh"
while IFS= read -r line; do
    line=${line%%  #*}
    [[ -z "$line" || "$line" == systemctl* ]] && continue
    line=${line//cmake --install build/cmake --install \"$OUTBOXD_BUILD_DIR\" --prefix \"$R/usr/local\"}
    line=${line// outboxd.ini / \"$T/operator.ini\" }
    line=${line//\/etc\//$R/etc/}
    line=${line//PGPASSWORD=.../PGPASSWORD=not-needed}
    printf '%s\n' "$line" >>"$T/run.sh"
done <"$T/recipe.sh"
info "as run: $(tr '\n' ';' <"$T/run.sh")"

pg_start
broker_start
cat >"$T/operator.ini" <<EOF2
[postgres]
conninfo = $PG_CONNINFO
plugin = $OUTBOXD_TEST_PLUGIN

[kafka]
bootstrap.servers = $KAFKA_BOOTSTRAP

[offsets]
file = $R/var/lib/outboxd/outboxd.offset

[http]
listen = 127.0.0.1:0
EOF2
(umask 022 && bash -e "$T/run.sh") >"$T/run.log" 2>&1 || { cat "$T/run.log" >&2; fail "the recipe failed"; }

step "the installed files and their modes"
UNIT=$R/usr/local/lib/systemd/system/outboxd.service
for f in bin/outboxd:755 lib/systemd/system/outboxd.service:644 \
    share/outboxd/sql/outbox.sql:644 share/outboxd/sql/outbox_order_column.sql:644 \
    share/outboxd/sql/outbox_polling.sql:644 \
    share/outboxd/sql/inbox.sql:644 share/outboxd/sql/role.sql:644 \
    share/outboxd/outboxd.ini.example:644; do
    [[ -f "$R/usr/local/${f%%:*}" ]] || fail "cmake --install did not install ${f%%:*} (installed: $(cd "$R/usr/local" 2>/dev/null && find . -type f | tr '\n' ' '))"
    assert_eq "${f##*:}" "$(mode_of "$R/usr/local/${f%%:*}")" "mode of ${f%%:*}"
done
assert_eq 644 "$(mode_of "$R/etc/outboxd/outboxd.ini")" "mode of /etc/outboxd/outboxd.ini"
assert_eq 600 "$(mode_of "$R/etc/outboxd/outboxd.env")" "mode of /etc/outboxd/outboxd.env"
assert_eq "$R/usr/local/bin/outboxd -c /etc/outboxd/outboxd.ini" "$(unit_value ExecStart)" \
    "the installed unit's ExecStart"
out=$(systemd-analyze verify "$UNIT" 2>&1) || fail "systemd-analyze verify $UNIT: $out"
[[ -z "$out" ]] || fail "systemd-analyze verify warns: $out"
info "ok: systemd-analyze verify: the installed unit, no warning"

step "what the unit does: ExecStart as uid $UID_DYN"
assert_eq yes "$(unit_value DynamicUser)" "DynamicUser"
wd=$(unit_value WorkingDirectory)
assert_eq "/var/lib/$(unit_value StateDirectory)" "$wd" "WorkingDirectory = the StateDirectory"
state=$R$wd
mkdir -p "$state"
chown "$UID_DYN:$UID_DYN" "$state"
chmod "$(unit_value StateDirectoryMode)" "$state"
envfile=$(unit_value EnvironmentFile)
envfile=$R${envfile#-}
mapfile -t unit_env <"$envfile" # systemd reads it as root
read -r -a cmd <<<"$(unit_value ExecStart)"
cmd=("${cmd[@]//\/etc\//$R/etc/}")
(
    umask "$(unit_value UMask)"
    cd "$state"
    exec env -i PATH="$PATH" "${unit_env[@]}" \
        setpriv --reuid="$UID_DYN" --regid="$UID_DYN" --clear-groups -- "${cmd[@]}"
) >>"$T/outboxd.log" 2>&1 </dev/null &
OUTBOXD_PID=$!
for ((i = 0; i < 300; i++)); do
    [[ "$(psql_q "SELECT active FROM pg_replication_slots WHERE slot_name = 'outboxd'")" == t ]] && break
    if ! kill -0 "$OUTBOXD_PID" 2>/dev/null; then
        rc=0
        wait "$OUTBOXD_PID" || rc=$?
        OUTBOXD_PID=
        fail "outboxd under the unit's user exited $rc: $(tail -n 3 "$T/outboxd.log")"
    fi
    sleep 0.1
done
assert_eq "$UID_DYN" "$(ps -o uid= -p "$OUTBOXD_PID" | tr -d ' ')" "outboxd's uid"
psql_q "INSERT INTO outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES (gen_random_uuid(), 'Order', 'o1', 'Created', '{}')"
wait_caught_up 60
check_delivery --exactly-once
for ((i = 0; i < 300; i++)); do [[ -f "$state/outboxd.offset" ]] && break; sleep 0.1; done
[[ -f "$state/outboxd.offset" ]] || fail "no offset file in the StateDirectory"
assert_eq "$UID_DYN 600" "$(stat -c '%u %a' "$state/outboxd.offset")" "offset file owner and mode"

step "ExecReload"
reload=$(unit_value ExecReload)
reload=${reload//\$MAINPID/$OUTBOXD_PID}
read -r -a rcmd <<<"$reload"
setpriv --reuid="$UID_DYN" --regid="$UID_DYN" --clear-groups -- "${rcmd[@]}" ||
    fail "ExecReload ($reload) failed"
for ((i = 0; i < 300; i++)); do grep -q 'SIGHUP: reloaded' "$T/outboxd.log" && break; sleep 0.1; done
grep -q 'SIGHUP: reloaded' "$T/outboxd.log" || fail "no reload line after ExecReload"
info "ok: $(grep -m1 'SIGHUP: reloaded' "$T/outboxd.log" | cut -c1-200)"
outboxd_stop || fail "outboxd exited $OUTBOXD_RC after SIGTERM"
e2e_pass
