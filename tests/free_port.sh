# shellcheck shell=bash
# tests/free_port.sh - free_port: prints a loopback TCP port nobody listens
# on (a random one in 20000-59999, tried by connecting). Sourced by
# tests/e2e/lib.sh and tests/kafka/kafka.sh. A port can still be taken
# between this check and its use; the servers started on it fail loudly then.
free_port() {
    local p i
    for ((i = 0; i < 200; i++)); do
        p=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    echo "free_port: no free port found" >&2
    return 1
}
