# shellcheck shell=bash
# tests/free_port.sh - free_port: prints a loopback TCP port nobody listens
# on and no other test has been given. Sourced by tests/e2e/lib.sh,
# tests/kafka/kafka.sh and tests/debezium/debezium.sh.
#
# Tests run side by side (tests/run-all.sh: ctest -j), so a port must stay
# free between this check and the server's bind, which can be seconds
# later (a JVM's start). Two things could take it meanwhile:
#  - an outgoing connection of any process: the kernel picks their local
#    ports from ip_local_port_range (32768-60999 here), so the ports given
#    here are below its low end (from 10000 on);
#  - another test given the same port: each port given is reserved by a
#    directory in OUTBOXD_PORT_DIR (/tmp/outboxd-ports), made with mkdir,
#    which only one caller can create; reservations older than an hour
#    are removed (a test's servers hold their ports by then).
free_port() {
    local p i low dir=${OUTBOXD_PORT_DIR:-/tmp/outboxd-ports}
    low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null) || low=
    [[ "$low" =~ ^[0-9]+$ ]] && ((low > 12000)) || low=32768
    mkdir -p -m 1777 "$dir" 2>/dev/null || true
    find "$dir" -mindepth 1 -maxdepth 1 -type d -mmin +60 -exec rmdir {} + 2>/dev/null || true
    for ((i = 0; i < 400; i++)); do
        p=$((10000 + RANDOM % (low - 10000)))
        if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            continue
        fi
        mkdir "$dir/$p" 2>/dev/null || continue
        echo "$p"
        return 0
    done
    echo "free_port: no free port found below $low" >&2
    return 1
}
