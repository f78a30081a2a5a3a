#!/usr/bin/env bash
# deploy/librdkafka.sh - the librdkafka outboxd is built and tested with:
# a pinned upstream release, compiled from source into a prefix of its own,
# once per machine (deploy/install-deps.sh, the Dockerfile and .ci/run call
# it; CMakeLists.txt links against the prefix when it is there).
#
# Why from source: Debian 12 packages librdkafka 2.0.2 (January 2023).
# Releases since fixed what outboxd had to work around or could not (the
# idempotent producer's "implicit ack" of refused messages, abort_transaction
# ending in INVALID_TXN_STATE, Kafka 4's removed protocol versions, the
# first message to a topic waiting up to 1 s, ...). outboxd still builds
# against 2.0.2 and a subset of the suite runs on it (README, "Which Kafka
# and librdkafka").
#
# Where it comes from: Debian's own archive, which serves the source package
# of the current release in its development suite (sid). apt-get fetches it
# with a private sources list (nothing in /etc/apt changes): apt checks the
# Sources index against Debian's archive key and the tarball against the
# index; this script then checks the tarball against the SHA-256 pinned
# below. Only the upstream .orig.tar.gz is built (Debian's patches expect
# nanopb headers that Debian 12 does not have), with two changes of
# outboxd's, each saying why and what it changes, applied in this order:
# deploy/librdkafka-wakeup.patch (a broker thread of the idempotent
# producer spins while a partition's request is in flight) and
# deploy/librdkafka-seed.patch (every client set up OpenSSL's random
# generator to seed its PRNG, 2 MB of RSS).
#
#   librdkafka.sh                 builds and installs into the prefix unless
#                                 a complete build of this pin is there;
#                                 prints the prefix
#   librdkafka.sh --prefix        prints the prefix (builds nothing)
#   librdkafka.sh --complete      prints the prefix and exits 0 when a
#                                 complete build of this pin is there, 1
#                                 when not (builds nothing)
#   librdkafka.sh --version       prints the pinned version
#   librdkafka.sh --packages      the Debian packages the build needs
#
# LIBRDKAFKA_PREFIX overrides the prefix (default
# /opt/outboxd/librdkafka-VERSION). The prefix's .complete holds the
# tarball's and the patches' SHA-256 and configure's options: a prefix
# built from anything else, or configured otherwise (before issue 57 the
# pin was built without libcurl), is rebuilt. The stamp names no path: a
# complete prefix copied elsewhere stays complete (the image's build reuses
# a host's build that way, see deploy/Dockerfile), though its
# lib/pkgconfig/rdkafka.pc still names the prefix it was built for.
# Features: TLS (OpenSSL), SASL (Cyrus: GSSAPI; SCRAM and PLAIN are
# built in), zstd, lz4, zlib, as Debian's package, and libcurl: librdkafka
# fetches OAUTHBEARER tokens from an OIDC token endpoint through it
# (`sasl.oauthbearer.method=oidc`; its builtin.features then name "oidc").
set -euo pipefail

RDKAFKA_VERSION=2.14.2
RDKAFKA_DEBIAN_VERSION=2.14.2-1
RDKAFKA_DEBIAN_SUITE=sid
RDKAFKA_SHA256=4d53568c13717b167d12c7b2a0fe12aeb5d6bfe02de53df5b68f86d870a81b33
BUILD_PACKAGES=(build-essential patch libssl-dev libsasl2-dev libzstd-dev liblz4-dev zlib1g-dev
    libcurl4-openssl-dev)
# configure's options; part of the stamp, so a prefix configured otherwise is
# rebuilt.
CONFIGURE_OPTIONS=(--enable-ssl --enable-gssapi --enable-zstd --enable-zlib --enable-lz4-ext
    --enable-curl)

prefix=${LIBRDKAFKA_PREFIX:-/opt/outboxd/librdkafka-$RDKAFKA_VERSION}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
patch_files=("$here/librdkafka-wakeup.patch" "$here/librdkafka-seed.patch")

say() { echo "librdkafka.sh: $*" >&2; }
die() {
    say "$*"
    exit 1
}

case "${1:-}" in
--prefix)
    echo "$prefix"
    exit 0
    ;;
--version)
    echo "$RDKAFKA_VERSION"
    exit 0
    ;;
--packages)
    printf '%s\n' "${BUILD_PACKAGES[@]}"
    exit 0
    ;;
"" | --complete) ;;
*) die "usage: librdkafka.sh [--prefix|--complete|--version|--packages]" ;;
esac

stamp=$RDKAFKA_SHA256
for p in "${patch_files[@]}"; do
    [[ -r $p ]] || die "$p missing"
    stamp+=" $(sha256sum "$p" | cut -d' ' -f1)"
done
stamp+=" ${CONFIGURE_OPTIONS[*]}"
if [[ "$(cat "$prefix/.complete" 2>/dev/null)" == "$stamp" ]]; then
    echo "$prefix"
    exit 0
fi
[[ ${1:-} != --complete ]] || exit 1

work=$(mktemp -d "${TMPDIR:-/tmp}/outboxd-librdkafka.XXXXXX")
trap 'rm -rf "$work"' EXIT

# fetch: the source package through apt, with a sources list of its own.
fetch() {
    local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    [[ -r $keyring ]] || die "$keyring missing: install debian-archive-keyring"
    mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/src"
    echo "deb-src [signed-by=$keyring] http://deb.debian.org/debian $RDKAFKA_DEBIAN_SUITE main" \
        >"$work/apt/sources.list"
    local opts=(-o Dir::Etc::SourceList="$work/apt/sources.list"
        -o Dir::Etc::SourceParts=/nonexistent
        -o Dir::State::Lists="$work/apt/lists" -o Dir::Cache="$work/apt/cache"
        -o APT::Sandbox::User=root -q
        # sid's index expires a week after it is signed, and mirrors lag:
        # its freshness protects nothing here, where the one file used is
        # pinned by its SHA-256 (the signature is still checked).
        -o Acquire::Check-Valid-Until=false)
    apt-get "${opts[@]}" update >"$work/apt.log" 2>&1 ||
        { cat "$work/apt.log" >&2; die "apt-get update of Debian $RDKAFKA_DEBIAN_SUITE's source index failed (above)"; }
    (cd "$work/src" && apt-get "${opts[@]}" source --download-only \
        "librdkafka=$RDKAFKA_DEBIAN_VERSION") >>"$work/apt.log" 2>&1 || {
        cat "$work/apt.log" >&2
        local now
        now=$(cd "$work/src" && apt-get "${opts[@]}" showsrc librdkafka 2>/dev/null |
            sed -n 's/^Version: //p' | head -1)
        die "Debian $RDKAFKA_DEBIAN_SUITE does not serve librdkafka $RDKAFKA_DEBIAN_VERSION" \
            "(it has ${now:-none}): pin the release it serves (RDKAFKA_* at the top of $0)" \
            "after reading its changelog, and run the suite on it"
    }
}

say "fetching librdkafka $RDKAFKA_DEBIAN_VERSION's source from Debian $RDKAFKA_DEBIAN_SUITE"
fetch
tarball="$work/src/librdkafka_$RDKAFKA_VERSION.orig.tar.gz"
[[ -f $tarball ]] || die "apt-get source brought no $(basename "$tarball")"
sum=$(sha256sum "$tarball" | cut -d' ' -f1)
[[ $sum == "$RDKAFKA_SHA256" ]] ||
    die "$(basename "$tarball") has SHA-256 $sum, pinned $RDKAFKA_SHA256: refusing to build it"

mkdir "$work/build"
tar -xzf "$tarball" -C "$work/build" --strip-components=1
for p in "${patch_files[@]}"; do
    (cd "$work/build" && patch -p1 --quiet --forward <"$p") ||
        die "$(basename "$p") does not apply to librdkafka $RDKAFKA_VERSION"
done
say "building librdkafka $RDKAFKA_VERSION into $prefix (a few minutes)"
(
    cd "$work/build"
    ./configure --prefix="$prefix" "${CONFIGURE_OPTIONS[@]}"
    make -j"$(nproc)" LIBSUBDIRS=src libs
    rm -rf "$prefix"
    make LIBSUBDIRS=src install-subdirs
) >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log" >&2; die "building librdkafka $RDKAFKA_VERSION failed (above)"; }
# Only the C library (src; not the C++ binding in src-cpp). The static
# archive is not used: outboxd links the shared library (its RPATH points
# here).
rm -f "$prefix"/lib/*.a "$prefix"/lib/pkgconfig/rdkafka-static.pc
echo "$stamp" >"$prefix/.complete"
say "librdkafka $RDKAFKA_VERSION installed in $prefix"
echo "$prefix"
