#!/usr/bin/env bash
# run.sh [BUILD_DIR] [CKPT_DIR] — runs every application-level benchmark (figures in docs/performance.md).
#   Builds applevel_bench, lanczos_mpi and heat2d if needed; CKPT_DIR defaults to /tmp/revive-bench (the
#   disk being measured: put it where checkpoints would go).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-mpi}
dir=${2:-/tmp/revive-bench}
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j2 --target applevel_bench lanczos lanczos_mpi >/dev/null
mkdir -p "$dir"
echo "### applevel_bench --dir $dir --sizes-mib 64,1024 --reps 5 (machine: $(nproc) cores, $(uname -r))"
"$build/bench/applevel/applevel_bench" --dir "$dir" --sizes-mib 64,1024 --reps 5 \
  --lanczos-n 1000 --lanczos-iters 200 --every 20
echo "### MPI Lanczos, 2 ranks, checkpoint every 20 iterations vs none (wall time of the iteration loop)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for every in 0 20; do
  for async in off copy; do
    ((every == 0)) && [[ $async == copy ]] && continue
    for r in 1 2 3; do
      mpirun -n 2 --oversubscribe "$build/examples/lanczos/lanczos_mpi" --nx 1000 --ny 1000 --iters 200 \
        --every "$every" --async "$async" --fresh --dir "$dir/mpi" 2>&1 >/dev/null | grep -o '[0-9.]* s in'
    done | sort -n | sed -n 2p | sed "s/^/  every=$every async=$async median: /"
  done
done
rm -rf "$dir"
