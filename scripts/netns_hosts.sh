#!/usr/bin/env bash
# Emulated hosts for multi-host MPI runs on one machine: network namespaces joined by veth links to
# a bridge, each link rate-limited like a NIC, so that MPI ranks talk over TCP through a real
# (virtual) network instead of shared memory.
#
#   scripts/netns_hosts.sh up N [RATE] [DELAY]
#       Creates hosts tessera-h0 .. tessera-h{N-1} (10.77.0.1 .. 10.77.0.N) and a launcher
#       namespace tessera-ctl (10.77.0.254, not rate-limited), all on a bridge inside namespace
#       tessera-sw (the switch; the root namespace's network is not touched). RATE (tc syntax, default 10gbit) limits each host's link in both
#       directions (tbf on both veth ends: a full-duplex NIC); DELAY (e.g. 100us; netem, needs the
#       sch_netem qdisc) adds one-way latency. Names resolve through /etc/netns/<ns>/hosts, which
#       `ip netns exec` binds over /etc/hosts. Replaces an existing setup.
#   scripts/netns_hosts.sh down
#       Removes the namespaces, links and /etc/netns entries made by `up`.
#   scripts/netns_hosts.sh status
#       Lists the hosts, their addresses and qdiscs.
#   scripts/netns_hosts.sh mpirun MPIRUN-ARGS...
#       Runs mpirun from tessera-ctl with the options the emulated hosts need: processes start
#       through this script's `rsh` agent, MPI traffic stays on TCP over the 10.77.0.0/24 links
#       (never shared memory: the hosts share a kernel and /dev/shm), and large messages travel
#       as 128 KiB send fragments instead of the TCP BTL's "put" (btl_tcp_flags without put). With
#       put, Open MPI 4.1 writes a message's remainder as one fragment, and a control message
#       queued behind it on the same socket (the acknowledgement a transfer in the other direction
#       waits for) serialises simultaneous transfers in both directions: measured at half the link
#       rate each way at 1 Gbit/s, and a fused reduce-scatter at 400 Mbit/s twice as slow as its
#       own messages alone; raw TCP sockets, and send fragments, run both directions at the full
#       rate. (MCA options given here must not repeat these.) Processes are not bound by Open MPI;
#       each host's processes run on
#       that host's share of the CPUs instead (see `rsh`), and the daemons do not share hwloc's
#       topology through shared memory (rtc_hwloc_vmhole none: several daemons of one machine
#       starting at once crashed about one launch in three in hwloc_shmem_topology_write).
#       Give --host or -n as usual:
#         scripts/netns_hosts.sh mpirun --host tessera-h0,tessera-h1 -n 2 ./program
#       Example session (also: tests/cli/parallel_netns.sh, docs/ARCHITECTURE.md "Multi-host runs"):
#         scripts/netns_hosts.sh up 2 10gbit
#         scripts/netns_hosts.sh mpirun --host tessera-h0,tessera-h1 -n 2 build/collective_bench
#         scripts/netns_hosts.sh down
#   scripts/netns_hosts.sh rsh HOST COMMAND...
#       The launch agent (Open MPI plm_rsh_agent): runs COMMAND, a shell command line as ssh would
#       receive it, inside namespace HOST, on HOST's share of the CPUs (taskset).
#
# Needs root and a kernel that permits network namespaces, veth, bridges and tbf; `up` fails with
# a one-line message otherwise ("cannot create network namespaces: ...").
set -euo pipefail

# TESSERA_NETNS_PREFIX renames everything (default tessera: hosts tessera-h0 ...), so that two
# setups can coexist, e.g. a test run next to a benchmark.
readonly kPrefix=${TESSERA_NETNS_PREFIX:-tessera}
[[ $kPrefix =~ ^[a-z][a-z0-9]{0,11}$ ]] || { echo "netns_hosts.sh: TESSERA_NETNS_PREFIX must be 1-12 lowercase letters/digits" >&2; exit 1; }
readonly kSwitch=${kPrefix}-sw
readonly kControl=${kPrefix}-ctl
readonly kBridge=br0  # inside the switch namespace
readonly kSubnet=10.77.0
readonly kCidr=${kSubnet}.0/24
readonly kLink=tveth0  # the link's name inside every host namespace
script_path=$(readlink -f "${BASH_SOURCE[0]}")

die() { echo "netns_hosts.sh: $*" >&2; exit 1; }

host_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${kPrefix}-h[0-9]+$" || true; }

# tc's rate syntax (10gbit, 800mbit, 1gbps, ...) -> bytes per second, for the tbf burst size.
rate_bytes_per_second() {
  local rate=${1,,} number unit
  number=$(sed -E 's/^([0-9.]+).*/\1/' <<<"$rate")
  unit=$(sed -E 's/^[0-9.]+//' <<<"$rate")
  [[ -n $number && $number =~ ^[0-9.]+$ ]] || die "bad rate '$1' (expected e.g. 10gbit, 1gbit, 500mbit)"
  local bits
  case $unit in
    bit | "") bits=1 ;;
    kbit) bits=1000 ;;
    mbit) bits=1000000 ;;
    gbit) bits=1000000000 ;;
    bps) bits=8 ;;
    kbps) bits=8000 ;;
    mbps) bits=8000000 ;;
    gbps) bits=8000000000 ;;
    *) die "bad rate '$1' (expected e.g. 10gbit, 1gbit, 500mbit)" ;;
  esac
  awk -v n="$number" -v b="$bits" 'BEGIN { printf "%d\n", n * b / 8 }'
}

# Rate limit (and optional delay) on the egress of one link end; returns 1 (message printed) on
# failure, so that the caller can remove the half-built setup. tbf's bucket holds 2 ms of traffic
# (at least 64 KiB, above one GSO segment) so that TCP keeps the link busy; a 50 ms queue bounds
# the latency a full queue adds.
shape_link() {
  local ns=$1 dev=$2 rate=$3 delay=$4 bytes burst
  bytes=$(rate_bytes_per_second "$rate")
  burst=$((bytes / 500))
  ((burst < 65536)) && burst=65536
  if [[ -n $delay ]]; then
    ip -n "$ns" link set "$dev" up
    if ! tc -n "$ns" qdisc add dev "$dev" root handle 1: netem delay "$delay" 2>/dev/null; then
      echo "netns_hosts.sh: cannot add a delay of '$delay' on $dev (no netem qdisc in this kernel); run without DELAY" >&2
      return 1
    fi
    tc -n "$ns" qdisc add dev "$dev" parent 1:1 handle 10: tbf rate "$rate" burst "$burst" latency 50ms
  else
    tc -n "$ns" qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms
  fi
}

cmd_down() {
  local ns
  for ns in $(host_namespaces) "$kControl" "$kSwitch"; do
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  rmdir /etc/netns 2>/dev/null || true
}

cmd_up() {
  local n=${1:-} rate=${2:-10gbit} delay=${3:-}
  [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 200)) || die "usage: netns_hosts.sh up N [RATE] [DELAY] (1 <= N <= 200)"
  [[ $(id -u) == 0 ]] || die "must run as root (ip netns)"
  rate_bytes_per_second "$rate" >/dev/null
  cmd_down
  ip netns add "$kSwitch" 2>/dev/null || die "cannot create network namespaces: 'ip netns add' is not permitted here"
  ip -n "$kSwitch" link add "$kBridge" type bridge || { cmd_down; die "cannot create a bridge in a network namespace"; }
  ip -n "$kSwitch" link set "$kBridge" up
  ip -n "$kSwitch" link set lo up

  local hosts_file
  hosts_file=$(mktemp)
  {
    echo "127.0.0.1 localhost"
    echo "${kSubnet}.254 ${kControl}"
    for ((i = 0; i < n; ++i)); do echo "${kSubnet}.$((i + 1)) ${kPrefix}-h$i"; done
  } >"$hosts_file"

  # name, address, switch-side link, rate ('' = unlimited)
  local -a nodes=("$kControl ${kSubnet}.254 ctl -")
  for ((i = 0; i < n; ++i)); do nodes+=("${kPrefix}-h$i ${kSubnet}.$((i + 1)) h$i $rate"); done
  local entry ns addr port link_rate
  for entry in "${nodes[@]}"; do
    read -r ns addr port link_rate <<<"$entry"
    ip netns add "$ns"
    ip -n "$kSwitch" link add "$port" type veth peer name "$kLink" netns "$ns" ||
      { cmd_down; die "cannot create veth links between namespaces"; }
    ip -n "$kSwitch" link set "$port" master "$kBridge"
    ip -n "$ns" addr add "$addr/24" dev "$kLink"
    ip -n "$ns" link set lo up
    if [[ $link_rate != - ]]; then
      shape_link "$ns" "$kLink" "$link_rate" "$delay" || { cmd_down; exit 1; }
      shape_link "$kSwitch" "$port" "$link_rate" "$delay" || { cmd_down; exit 1; }
    fi
    ip -n "$ns" link set "$kLink" up
    ip -n "$kSwitch" link set "$port" up
    mkdir -p "/etc/netns/$ns"
    cp "$hosts_file" "/etc/netns/$ns/hosts"
  done
  rm -f "$hosts_file"

  # Every host must be reachable from the launcher: a TCP connection to a closed port is refused
  # (reset) by a reachable host, and times out otherwise (no ping here: iputils is optional).
  for ((i = 0; i < n; ++i)); do
    local ok=0 answer
    for _ in $(seq 20); do
      answer=$(ip netns exec "$kControl" timeout 1 bash -c ": <>/dev/tcp/${kSubnet}.$((i + 1))/9" 2>&1 || true)
      if [[ $answer == *"refused"* ]]; then ok=1; break; fi
      sleep 0.1
    done
    ((ok)) || { cmd_down; die "host ${kPrefix}-h$i (${kSubnet}.$((i + 1))) does not answer on the bridge"; }
  done
  echo "netns_hosts.sh: $n hosts ${kPrefix}-h0..${kPrefix}-h$((n - 1)) on ${kCidr}, $rate per link${delay:+, delay $delay}"
}

cmd_status() {
  local ns
  for ns in $(host_namespaces) "$kControl"; do
    ip netns list | grep -q "^$ns\b" || continue
    echo "$ns: $(ip -n "$ns" -4 -o addr show dev "$kLink" 2>/dev/null | awk '{print $4}')" \
      "$(tc -n "$ns" qdisc show dev "$kLink" 2>/dev/null | tr '\n' ' ')"
  done
}

cmd_rsh() {
  local host=${1:-}
  shift || true
  [[ -n $host && $# -gt 0 ]] || die "usage: netns_hosts.sh rsh HOST COMMAND..."
  # Launchers pass either a host name or its address.
  if [[ $host =~ ^${kSubnet//./\\.}\.([0-9]+)$ ]]; then host=${kPrefix}-h$((BASH_REMATCH[1] - 1)); fi
  [[ $host =~ ^${kPrefix}-h([0-9]+)$ ]] || die "no namespace host '$host' (hosts are ${kPrefix}-h0 ...)"
  local index=${BASH_REMATCH[1]}
  ip netns list | grep -q "^$host\b" || die "no namespace host '$host' (run: netns_hosts.sh up N)"
  # Each host gets its own share of the CPUs, as separate machines would: host i runs on CPUs
  # [i c, (i+1) c) modulo the CPU count, c = max(1, CPUs / hosts). (Open MPI would bind every
  # host's first rank to core 0: each orted sees the whole machine as its node.)
  local cpus hosts per first list=""
  cpus=$(nproc)
  hosts=$(host_namespaces | wc -l)
  per=$((cpus / hosts))
  ((per >= 1)) || per=1
  first=$((index * per))
  for ((c = 0; c < per; ++c)); do list+=${list:+,}$(((first + c) % cpus)); done
  # Like ssh: the arguments form one command line for the remote shell.
  exec ip netns exec "$host" taskset -c "$list" /bin/sh -c "$*"
}

cmd_mpirun() {
  ip netns list | grep -q "^$kControl\b" || die "no namespace hosts (run: netns_hosts.sh up N)"
  exec ip netns exec "$kControl" mpirun \
    --mca plm_rsh_agent "$script_path rsh" \
    --mca btl tcp,self \
    --mca btl_tcp_if_include "$kCidr" \
    --mca oob_tcp_if_include "$kCidr" \
    --mca btl_tcp_flags send,inplace,need-ack,need-csum,hetero-rdma \
    --mca rtc_hwloc_vmhole none \
    --bind-to none \
    "$@"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  rsh) shift; cmd_rsh "$@" ;;
  mpirun) shift; cmd_mpirun "$@" ;;
  *) die "usage: netns_hosts.sh up N [RATE] [DELAY] | down | status | mpirun ARGS... | rsh HOST COMMAND..." ;;
esac
