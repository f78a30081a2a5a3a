#!/usr/bin/env python3
# tests/aws/standin.py - a LOCAL STAND-IN for AWS's credential endpoints,
# for tests/aws/chain.sh (no AWS endpoint is reachable from the tests):
# STS's AssumeRoleWithWebIdentity (POST /sts, the Query API's form and XML
# answer), the ECS/EKS container credentials endpoint (GET /container*,
# JSON) and EC2's instance metadata service v2 (PUT /latest/api/token, GET
# /latest/meta-data/iam/security-credentials/[ROLE]). It answers as AWS's
# API references show those services answering; it is not AWS.
#
#   standin.py PORTFILE LOGFILE WEB_IDENTITY_TOKEN CONTAINER_AUTH
#
# Listens on 127.0.0.1, a free port written to PORTFILE; one line per
# request to LOGFILE ("METHOD PATH" and the headers the test checks). A
# container path's "?exp=S" makes the credentials expire in S seconds.
import datetime
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

portfile, logfile, web_token, container_auth = sys.argv[1:5]


def iso(seconds):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def note(self, extra=""):
        with open(logfile, "a") as f:
            f.write(f"{self.command} {self.path} {extra}\n")

    def answer(self, status, body, ctype="application/json"):
        b = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        form = urllib.parse.parse_qs(self.rfile.read(n).decode())
        one = lambda k: form.get(k, [""])[0]
        self.note(f"Action={one('Action')} RoleArn={one('RoleArn')} RoleSessionName={one('RoleSessionName')}")
        if self.path != "/sts" or one("Action") != "AssumeRoleWithWebIdentity":
            return self.answer(404, "no such stand-in path", "text/plain")
        if one("WebIdentityToken") != web_token:
            return self.answer(
                400,
                '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error>'
                "<Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>Incorrect token "
                "audience (stand-in)</Message></Error><RequestId>1</RequestId></ErrorResponse>",
                "text/xml",
            )
        self.answer(
            200,
            '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            "<AssumeRoleWithWebIdentityResult><AssumedRoleUser>"
            f"<Arn>arn:aws:sts::123456789012:assumed-role/outboxd/{one('RoleSessionName')}</Arn>"
            "<AssumedRoleId>AROAEXAMPLE:x</AssumedRoleId></AssumedRoleUser><Credentials>"
            "<SessionToken>stsSessionToken+/=</SessionToken><SecretAccessKey>stsSecret</SecretAccessKey>"
            f"<Expiration>{iso(3600)}</Expiration><AccessKeyId>ASIASTSSTANDIN</AccessKeyId>"
            "</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
            "text/xml",
        )

    def do_PUT(self):
        self.note(f"ttl={self.headers.get('X-aws-ec2-metadata-token-ttl-seconds')}")
        if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return self.answer(400, "bad", "text/plain")
        self.answer(200, "imds-session-token", "text/plain")

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        if u.path.startswith("/container"):
            self.note(f"auth={self.headers.get('Authorization')}")
            if self.headers.get("Authorization") != container_auth:
                return self.answer(401, '{"message":"unauthorized (stand-in)"}')
            exp = int(q.get("exp", ["3600"])[0])
            return self.answer(
                200,
                '{"AccessKeyId":"ASIACONTAINER","SecretAccessKey":"containerSecretXYZ","Token":"containerTokenXYZ",'
                f'"Expiration":"{iso(exp)}","RoleArn":"arn:aws:iam::123456789012:role/task"}}',
            )
        if u.path.startswith("/latest/meta-data/iam/security-credentials/"):
            self.note(f"token={self.headers.get('X-aws-ec2-metadata-token')}")
            if self.headers.get("X-aws-ec2-metadata-token") != "imds-session-token":
                return self.answer(401, "", "text/plain")
            role = u.path[len("/latest/meta-data/iam/security-credentials/"):]
            if not role:
                return self.answer(200, "outboxd-role", "text/plain")
            if role != "outboxd-role":
                return self.answer(404, "", "text/plain")
            return self.answer(
                200,
                '{"Code":"Success","LastUpdated":"2026-01-01T00:00:00Z","Type":"AWS-HMAC",'
                '"AccessKeyId":"ASIAIMDS","SecretAccessKey":"is","Token":"it",'
                f'"Expiration":"{iso(21600)}"}}',
            )
        self.note()
        self.answer(404, "no such stand-in path", "text/plain")


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os

os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
