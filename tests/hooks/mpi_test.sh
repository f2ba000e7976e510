#!/usr/bin/env bash
# mpi_test.sh REVIVE INJECT PROG: the hooks in an MPI program (progs/hooks_mpi.c, a ring with a critical
# section around each exchange and all three callbacks). Run with mpiexec -n 2 without revive (every rank:
# active=0, no callback) and under `revive launch -- mpiexec -n 2` (every rank finds the engine: active=1),
# same stdout. Not yet checkpointed: transparent C/R of MPI jobs is being brought up separately (issue 7,
# docs/status.md); extend this with checkpoint/SIGKILL/restart once `revive launch -- mpiexec` includes
# the ranks in the computation.
set -euo pipefail
rv=$1 inject=$2 prog=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset REVIVE_PORT REVIVE_CKPT_DIR REVIVE_SECRET_FILE LD_PRELOAD REVIVE_CRITICAL_TIMEOUT
cd "$tmp"
HOOKS_EVENTS=$tmp/ref.ev timeout 120 mpiexec -n 2 "$prog" 30 >ref.out
[ "$(sort ref.ev)" = "$(printf 'rank 0 active=0\nrank 1 active=0')" ] || { echo "FAIL: without revive:"; cat ref.ev; exit 1; }
port=$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import random, e2e_driver as e; print(e.free_port(random.Random()))' \
  "$(dirname "$0")/../cli")
HOOKS_EVENTS=$tmp/run.ev REVIVE_INJECT_LIB=$inject REVIVE_LOG=0 timeout 120 \
  "$rv" launch --port "$port" --ckpt-dir "$tmp/ck" -- mpiexec -n 2 "$prog" 30 >run.out
grep -q "rank 0 active=1" run.ev && grep -q "rank 1 active=1" run.ev || { echo "FAIL: under revive:"; cat run.ev; exit 1; }
cmp ref.out run.out || { echo "FAIL: stdout differs under revive"; exit 1; }
echo "OK: MPI ranks find the engine under revive launch, not without it; same output"
