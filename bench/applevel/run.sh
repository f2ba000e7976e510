#!/usr/bin/env bash
# run.sh [BUILD_DIR] [CKPT_DIR] — runs every application-level benchmark (figures in docs/performance.md).
#   Builds applevel_bench, lanczos_mpi and heat2d if needed; CKPT_DIR defaults to /tmp/revive-bench (the
#   disk being measured: put it where checkpoints would go).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-mpi}
dir=${2:-/tmp/revive-bench}
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j2 --target applevel_bench lanczos lanczos_mpi mpi_write_bench nm_read_bench >/dev/null
mkdir -p "$dir"
echo "### applevel_bench --dir $dir --sizes-mib 64,1024 --reps 5 (machine: $(nproc) cores, $(uname -r))"
"$build/bench/applevel/applevel_bench" --dir "$dir" --sizes-mib 64,1024 --reps 5 \
  --lanczos-n 1000 --lanczos-iters 800 --every 200
echo "### MPI Lanczos 1000x1000, 200 iterations, 2 ranks: wall time of the iteration loop, median of 3"
# With more runnable threads than cores (2 ranks + writer threads + whatever else runs), Open MPI's busy
# polling in collectives starves the writer thread; yielding when idle is the setting for this case.
echo "    (mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi_median() {  # every async -> prints the median loop time, or says which run failed
  local t times=()
  for r in 1 2 3; do
    t=$(mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 "$build/examples/lanczos/lanczos_mpi" --nx 1000 --ny 1000 --iters 200 \
          --every "$1" --async "$2" --fresh --dir "$dir/mpi" 2>&1 >/dev/null | sed -n 's/^lanczos: \([0-9.]*\) s in.*/\1/p')
    [[ -n $t ]] || { echo "run $r failed"; return; }
    times+=("$t")
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n 2p
}
echo "### MPI checkpoint write: file per rank vs one shared file (MPI-IO) vs raw write+fsync"
for shape in "2 64" "4 64" "2 256"; do
  set -- $shape
  mpirun -n "$1" --oversubscribe --mca mpi_yield_when_idle 1 "$build/bench/applevel/mpi_write_bench" \
    --dir "$dir" --mib "$2" --reps 5
done
echo "### Restart read with another number of ranks (N -> M) vs N -> N vs raw pread of the same blocks"
for shape in "4 4,2,3" "2 2,3,4"; do
  set -- $shape
  mpirun -n 4 --oversubscribe --mca mpi_yield_when_idle 1 "$build/bench/applevel/nm_read_bench" \
    --dir "$dir" --writers "$1" --readers "$2" --mib 64 --reps 5
done
base=$(mpi_median 0 off)
echo "  no checkpoints:          $base s"
for async in off copy; do
  t=$(mpi_median 50 "$async")
  echo "  every 50, async=$async: $t s  overhead $(awk -v a="$t" -v b="$base" 'BEGIN{printf "%+.2f%%", 100*(a-b)/b}')"
done
rm -rf "$dir"
