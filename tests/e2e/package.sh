#!/usr/bin/env bash
# The Debian package (deploy/debian/package.cmake, built by cpack) in a
# clean Debian 12 root:
#  1. cpack makes outboxd_<version>-1 of the build under test, and
#     dpkg-deb repacks it as -2 (the next build); lintian reports nothing
#     (not even information tags) beyond the overrides the package
#     explains.
#  2. debootstrap --variant=minbase bookworm makes a root (in ctest, once
#     for this test and e2e.container: the fixture e2e.debian_root, whose
#     tarball is unpacked here; lib.sh, debian_root); apt-get installs
#     the .deb there with its Depends from the archive. The package made
#     the system user outboxd, /var/lib/outboxd (outboxd, 0700), the
#     conffiles (outboxd.ini 0644, outboxd.env 0600), the manual page, and
#     the binary finds the private librdkafka in /usr/lib/outboxd.
#  3. The conffile edited to this test's PostgreSQL and broker (the
#     database and the broker run on the host; the root shares its
#     network): `outboxd check` passes in the root, and outboxd runs there
#     as the unit runs it: the unit's ExecStart, as its User= (setpriv), in
#     /var/lib/outboxd, under its UMask. It streams 300 events exactly
#     once, writes its offset file there (owner outboxd, 0600), and exits
#     0 on SIGTERM.
#  4. Upgrading to -2 keeps the edited conffile and the offset file;
#     removing keeps /var/lib/outboxd and the conffiles; purging deletes
#     both.
# (systemd itself does not run in the root: no init there.)
# Beside the rest of CI, cpack took 92 s and debootstrap more than 170 s
# (rehearsal X, when each test ran its own debootstrap): lib.sh's default
# watchdog (270 s) is too short; ctest's TIMEOUT for this test is 900 s
# (tests/CMakeLists.txt).
: "${E2E_TIMEOUT:=840}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init package

[[ $(id -u) -eq 0 ]] || fail "this test runs as root (debootstrap, chroot)"
for tool in cpack debootstrap lintian chroot; do
    command -v "$tool" >/dev/null || fail "$tool is not installed (deploy/install-deps.sh)"
done
[[ -f $OUTBOXD_BUILD_DIR/CPackConfig.cmake ]] || fail "no CPackConfig.cmake in $OUTBOXD_BUILD_DIR"
R=$T/root
# in_root CMD...: CMD inside the root, with a plain PATH and no locale.
in_root() { chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
mode_owner() { stat -c '%a %U' "$1"; }

pg_start
broker_start

# ---------------------------------------------------------------- build

step "cpack, the same package as the next release (-2), and lintian"
cpack --config "$OUTBOXD_BUILD_DIR/CPackConfig.cmake" -B "$T/pkg1" >"$T/cpack.log" 2>&1 ||
    { cat "$T/cpack.log" >&2; fail "cpack failed"; }
DEB1=$(ls "$T"/pkg1/outboxd_*-1_amd64.deb) || fail "cpack made no outboxd_*-1_amd64.deb"
# Release 2: the same files, the version one up (what the next build of
# this tree would be), repacked with dpkg-deb instead of a second cpack.
dpkg-deb -R "$DEB1" "$T/pkg2.tree"
sed -i 's/^\(Version: .*\)-1$/\1-2/' "$T/pkg2.tree/DEBIAN/control"
mkdir -p "$T/pkg2"
dpkg-deb --root-owner-group -b "$T/pkg2.tree" "$T/pkg2/" >"$T/dpkg-deb.log" 2>&1 ||
    { cat "$T/dpkg-deb.log" >&2; fail "repacking as release 2 failed"; }
DEB2=$(ls "$T"/pkg2/outboxd_*-2_amd64.deb) || fail "no outboxd_*-2_amd64.deb after repacking"
info "$(basename "$DEB1"): $(stat -c %s "$DEB1") bytes; Depends: $(dpkg-deb -f "$DEB1" Depends)"
lintian --info --fail-on error,warning,info "$DEB1" >"$T/lintian.out" 2>"$T/lintian.err" ||
    { cat "$T/lintian.out" >&2; fail "lintian reports tags the package does not explain"; }
grep -v '^N:' "$T/lintian.out" | grep . >&2 && fail "lintian printed tags"
info "lintian: nothing beyond deploy/debian/lintian-overrides"

# ---------------------------------------------------------------- root

step "a clean Debian 12 root (debootstrap --variant=minbase bookworm)"
debian_root "$R"
cp /etc/resolv.conf "$R/etc/resolv.conf"
in_root test ! -e /usr/bin/outboxd || fail "the new root already has /usr/bin/outboxd"
in_root getent passwd outboxd >/dev/null && fail "the new root already has a user outboxd"

step "apt-get install the package (its Depends from the archive)"
cp "$DEB1" "$DEB2" "$R/tmp/"
in_root apt-get update -qq >"$T/apt-update.log" 2>&1 ||
    { tail -n 20 "$T/apt-update.log" >&2; fail "apt-get update in the root failed"; }
in_root apt-get install -y -qq "/tmp/$(basename "$DEB1")" >"$T/apt-install.log" 2>&1 ||
    { tail -n 30 "$T/apt-install.log" >&2; fail "apt-get install of $(basename "$DEB1") failed"; }
assert_eq "install ok installed" "$(in_root dpkg-query -W -f='${Status}' outboxd)" "dpkg status"
uid=$(in_root id -u outboxd) || fail "postinst made no user outboxd"
gid=$(in_root id -g outboxd)
((uid < 1000)) || fail "outboxd's uid $uid is not a system uid"
assert_eq "700 outboxd" "$(in_root stat -c '%a %U' /var/lib/outboxd)" "/var/lib/outboxd mode and owner"
assert_eq "644 root" "$(mode_owner "$R/etc/outboxd/outboxd.ini")" "outboxd.ini mode and owner"
assert_eq "600 root" "$(mode_owner "$R/etc/outboxd/outboxd.env")" "outboxd.env mode and owner"
conf=$(in_root dpkg-query -W -f='${Conffiles}' outboxd)
for f in /etc/outboxd/outboxd.ini /etc/outboxd/outboxd.env; do
    grep -q " $f " <<<"$conf" || fail "$f is not a conffile: $conf"
done
for f in /usr/share/man/man8/outboxd.8.gz /usr/share/outboxd/outboxd.ini.example \
    /usr/share/outboxd/sql/outbox.sql /usr/share/outboxd/sql/role.sql \
    /usr/share/doc/outboxd/copyright /lib/systemd/system/outboxd.service; do
    [[ -s $R$f ]] || fail "the package installed no $f"
done
grep -qiE 'password *=|secret' <(grep -v '^;' "$R/etc/outboxd/outboxd.ini") &&
    fail "outboxd.ini holds a secret"
lib=$(in_root ldd /usr/bin/outboxd | awk '/librdkafka/ { print $3 }')
assert_eq /usr/lib/outboxd/librdkafka.so.1 "$lib" "the librdkafka the binary loads"
in_root ldd /usr/bin/outboxd | grep -q 'not found' && fail "a library of outboxd is missing in the root"
info "$(in_root /usr/bin/outboxd --version)"

# ---------------------------------------------------------------- run

step "outboxd check in the root, with the conffile edited to this test's servers"
sed -i -e "s|^conninfo = .*|conninfo = $PG_CONNINFO|" \
    -e "s|^bootstrap.servers = .*|bootstrap.servers = $KAFKA_BOOTSTRAP|" \
    -e 's|^listen = .*|listen = 127.0.0.1:0|' "$R/etc/outboxd/outboxd.ini"
echo '; edited by e2e.package' >>"$R/etc/outboxd/outboxd.ini"
rc=0
in_root outboxd check -c /etc/outboxd/outboxd.ini >"$T/check.out" 2>&1 || rc=$?
cat "$T/check.out" >&2
assert_eq 0 "$rc" "outboxd check's exit status in the root"

step "outboxd as the unit runs it: ExecStart, User=, WorkingDirectory=, UMask="
UNIT=$R/lib/systemd/system/outboxd.service
unit_value() { sed -n "s/^$1=//p" "$UNIT" | tail -n 1; }
assert_eq outboxd "$(unit_value User)" "the unit's User="
grep -q '^DynamicUser=' "$UNIT" && fail "the packaged unit still has DynamicUser="
exec_start=$(unit_value ExecStart) umask=$(unit_value UMask) wd=$(unit_value WorkingDirectory)
assert_eq "/usr/bin/outboxd -c /etc/outboxd/outboxd.ini" "$exec_start" "the unit's ExecStart"
# shellcheck disable=SC2016 # expanded by the shell in the root
{
    _close_sess_fds
    exec chroot "$R" env -i PATH=/usr/bin:/bin setpriv --reuid="$uid" --regid="$gid" --clear-groups \
        sh -c 'umask "$1"; cd "$2" && exec $3' sh "$umask" "$wd" "$exec_start" \
        >"$T/outboxd.log" 2>&1 </dev/null
} &
PKG_PID=$!
E2E_BG_PIDS+=("$PKG_PID")
pg_wait 30 "SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE slot_name = 'outboxd'" \
    >/dev/null || fail "the packaged outboxd did not start streaming: $(tail -5 "$T/outboxd.log")"
psql_q "INSERT INTO public.outbox_events (event_id, aggregate_type, aggregate_id, event_type, payload)
        SELECT gen_random_uuid(), 'Pkg', 'pkg-' || (g % 7), 'Made', jsonb_build_object('g', g)
        FROM generate_series(1, 300) g"
wait_caught_up 60
check_delivery --exactly-once
OFF=$R/var/lib/outboxd/outboxd.offset
[[ -s $OFF ]] || fail "no offset file in /var/lib/outboxd"
assert_eq "600 $uid" "$(stat -c '%a %u' "$OFF")" "the offset file's mode and owner"
kill -TERM "$PKG_PID"
rc=0
wait "$PKG_PID" || rc=$?
assert_eq 0 "$rc" "the packaged outboxd's exit status on SIGTERM"
offset_lsn=$(sed -n 's/^lsn=//p' "$OFF")

# ---------------------------------------------------------------- lifecycle

step "upgrade to release 2: the edited conffile and the offset file stay"
in_root apt-get install -y -qq "/tmp/$(basename "$DEB2")" >"$T/apt-upgrade.log" 2>&1 ||
    { tail -n 30 "$T/apt-upgrade.log" >&2; fail "the upgrade failed"; }
assert_eq "$(dpkg-deb -f "$DEB2" Version)" "$(in_root dpkg-query -W -f='${Version}' outboxd)" \
    "the installed version"
grep -q '^; edited by e2e.package$' "$R/etc/outboxd/outboxd.ini" ||
    fail "the upgrade replaced the edited outboxd.ini"
grep -q "^conninfo = $PG_CONNINFO$" "$R/etc/outboxd/outboxd.ini" || fail "the edited conninfo is gone"
assert_eq "600 root" "$(mode_owner "$R/etc/outboxd/outboxd.env")" "outboxd.env after the upgrade"
assert_eq "$offset_lsn" "$(sed -n 's/^lsn=//p' "$OFF")" "the offset file's lsn after the upgrade"

step "remove: the state directory and the conffiles stay"
in_root apt-get remove -y -qq outboxd >"$T/apt-remove.log" 2>&1 ||
    { tail -n 30 "$T/apt-remove.log" >&2; fail "apt-get remove failed"; }
[[ ! -e $R/usr/bin/outboxd ]] || fail "/usr/bin/outboxd is still there after remove"
[[ -s $OFF ]] || fail "remove deleted the offset file"
[[ -f $R/etc/outboxd/outboxd.ini ]] || fail "remove deleted the conffile"

step "purge: the state directory and the conffiles go"
in_root apt-get purge -y -qq outboxd >"$T/apt-purge.log" 2>&1 ||
    { tail -n 30 "$T/apt-purge.log" >&2; fail "apt-get purge failed"; }
[[ ! -e $R/var/lib/outboxd ]] || fail "purge left /var/lib/outboxd"
[[ ! -e $R/etc/outboxd ]] || fail "purge left /etc/outboxd"
e2e_pass
