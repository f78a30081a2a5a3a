#!/bin/bash
# outboxd-healthcheck - the container image's HEALTHCHECK: GET /healthz from
# outboxd's own HTTP server and exit 0 only on "200".
#
# It speaks HTTP/1.0 through bash's /dev/tcp, so the image needs no curl or
# wget (and none of their libraries). The address is OUTBOXD_HTTP_LISTEN
# (HOST:PORT, as outboxd reads it; 0.0.0.0, :: or an empty host mean this
# host); the image sets it, and it beats any [http] listen in the file.
set -u

listen=${OUTBOXD_HTTP_LISTEN:-}
if [[ -z "$listen" || "$listen" != *:* ]]; then
    echo "outboxd-healthcheck: OUTBOXD_HTTP_LISTEN is '$listen', not HOST:PORT (is the HTTP server off?)" >&2
    exit 1
fi
port=${listen##*:}
host=${listen%:*}
host=${host#[}
host=${host%]}
case $host in
'' | 0.0.0.0 | '*') host=127.0.0.1 ;;
:: ) host=::1 ;;
esac

if ! { exec 3<>"/dev/tcp/$host/$port"; } 2>/dev/null; then
    echo "outboxd-healthcheck: cannot connect to $host:$port" >&2
    exit 1
fi
printf 'GET /healthz HTTP/1.0\r\nHost: %s\r\n\r\n' "$host" >&3
if ! IFS= read -r -t 4 status <&3; then
    echo "outboxd-healthcheck: no answer from $host:$port" >&2
    exit 1
fi
status=${status%$'\r'}
if [[ "$status" =~ ^HTTP/1\.[01]\ 200 ]]; then
    exit 0
fi
echo "outboxd-healthcheck: GET /healthz on $host:$port: $status" >&2
exit 1
