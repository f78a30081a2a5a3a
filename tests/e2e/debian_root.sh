#!/usr/bin/env bash
# debian_root.sh OUT.tar - the clean Debian 12 root (lib.sh's
# debian_root_debootstrap: debootstrap --variant=minbase bookworm) as a
# tarball, made once per ctest run for the tests that need one: the fixture
# e2e.debian_root (tests/CMakeLists.txt), whose tests (e2e.container's base
# image, e2e.package's root) get DEBIAN_ROOT_TAR=OUT.tar and unpack it
# instead of running debootstrap each (lib.sh, debian_root). Checks that
# the root is Debian 12 with apt and dpkg, and writes OUT.tar whole or not
# at all.
# (debootstrap took 32-46 s alone, 170-373 s beside the rest of CI.)
: "${E2E_TIMEOUT:=840}"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
e2e_init debian_root

out=${1:?usage: debian_root.sh OUT.tar}
[[ $(id -u) -eq 0 ]] || fail "this test runs as root (debootstrap, chroot)"
command -v debootstrap >/dev/null || fail "debootstrap is not installed (deploy/install-deps.sh)"

step "debootstrap --variant=minbase bookworm"
R=$T/root
debian_root_debootstrap "$R"
assert_eq bookworm "$(. "$R/etc/os-release" && echo "$VERSION_CODENAME")" "the root's Debian release"
for f in usr/bin/apt-get usr/bin/dpkg bin/bash; do
    [[ -x $R/$f ]] || fail "the root has no /$f"
done
# Neither apt's lists nor the packages debootstrap fetched: a test that
# installs runs apt-get update in its root (e2e.package), and the image's
# base has none either (e2e.container).
rm -rf "$R/var/lib/apt/lists/"* "$R/var/cache/apt/archives/"*.deb
rm -f "$out"
tar -C "$R" --numeric-owner -cf "$out.tmp" . || fail "writing $out.tmp failed"
mv "$out.tmp" "$out"
info "$out: $(($(stat -c %s "$out") / 1000000)) MB"
rm -rf "$R"
e2e_pass
