#!/usr/bin/env bash
# The parallel tests (communicator and collective matmuls) with two ranks on two emulated hosts:
# network namespaces on a bridge with 1 Gbit/s links (scripts/netns_hosts.sh), ranks started by
# `mpirun --host` through the namespaces' launch agent, MPI over TCP only (issue 7, item 6).
# Checks that the ranks really ran in different hosts, then runs tessera_parallel_tests there.
# Skipped, with a message saying why, where network namespaces are not permitted.
#
#   bash tests/cli/parallel_netns.sh <tessera binary> <source dir>   (CTest: cli.parallel_netns)
set -euo pipefail
tessera=$1
source_dir=$2
parallel_tests=$(dirname "$tessera")/tessera_parallel_tests
hosts_script=$source_dir/scripts/netns_hosts.sh

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIPPED: $* (the cross-host run needs root and network namespaces)"; exit 0; }

[[ -x $parallel_tests ]] || fail "$parallel_tests is not built"
[[ $(id -u) == 0 ]] || skip "not running as root"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
command -v tc >/dev/null || skip "tc is not installed"
command -v mpirun >/dev/null || fail "mpirun is not installed"

# Own names, so that a benchmark using the default hosts can run at the same time.
export TESSERA_NETNS_PREFIX=t$$
probe=${TESSERA_NETNS_PREFIX}-probe
ip netns add "$probe" 2>/dev/null || skip "'ip netns add' is not permitted here"
ip netns del "$probe"

trap '"$hosts_script" down' EXIT
"$hosts_script" up 2 1gbit
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A session directory of our own: the namespace hosts share /tmp and the hostname, so their
# daemons' job-family directories could collide with a concurrent mpirun's (ctest -j2 runs the
# parallel.np* tests alongside; seen once as "mkdir /tmp/ompi.vm.0/jf.N: File exists").
ompi_tmp=$(mktemp -d)
trap '"$hosts_script" down; rm -rf "$ompi_tmp"' EXIT
export OMPI_MCA_orte_tmpdir_base="$ompi_tmp"
host_list=${TESSERA_NETNS_PREFIX}-h0,${TESSERA_NETNS_PREFIX}-h1

# Rank i must run inside host i: each process reports the address of its namespace's link.
addresses=$("$hosts_script" mpirun --host "$host_list" -n 2 \
  sh -c 'echo "$OMPI_COMM_WORLD_RANK $(ip -4 -o addr show dev tveth0 | awk "{print \$4}")"' | sort | tr '\n' ' ')
[[ $addresses == "0 10.77.0.1/24 1 10.77.0.2/24 " ]] || fail "ranks did not run on the two hosts: '$addresses'"

output=$("$hosts_script" mpirun --host "$host_list" -n 2 "$parallel_tests" 2>&1) || {
  echo "$output"
  fail "tessera_parallel_tests failed across the namespace hosts"
}
grep -q "PASSED" <<<"$output" || { echo "$output"; fail "no test result in the output"; }
echo "$output" | tail -n 3
echo "PASS: 2 ranks on $host_list over TCP"
