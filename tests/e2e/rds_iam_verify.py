#!/usr/bin/python3
# tests/e2e/rds_iam_verify.py - a stand-in for Amazon RDS's check of an IAM
# database auth token, run by PostgreSQL's PAM (pam_exec expose_authtok:
# the password on stdin) in tests/e2e/rds_iam.sh. NOT RDS: an independent
# re-implementation of the SigV4 query-string check, with Python's standard
# library only (hmac, hashlib), against a known test secret.
#
# The token is "HOST:PORT/?Action=connect&DBUser=U&X-Amz-Algorithm=...&
# X-Amz-Credential=AKID/DATE/REGION/rds-db/aws4_request&X-Amz-Date=...&
# X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Signature=HEX" (what
# AWS's RDS signers return). Accepted only when: HOST:PORT is the endpoint
# the test connects to; DBUser is the user PostgreSQL authenticates
# (PAM_USER); the access key, region and service are the test's; X-Amz-Date
# is within X-Amz-Expires (at most 900 s) of now and not after it, and not
# before the file not_before's epoch second when that exists (the test's
# proof that a reconnection made a new token); the signature, recomputed
# from the secret, matches. Each decision is one line of verify.log (never
# the token: its SHA-256 prefix).
#
# Usage (pam_exec): rds_iam_verify.py DIR; DIR holds `secret` (lines:
# access key id, secret access key, region, HOST:PORT) and gets verify.log.
import datetime
import hashlib
import hmac
import os
import sys
import time
import urllib.parse

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def log(d, line):
    with open(os.path.join(d, "verify.log"), "a") as f:
        f.write("%s %s\n" % (time.strftime("%H:%M:%S"), line))


def sign(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def check(d, token, user):
    with open(os.path.join(d, "secret")) as f:
        akid, secret, region, endpoint = [l.strip() for l in f.read().splitlines()[:4]]
    host, sep, query = token.partition("/?")
    if not sep:
        return "not a token (no /?)"
    if host != endpoint:
        return "signed for %s, not %s" % (host, endpoint)
    pairs = [p.partition("=") for p in query.split("&")]
    params = {urllib.parse.unquote(k): urllib.parse.unquote(v) for k, _, v in pairs}
    if len(params) != len(pairs):
        return "a parameter repeated"
    want = {"Action": "connect", "DBUser": user, "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
            "X-Amz-SignedHeaders": "host"}
    for k, v in want.items():
        if params.get(k) != v:
            return "%s is %r, not %r" % (k, params.get(k), v)
    cred = params.get("X-Amz-Credential", "").split("/")
    amz_date = params.get("X-Amz-Date", "")
    if len(cred) != 5 or cred[0] != akid or cred[2] != region or cred[3] != "rds-db" \
            or cred[4] != "aws4_request" or cred[1] != amz_date[:8]:
        return "credential scope %r is not %s/DATE/%s/rds-db/aws4_request" % (
            params.get("X-Amz-Credential"), akid, region)
    try:
        signed = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        expires = int(params.get("X-Amz-Expires", ""))
    except ValueError:
        return "X-Amz-Date %r or X-Amz-Expires unreadable" % amz_date
    now = time.time()
    if not 0 < expires <= 900:
        return "X-Amz-Expires %d is not in 1..900" % expires
    if signed > now + 60:
        return "signed in the future (%s)" % amz_date
    if now > signed + expires:
        return "expired: signed %s, %d s ago" % (amz_date, now - signed)
    nb = os.path.join(d, "not_before")
    if os.path.exists(nb):
        with open(nb) as f:
            not_before = int(f.read().strip())
        if signed < not_before:
            return "made before the reconnection (%s < not_before %d): an old token" % (
                amz_date, not_before)
    # SigV4, query-string form (docs.aws.amazon.com, "Create a signed AWS
    # API request"): every parameter but the signature, names and values
    # URI-encoded (RFC 3986 unreserved kept), sorted; the one signed header
    # host (HOST:PORT); the payload hash of an empty body.
    canon_q = "&".join("%s=%s" % (urllib.parse.quote(k, safe="-_.~"),
                                  urllib.parse.quote(v, safe="-_.~"))
                       for k, v in sorted(params.items()) if k != "X-Amz-Signature")
    canonical = "\n".join(["GET", "/", canon_q, "host:" + host, "", "host", EMPTY_SHA256])
    scope = "/".join(cred[1:])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = sign(("AWS4" + secret).encode(), cred[1])
    for part in (region, "rds-db", "aws4_request"):
        key = sign(key, part)
    sig = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(sig, params.get("X-Amz-Signature", "")):
        return "signature mismatch"
    return None


def main():
    d = sys.argv[1]
    user = os.environ.get("PAM_USER", "")
    token = sys.stdin.buffer.read().rstrip(b"\0\n").decode("utf-8", "replace")
    tag = hashlib.sha256(token.encode()).hexdigest()[:12]
    try:
        why = check(d, token, user)
    except Exception as e:  # anything unreadable is a refusal, said
        why = "verifier error: %r" % (e,)
    if why:
        log(d, "REFUSED user=%s token=%s: %s" % (user, tag, why))
        return 1
    date = token.split("X-Amz-Date=")[1][:16]
    log(d, "ACCEPTED user=%s token=%s date=%s" % (user, tag, date))
    return 0


if __name__ == "__main__":
    sys.exit(main())
