#!/usr/bin/env bash
# tests/aws/chain.sh - the AWS credential chain (src/aws/awscreds.c) as the
# daemon runs it, over environments and files this test writes and a LOCAL
# STAND-IN (tests/aws/standin.py, not AWS) for STS, the container
# credentials endpoint and EC2's instance metadata (ctest e2e.aws_chain;
# issue 57). Each case runs outboxd-awssign's `creds` (the chain through
# the daemon's cache) in a bare environment and checks which source wins,
# or that the error names each source tried and why:
#   - the environment over a web identity, a web identity over a profile,
#     a profile over the container, the container over the instance;
#   - web identity: STS's form (action, role, session name) and its
#     refusal (InvalidIdentityToken) said;
#   - the container endpoint with its Authorization header from
#     AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, and refused without it; a
#     FULL_URI that is neither https nor local refused;
#   - IMDSv2: the session token asked for and sent;
#   - credentials that expire within 10 minutes fetched again at each use,
#     others once (the cache);
#   - outboxd check's "kafka token" line with AWS_MSK_IAM from the stand-in's
#     container credentials (source, the key id's last 4 characters only).
# No AWS endpoint is reachable here; what STS, ECS and IMDS would answer is
# the stand-in's reading of their API references.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${OUTBOXD_BUILD_DIR:-$here/../../build}
SIGN=$BUILD/tests/outboxd-awssign
OUTBOXD=$BUILD/outboxd
[[ -x "$SIGN" && -x "$OUTBOXD" ]] || { echo "chain.sh: build first ($SIGN, $OUTBOXD)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "chain.sh: python3 not found" >&2; exit 1; }

tmp=$(mktemp -d /tmp/aws_chain.XXXXXX)
pid=
cleanup() {
    if [[ -n "$pid" ]]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

fails=0
fail() {
    echo "FAIL: $*" >&2
    fails=$((fails + 1))
}

python3 "$here/standin.py" "$tmp/port" "$tmp/requests.log" "the-web-identity-jwt" "Bearer container-secret" &
pid=$!
for _ in $(seq 1 100); do
    [[ -s "$tmp/port" ]] && break
    kill -0 "$pid" 2>/dev/null || { echo "chain.sh: the stand-in died" >&2; exit 1; }
    sleep 0.1
done
[[ -s "$tmp/port" ]] || { echo "chain.sh: the stand-in did not start within 10 s" >&2; exit 1; }
port=$(cat "$tmp/port")
base=http://127.0.0.1:$port
echo "chain.sh: stand-in for STS, the container endpoint and IMDS at $base (not AWS)"

mkdir -p "$tmp/home/.aws"
printf 'the-web-identity-jwt\n' >"$tmp/jwt"
printf 'wrong-jwt\n' >"$tmp/badjwt"
printf 'Bearer container-secret\n' >"$tmp/cauth"
cat >"$tmp/home/.aws/credentials" <<'INI'
[default]
aws_access_key_id = AKIAFILEDEFAULT
aws_secret_access_key = fs
[prod]
aws_access_key_id = AKIAFILEPROD
aws_secret_access_key = ps
INI
cat >"$tmp/home/.aws/config" <<'INI'
[profile dev]
region = eu-west-1
aws_access_key_id = AKIACONFIGDEV
aws_secret_access_key = ds
INI

# creds EXPECTED-REGEX [VAR=VALUE ...] [-- ARGS...]: runs the chain in a bare
# environment (HOME with the files above; IMDS pointed at the stand-in) and
# matches its one line.
creds() {
    local want=$1 out
    shift
    local vars=() args=()
    while (($#)); do
        if [[ $1 == -- ]]; then
            shift
            args=("$@")
            break
        fi
        vars+=("$1")
        shift
    done
    out=$(env -i PATH="$PATH" HOME="$tmp/home" AWS_EC2_METADATA_SERVICE_ENDPOINT="$base" \
        "${vars[@]}" "$SIGN" creds "${args[@]}" 2>&1) || true
    if [[ "$out" =~ $want ]]; then
        echo "ok: ${vars[*]:-(no variables)} ${args[*]:-} -> ${out:0:160}"
    else
        fail "${vars[*]:-} ${args[*]:-}: got '$out', want /$want/"
    fi
}

ENV=(AWS_ACCESS_KEY_ID=AKIAENV AWS_SECRET_ACCESS_KEY=es)
WEB=(AWS_WEB_IDENTITY_TOKEN_FILE="$tmp/jwt" AWS_ROLE_ARN=arn:aws:iam::123456789012:role/outboxd
    AWS_ROLE_SESSION_NAME=outboxd-test AWS_ENDPOINT_URL_STS="$base/sts")
CONT=(AWS_CONTAINER_CREDENTIALS_FULL_URI="$base/container" AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE="$tmp/cauth")

# The order: each source over the ones after it.
creds '^ok environment AKIAENV 0$' "${ENV[@]}" "${WEB[@]}" "${CONT[@]}"
creds '^ok web identity ASIASTSSTANDIN [0-9]+$' "${WEB[@]}" "${CONT[@]}"
grep -q "^POST /sts Action=AssumeRoleWithWebIdentity RoleArn=arn:aws:iam::123456789012:role/outboxd RoleSessionName=outboxd-test" "$tmp/requests.log" ||
    fail "STS was not asked AssumeRoleWithWebIdentity for the role and session: $(cat "$tmp/requests.log")"
creds '^ok profile default AKIAFILEDEFAULT 0$' "${CONT[@]}"
creds '^ok profile prod AKIAFILEPROD 0$' AWS_PROFILE=prod "${CONT[@]}"
creds '^ok profile dev AKIACONFIGDEV 0$' AWS_PROFILE=prod -- - dev # [aws] profile over AWS_PROFILE; config's [profile dev]
rm "$tmp/home/.aws/credentials" "$tmp/home/.aws/config"
creds '^ok container ASIACONTAINER [0-9]+$' "${CONT[@]}"
grep -q "^GET /container auth=Bearer container-secret" "$tmp/requests.log" ||
    fail "the container endpoint did not get the Authorization header"
creds '^ok instance ASIAIMDS [0-9]+$'
grep -q "^PUT /latest/api/token ttl=21600" "$tmp/requests.log" || fail "IMDSv2's session token was not asked for"
grep -q "^GET /latest/meta-data/iam/security-credentials/outboxd-role token=imds-session-token" "$tmp/requests.log" ||
    fail "IMDS's credentials were not asked for with the session token"

# Failures: said, and the chain goes on.
creds 'web identity: STS .*/sts refused role arn:aws:iam::123456789012:role/outboxd: HTTP 400: InvalidIdentityToken: Incorrect token audience' \
    AWS_WEB_IDENTITY_TOKEN_FILE="$tmp/badjwt" AWS_ROLE_ARN=arn:aws:iam::123456789012:role/outboxd \
    AWS_ENDPOINT_URL_STS="$base/sts" AWS_EC2_METADATA_DISABLED=true
creds '^ok instance ASIAIMDS' AWS_WEB_IDENTITY_TOKEN_FILE="$tmp/badjwt" \
    AWS_ROLE_ARN=arn:aws:iam::123456789012:role/outboxd AWS_ENDPOINT_URL_STS="$base/sts"
creds "container: $base/container answered HTTP 401: .*unauthorized \\(stand-in\\).*instance: AWS_EC2_METADATA_DISABLED is true" \
    AWS_CONTAINER_CREDENTIALS_FULL_URI="$base/container" AWS_EC2_METADATA_DISABLED=true
creds 'container: AWS_CONTAINER_CREDENTIALS_FULL_URI http://192.0.2.1/creds is neither https nor a loopback' \
    AWS_CONTAINER_CREDENTIALS_FULL_URI=http://192.0.2.1/creds AWS_EC2_METADATA_DISABLED=true
creds 'environment: AWS_ACCESS_KEY_ID is not set; profile default: not found in .*credentials \(absent\), .*config \(absent\); instance: .*latest/api/token did not answer' \
    AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:1

# The cache: credentials expiring in 5 minutes are fetched at each of 3
# uses; ones expiring in an hour once.
n0=$(grep -c '^GET /container' "$tmp/requests.log")
creds '^ok container ASIACONTAINER' AWS_CONTAINER_CREDENTIALS_FULL_URI="$base/container?exp=300" \
    AWS_CONTAINER_AUTHORIZATION_TOKEN="Bearer container-secret" -- - - 3
n1=$(grep -c '^GET /container' "$tmp/requests.log")
creds '^ok container ASIACONTAINER' AWS_CONTAINER_CREDENTIALS_FULL_URI="$base/container?exp=3600" \
    AWS_CONTAINER_AUTHORIZATION_TOKEN="Bearer container-secret" -- - - 3
n2=$(grep -c '^GET /container' "$tmp/requests.log")
[[ $((n1 - n0)) -eq 3 ]] || fail "credentials expiring in 5 min: $((n1 - n0)) fetches for 3 uses, want 3"
[[ $((n2 - n1)) -eq 1 ]] || fail "credentials expiring in 1 h: $((n2 - n1)) fetches for 3 uses, want 1"
echo "ok: the cache: 3 fetches for 3 uses of credentials expiring in 5 min, $((n2 - n1)) for ones expiring in 1 h"

# outboxd check's kafka token line, from the container's credentials.
cat >"$tmp/outboxd.ini" <<INI
[postgres]
conninfo = host=127.0.0.1 port=1 dbname=x user=x connect_timeout=1
slot = s
publication = p
[kafka]
bootstrap.servers = 127.0.0.1:1
security.protocol = SASL_SSL
sasl.mechanism = AWS_MSK_IAM
[aws]
region = eu-north-1
INI
out=$(env -i PATH="$PATH" HOME="$tmp/home" AWS_EC2_METADATA_DISABLED=true "${CONT[@]}" \
    "$OUTBOXD" check -c "$tmp/outboxd.ini" 2>&1) || true
line=$(grep '^ok   kafka token' <<<"$out" || true)
if [[ "$line" =~ "AWS_MSK_IAM token for region eu-north-1 signed with credentials from container (access key ...INER); it expires" ]]; then
    echo "ok: outboxd check: $line"
else
    fail "outboxd check's kafka token line: $(grep 'kafka token' <<<"$out" || echo "(none)")"
fi
# Never the key id whole, the secret or the session token, in any line.
if grep -q 'ASIACONTAINER\|containerSecretXYZ\|containerTokenXYZ' <<<"$out"; then
    fail "a credential appears in check's output: $out"
fi

if ((fails)); then
    echo "chain.sh: $fails failure(s)" >&2
    exit 1
fi
echo "chain.sh: every case as expected (against the local stand-in, not AWS)"
