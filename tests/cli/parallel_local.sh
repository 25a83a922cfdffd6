#!/usr/bin/env bash
# The parallel tests in a process started without mpirun (issue 7, item 1: a single-process run needs
# no mpirun): World() is then a one-rank world that never initialises MPI, with local collectives
# and in-memory self-messages. CTest's parallel.np1 covers the one-rank world under mpiexec.
#
#   bash tests/cli/parallel_local.sh <tessera binary> <source dir>   (CTest: cli.parallel_local)
set -euo pipefail
tessera=$1
parallel_tests=$(dirname "$tessera")/tessera_parallel_tests
[[ -x $parallel_tests ]] || { echo "FAIL: $parallel_tests is not built" >&2; exit 1; }

# No launcher in the environment, even when CTest itself runs under one.
output=$(env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK -u PMI_SIZE \
  -u MPI_LOCALNRANKS "$parallel_tests" 2>&1) || { echo "$output"; echo "FAIL: tessera_parallel_tests failed" >&2; exit 1; }
# The MPI-less world runs the test that MPI runs skip.
grep -q "OK \] CommunicatorTest.UnmatchedSelfMessageIsAnErrorWithoutMpi" <<<"$output" || {
  echo "$output"
  echo "FAIL: the one-rank world without MPI was not used" >&2
  exit 1
}
echo "$output" | tail -n 1
