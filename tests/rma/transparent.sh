#!/usr/bin/env bash
# transparent.sh BUILD WORKDIR -- the fallback a failure takes today (docs/rma.md): an RMA program linked
# with librevive_rma, under `revive launch`, checkpointed twice at random moments as a whole job, every
# process SIGKILLed, `revive restart`: the output must equal an uninterrupted run's (mpi_cr.py checks it),
# and the library must go on working in the restored job: its in-memory checkpoints continue, and every
# rebuild it verifies after the restart still succeeds.
set -euo pipefail
build=$1 work=$2
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rm -rf "$work"
mkdir -p "$work"
mpicc -O2 -o "$work/fft_linked" "$src/tests/rma/apps/fft_transpose.c" -L"$build/src/rma" -lrevive_rma \
  -Wl,-rpath,"$build/src/rma"
ldd "$work/fft_linked" | grep librevive_rma >/dev/null || { echo "FAIL: fft_linked is not linked with librevive_rma"; exit 1; }
python3 "$src/tests/mpi_transparent/mpi_cr.py" --revive "$build/src/cli/revive" \
  --inject "$build/src/inject/librevive_inject.so" --restart "$build/src/restart/revive-restart" \
  --mpi openmpi -n 4 --launcher mpirun --mpiexec-arg=--mca --mpiexec-arg=osc --mpiexec-arg=ucx \
  --env REVIVE_RMA_VERIFY=1 --env REVIVE_RMA_INTERVAL=0.2 --env REVIVE_RMA_GROUP=2 \
  --workdir "$work/cr" --ckpts 2 -- "$work/fft_linked" --n 16 --iters 80 --sleep-ms 50
# The restored job's rank 0 prints the library's summary at MPI_Finalize; the killed one never did.
stats=$(grep -h 'revive-rma: [0-9]* checkpoints' "$work/cr/run/"* 2>/dev/null || true)
[[ $(wc -l <<<"$stats") -eq 1 && -n $stats ]] || { echo "FAIL: expected one summary of the restored job, got: $stats"; exit 1; }
grep -q ' 0 failed;' <<<"$stats" && grep -q ' [1-9][0-9]* rebuilds verified' <<<"$stats" ||
  { echo "FAIL: the restored job's rebuilds: $stats"; exit 1; }
echo "OK: restored job: $stats"
rm -rf "$work"
