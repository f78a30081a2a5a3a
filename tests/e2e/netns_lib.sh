# shellcheck shell=bash
# tests/e2e/netns_lib.sh - test hosts and a nemesis for the partition
# scenarios (tests/e2e/partitions.sh), sourced after lib.sh.
#
# A test host is a network namespace joined to this (the root) namespace by
# a veth pair on a /24 of its own from 198.18.0.0/15 (reserved for network
# tests, RFC 2544): the root side is .1, the host .2. Nothing is routed
# beyond it. The nemesis cuts a host's link with iptables rules inside the
# host's namespace (DROP, so neither side hears a FIN or an RST), one or
# both directions, and heals it by deleting them. Everything is removed by
# netns_teardown, which lib.sh's exit trap calls.
#
# PostgreSQL on a host: netns_pg_host before pg_start. lib.sh then starts
# the server inside the namespace, listening on the host's address too,
# gives outboxd that address (PG_CONNINFO) and keeps the test's own psql on
# the Unix socket, which no partition cuts (writers and judges go on).

NETNS_HOSTS=()
NETNS_LINKS=()

# netns_require: fails unless this can make test hosts (root, ip, iptables).
netns_require() {
    [[ $(id -u) -eq 0 ]] || fail "the partition tests need root (network namespaces)"
    command -v ip >/dev/null || fail "ip (iproute2) is not installed"
    command -v iptables >/dev/null || fail "iptables is not installed"
}

# netns_subnet: sets NETNS_NET to a free 198.18.N (N in 1..250): reserved
# with a directory (mkdir is atomic, so two tests starting together never
# take the same), and on no interface here (one left by a killed test).
netns_subnet() {
    local n i
    for ((i = 0; i < 250; i++)); do
        n=$(((($$ + i) % 250) + 1))
        mkdir "/tmp/outboxd-netns-$n" 2>/dev/null || continue
        if ip -o -4 addr show | grep -q " 198\.18\.$n\."; then
            rmdir "/tmp/outboxd-netns-$n"
            continue
        fi
        NETNS_NET=198.18.$n
        NETNS_N=$n
        return 0
    done
    fail "no free 198.18.N.0/24 for the test hosts"
}

# netns_host NAME: makes host NAME: namespace obx<N>-NAME, loopback up, and
# a /30 of $NETNS_NET.0/24 on its link (the K-th host: .4K+2 inside, .4K+1
# on this side). Sets NETNS_NS_<NAME>, NETNS_ADDR_<NAME> (inside) and
# NETNS_PEER_<NAME> (this side).
netns_host() {
    local name=$1 k=${#NETNS_HOSTS[@]} ns host peer addr
    [[ -n "${NETNS_NET:-}" ]] || netns_subnet
    ns="obx$NETNS_N-$name"
    host="obx${NETNS_N}h$k"
    peer="obx${NETNS_N}p$k"
    addr="$NETNS_NET.$((k * 4 + 2))"
    NETNS_HOSTS+=("$ns")
    ip netns add "$ns" || fail "ip netns add $ns failed"
    ip link add "$host" type veth peer name "$peer" || fail "veth $host failed"
    NETNS_LINKS+=("$host")
    ip link set "$peer" netns "$ns"
    ip addr add "$NETNS_NET.$((k * 4 + 1))/30" dev "$host"
    ip link set "$host" up
    ip netns exec "$ns" ip addr add "$addr/30" dev "$peer"
    ip netns exec "$ns" ip link set "$peer" up
    ip netns exec "$ns" ip link set lo up
    printf -v "NETNS_NS_$name" '%s' "$ns"
    printf -v "NETNS_ADDR_$name" '%s' "$addr"
    printf -v "NETNS_PEER_$name" '%s' "$NETNS_NET.$((k * 4 + 1))"
    info "test host $name: namespace $ns, $addr (this side $NETNS_NET.$((k * 4 + 1)))"
}

# netns_pg_host: a host "pg" for PostgreSQL; call before pg_start.
netns_pg_host() {
    netns_host pg
    export PG_NETNS=$NETNS_NS_pg PG_NETNS_ADDR=$NETNS_ADDR_pg PG_NETNS_PEER=$NETNS_PEER_pg
}

# netns_cut NAME in|out|both: drops what host NAME receives from (in), sends
# to (out) or both, the other side of its link. Silent: no RST, no ICMP.
netns_cut() {
    local name=$1 dir=$2 ns peer
    ns=NETNS_NS_$name peer=NETNS_PEER_$name
    case $dir in in | both) ip netns exec "${!ns}" iptables -w -I INPUT -s "${!peer}" -j DROP ;; esac
    case $dir in out | both) ip netns exec "${!ns}" iptables -w -I OUTPUT -d "${!peer}" -j DROP ;; esac
    case $dir in in | out | both) ;; *) fail "netns_cut: direction $dir" ;; esac
    info "nemesis: host $name cut off ($dir)"
}

# netns_heal NAME: removes every rule netns_cut added for host NAME.
netns_heal() {
    local name=$1 ns
    ns=NETNS_NS_$name
    ip netns exec "${!ns}" iptables -w -F INPUT
    ip netns exec "${!ns}" iptables -w -F OUTPUT
    info "nemesis: host $name healed"
}

# netns_teardown: kills what still runs in the hosts and removes them, their
# rules and their links (deleting this side of a veth pair deletes both: the
# kernel frees a namespace itself only once nothing refers to it). Safe to
# call twice.
netns_teardown() {
    local ns pid link
    for ns in "${NETNS_HOSTS[@]}"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    for link in "${NETNS_LINKS[@]}"; do ip link del "$link" 2>/dev/null; done
    [[ -z "${NETNS_N:-}" ]] || rmdir "/tmp/outboxd-netns-$NETNS_N" 2>/dev/null
    NETNS_HOSTS=() NETNS_LINKS=() NETNS_N= NETNS_NET=
}
