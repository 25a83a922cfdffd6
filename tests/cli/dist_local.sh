#!/usr/bin/env bash
# The dist tests in a process started without mpirun (issue 7, item 1: a single-process run needs
# no mpirun): World() is then a one-rank world that never initialises MPI, with local collectives
# and in-memory self-messages. CTest's dist.np1 covers the one-rank world under mpiexec.
#
#   bash tests/cli/dist_local.sh <tessera binary> <source dir>   (CTest: cli.dist_local)
set -euo pipefail
tessera=$1
dist_tests=$(dirname "$tessera")/tessera_dist_tests
[[ -x $dist_tests ]] || { echo "FAIL: $dist_tests is not built" >&2; exit 1; }

# No launcher in the environment, even when CTest itself runs under one.
output=$(env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK -u PMI_SIZE \
  -u MPI_LOCALNRANKS "$dist_tests" 2>&1) || { echo "$output"; echo "FAIL: tessera_dist_tests failed" >&2; exit 1; }
# The MPI-less world runs the test that MPI runs skip.
grep -q "OK \] CommunicatorTest.UnmatchedSelfMessageIsAnErrorWithoutMpi" <<<"$output" || {
  echo "$output"
  echo "FAIL: the one-rank world without MPI was not used" >&2
  exit 1
}
echo "$output" | tail -n 1
