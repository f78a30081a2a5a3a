# shellcheck shell=bash
# tests/e2e/netns_lib.sh - test hosts and a nemesis for the partition
# scenarios (tests/e2e/partitions.sh), sourced after lib.sh.
#
# The test network is a bridge in this (the root) namespace on a /24 of its
# own from 198.18.0.0/15 (reserved for network tests, RFC 2544): this side
# is .1 (the host "root": outboxd, the writers' tools and the judges run
# here unless a test puts them elsewhere), and each test host is a network
# namespace joined to the bridge by a veth pair, at .10 + K for the K-th.
# Hosts reach each other and this side over the bridge; nothing is routed
# beyond it. The nemesis cuts a host off with iptables rules inside the
# host's namespace (DROP, so nobody hears a FIN, an RST or an ICMP), from
# chosen peers or from everyone, one or both directions, and heals it by
# flushing them. Everything is removed by netns_teardown, which lib.sh's
# exit trap calls.
#
# PostgreSQL on a host: netns_pg_host before pg_start. lib.sh then starts
# the server inside the namespace, listening on the host's address too,
# gives outboxd that address (PG_CONNINFO) and keeps the test's own psql on
# the Unix socket, which no partition cuts (writers and judges go on).
# Kafka on hosts: netns_kafka_hosts N before broker_start (E2E_KAFKA=real):
# the controller on host "ctl", broker I on host "bI".

NETNS_HOSTS=()
NETNS_LINKS=()
NETNS_BRIDGE=
NETNS_DELAYERS=() # "NAME:PID" of each running outboxd-netdelay

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

# netns_bridge: the test network's bridge, this side's address .1 on it
# (host "root"). Made by the first netns_host.
netns_bridge() {
    netns_subnet
    NETNS_BRIDGE="obx${NETNS_N}br"
    ip link add "$NETNS_BRIDGE" type bridge || fail "ip link add bridge $NETNS_BRIDGE failed"
    NETNS_LINKS+=("$NETNS_BRIDGE")
    ip addr add "$NETNS_NET.1/24" dev "$NETNS_BRIDGE"
    ip link set "$NETNS_BRIDGE" up
    NETNS_ADDR_root=$NETNS_NET.1
    export NETNS_CIDR=$NETNS_NET.0/24
}

# netns_host NAME: makes host NAME: namespace obx<N>-NAME, loopback up, its
# veth pair's other end on the bridge, address .10 + K (the K-th host).
# Sets NETNS_NS_<NAME> and NETNS_ADDR_<NAME>.
netns_host() {
    local name=$1 k=${#NETNS_HOSTS[@]} ns host peer addr
    [[ -n "$NETNS_BRIDGE" ]] || netns_bridge
    ns="obx$NETNS_N-$name"
    host="obx${NETNS_N}h$k"
    peer="obx${NETNS_N}p$k"
    addr="$NETNS_NET.$((k + 10))"
    NETNS_HOSTS+=("$ns")
    ip netns add "$ns" || fail "ip netns add $ns failed"
    ip link add "$host" type veth peer name "$peer" || fail "veth $host failed"
    NETNS_LINKS+=("$host")
    ip link set "$peer" netns "$ns"
    ip link set "$host" master "$NETNS_BRIDGE"
    ip link set "$host" up
    ip netns exec "$ns" ip addr add "$addr/24" dev "$peer"
    ip netns exec "$ns" ip link set "$peer" up
    ip netns exec "$ns" ip link set lo up
    printf -v "NETNS_NS_$name" '%s' "$ns"
    printf -v "NETNS_ADDR_$name" '%s' "$addr"
    info "test host $name: namespace $ns, $addr"
}

# netns_pg_host: a host "pg" for PostgreSQL; call before pg_start.
netns_pg_host() {
    netns_host pg
    export PG_NETNS=$NETNS_NS_pg PG_NETNS_ADDR=$NETNS_ADDR_pg PG_NETNS_CLIENTS=$NETNS_CIDR
}

# netns_kafka_hosts N: hosts "ctl" (the controller) and "b1".."bN" (the
# brokers) for a real cluster; call before broker_start (kafka.sh's
# KAFKA_HOSTS).
netns_kafka_hosts() {
    local n=$1 i ns addr
    netns_host ctl
    KAFKA_HOSTS="100=$NETNS_NS_ctl@$NETNS_ADDR_ctl"
    for ((i = 1; i <= n; i++)); do
        netns_host "b$i"
        ns=NETNS_NS_b$i addr=NETNS_ADDR_b$i
        KAFKA_HOSTS+=" $i=${!ns}@${!addr}"
    done
    export KAFKA_HOSTS E2E_KAFKA_BROKERS=$n
}

# netns_addr NAME: the address of host NAME ("root": this side).
netns_addr() {
    local a=NETNS_ADDR_$1
    [[ -n "${!a:-}" ]] || fail "no test host $1"
    echo "${!a}"
}

# netns_cut NAME in|out|both [PEER...]: host NAME drops what it receives
# from (in), sends to (out), or both, each PEER (a host name or "root");
# without PEERs, everyone but itself. Rules add up until netns_heal.
# Silent: no RST, no ICMP.
netns_cut() {
    local name=$1 dir=$2 ns p a
    shift 2
    ns=NETNS_NS_$name
    [[ -n "${!ns:-}" ]] || fail "netns_cut: no test host $name"
    case $dir in in | out | both) ;; *) fail "netns_cut: direction $dir" ;; esac
    if (($# == 0)); then
        case $dir in in | both) ip netns exec "${!ns}" iptables -w -I INPUT ! -i lo -j DROP ;; esac
        case $dir in out | both) ip netns exec "${!ns}" iptables -w -I OUTPUT ! -o lo -j DROP ;; esac
    fi
    for p in "$@"; do
        a=$(netns_addr "$p")
        case $dir in in | both) ip netns exec "${!ns}" iptables -w -I INPUT -s "$a" -j DROP ;; esac
        case $dir in out | both) ip netns exec "${!ns}" iptables -w -I OUTPUT -d "$a" -j DROP ;; esac
    done
    info "nemesis: host $name cut off ($dir) from ${*:-everyone}"
}

# netns_loss NAME PERCENT: host NAME drops PERCENT % of what it receives
# and of what it sends, at random (iptables' statistic match), until
# netns_heal.
netns_loss() {
    local name=$1 pct=$2 ns p
    ns=NETNS_NS_$name
    p=$(awk -v p="$pct" 'BEGIN { printf "%.4f", p / 100 }')
    ip netns exec "${!ns}" iptables -w -I INPUT ! -i lo -m statistic --mode random --probability "$p" -j DROP
    ip netns exec "${!ns}" iptables -w -I OUTPUT ! -o lo -m statistic --mode random --probability "$p" -j DROP
    info "nemesis: host $name loses $pct% of its packets each way"
}

# netns_delay NAME DELAY_MS JITTER_MS: host NAME holds every packet it
# sends, and every one it receives from this side (whose own are not held),
# DELAY_MS +- JITTER_MS (uniform: packets overtake each other) in
# outboxd-netdelay (tests/netdelay.c, NFQUEUE: this kernel has no
# sch_netem), until netns_heal. So each way over a link is delayed once.
# Call it before netns_loss on the same host (a packet the delayer accepts
# skips the rules after its own).
netns_delay() {
    local name=$1 d=$2 j=$3 ns log pid i
    local tool=$OUTBOXD_BUILD_DIR/tests/outboxd-netdelay
    [[ -x "$tool" ]] || fail "$tool is not built (libnetfilter-queue-dev: deploy/install-deps.sh)"
    ns=NETNS_NS_$name
    log=$T/netdelay.$name.log
    ip netns exec "${!ns}" "$tool" --queue 1 --delay-ms "$d" --jitter-ms "$j" --seed "$RANDOM" \
        2>"$log" </dev/null &
    pid=$!
    for ((i = 0; i < 50; i++)); do
        grep -q 'holding packets' "$log" && break
        kill -0 "$pid" 2>/dev/null || fail "outboxd-netdelay on host $name exited: $(cat "$log")"
        sleep 0.1
    done
    grep -q 'holding packets' "$log" || fail "outboxd-netdelay on host $name did not start"
    NETNS_DELAYERS+=("$name:$pid")
    ip netns exec "${!ns}" iptables -w -I OUTPUT ! -o lo -j NFQUEUE --queue-num 1 --queue-bypass
    ip netns exec "${!ns}" iptables -w -I INPUT -s "$NETNS_ADDR_root" -j NFQUEUE --queue-num 1 \
        --queue-bypass
    info "nemesis: host $name holds its packets ${d} +- ${j} ms"
}

# netns_heal NAME: removes every rule the nemesis added for host NAME and
# stops its delayer, whose packet count it keeps in NETNS_DELAYED_<NAME>.
netns_heal() {
    local name=$1 ns e rest=()
    ns=NETNS_NS_$name
    ip netns exec "${!ns}" iptables -w -F INPUT
    ip netns exec "${!ns}" iptables -w -F OUTPUT
    for e in "${NETNS_DELAYERS[@]}"; do
        if [[ ${e%%:*} == "$name" ]]; then
            kill -TERM "${e#*:}" 2>/dev/null
            wait "${e#*:}" 2>/dev/null
            info "$(tail -n 1 "$T/netdelay.$name.log")"
            printf -v "NETNS_DELAYED_$name" '%s' \
                "$(sed -n 's/.*: \([0-9]*\) packets, .*/\1/p' "$T/netdelay.$name.log" | tail -n 1)"
        else
            rest+=("$e")
        fi
    done
    NETNS_DELAYERS=("${rest[@]}")
    info "nemesis: host $name healed"
}

# netns_teardown: kills what still runs in the hosts and removes them, their
# links and the bridge (deleting this side of a veth pair deletes both: the
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
    NETNS_HOSTS=() NETNS_LINKS=() NETNS_N= NETNS_NET= NETNS_BRIDGE= NETNS_DELAYERS=()
}
