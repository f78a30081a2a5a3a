#!/usr/bin/env bash
# tests/aws/signers.sh - outboxd's MSK and RDS IAM tokens against AWS's own
# signers, byte for byte (ctest real.aws_signers; issue 57): for each input
# below, tests/awssign.c (outboxd-awssign: src/aws/awstoken.c) and
# tests/aws/signers.js (npm aws-msk-iam-sasl-signer-js and
# @aws-sdk/rds-signer, the versions of package-lock.json) print both tokens
# at the same fixed clock; every line must be equal. The MSK token's
# User-Agent parameter is the JS signer's own on both sides (it is not
# signed; outboxd's daemon puts its own name there).
#
# The signers come from the npm registry as package-lock.json pins them
# (npm ci checks each tarball's integrity), installed once per machine into
# ${OUTBOXD_AWS_SIGNERS_CACHE:-/var/cache/outboxd-aws-signers}/LOCKHASH, as
# tests/pg/pg.sh installs its servers. Needs node and npm (deploy/install-deps.sh).
#
#   OUTBOXD_BUILD_DIR=build bash tests/aws/signers.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${OUTBOXD_BUILD_DIR:-$here/../../build}
SIGN=$BUILD/tests/outboxd-awssign
CACHE_ROOT=${OUTBOXD_AWS_SIGNERS_CACHE:-/var/cache/outboxd-aws-signers}

die() {
    echo "signers.sh: $*" >&2
    exit 1
}

[[ -x "$SIGN" ]] || die "$SIGN not built (cmake --build $BUILD)"
command -v node >/dev/null || die "node not found (Debian: apt-get install nodejs, or deploy/install-deps.sh)"
command -v npm >/dev/null || die "npm not found (Debian: apt-get install npm, or deploy/install-deps.sh)"

lockhash=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)
dir=$CACHE_ROOT/$lockhash
if [[ ! -f "$dir/.complete" ]]; then
    mkdir -p "$CACHE_ROOT"
    exec 9>"$CACHE_ROOT/.lock"
    flock 9
    if [[ ! -f "$dir/.complete" ]]; then
        tmp=$(mktemp -d "$CACHE_ROOT/.tmp.XXXXXX")
        # shellcheck disable=SC2064
        trap "rm -rf '$tmp'" EXIT
        cp "$here/package.json" "$here/package-lock.json" "$tmp/"
        (cd "$tmp" && HOME=$tmp npm ci --ignore-scripts --no-audit --no-fund --silent \
            --cache "$tmp/.npm" >"$tmp/npm.log" 2>&1) ||
            die "npm ci of AWS's signers failed: $(tail -5 "$tmp/npm.log")"
        rm -rf "$tmp/.npm" "$dir"
        mv "$tmp" "$dir"
        touch "$dir/.complete"
        trap - EXIT
        echo "signers.sh: AWS's signers installed in $dir" >&2
    fi
    exec 9>&-
fi
UA="aws-msk-iam-sasl-signer-js/$(node -p "require('$dir/node_modules/aws-msk-iam-sasl-signer-js/package.json').version")"

# NOW REGION ACCESS_KEY_ID SECRET TOKEN|- EXPIRES|0 HOST PORT USER
CASES=(
    "1765000000 us-east-1 AKIDEXAMPLE wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY - 0 mydb.abc123.us-east-1.rds.amazonaws.com 5432 outboxd"
    "1709164800 eu-west-1 ASIAQEXAMPLE7TOKEN s3cr3t/with+slash= IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+abc/def==AND=more 0 aurora-cluster.cluster-ro-xyz.eu-west-1.rds.amazonaws.com 6543 app_user"
    "1893456000 ap-southeast-2 AKIA0000000000000000 abc - 1893456300 10.0.0.12 5432 user@example.com"
    "1765000000 us-gov-west-1 AKIDEXAMPLE wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY tok%en&x=y+z 1765003600 MyDB.Example.COM 1 user&name=x?y#z"
    "951782400 eu-central-1 AKIDEXAMPLE k - 0 db-host 65535 ünïcødé-üser with space*'()!~"
)

fail=0
for c in "${CASES[@]}"; do
    # shellcheck disable=SC2206
    a=($c)
    # the user may contain spaces: everything after the 8th field
    user=${c#* * * * * * * * }
    args=("${a[@]:0:8}" "$user")
    ours=$("$SIGN" "${args[@]}" "$UA") || die "outboxd-awssign failed on: $c"
    theirs=$(NODE_PATH=$dir/node_modules node "$here/signers.js" "${args[@]}") ||
        die "signers.js failed on: $c"
    if [[ "$ours" == "$theirs" ]]; then
        echo "same: region ${a[1]}, token ${a[4]:0:8}, expires ${a[5]}, ${a[6]}:${a[7]}, user '$user'"
    else
        echo "DIFFERENT for: $c" >&2
        diff <(tr ' ' '\n' <<<"$ours") <(tr ' ' '\n' <<<"$theirs") >&2 || true
        fail=1
    fi
done
[[ $fail -eq 0 ]] || die "outboxd's tokens differ from AWS's signers'"
echo "signers.sh: ${#CASES[@]} inputs, both tokens byte for byte the same as $UA and @aws-sdk/rds-signer $(node -p "require('$dir/node_modules/@aws-sdk/rds-signer/package.json').version")"
