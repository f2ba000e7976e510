#!/usr/bin/env bash
# run.sh [BUILD_DIR] [bench.py options] — multi-level storage (issue 9): application overhead of L4-only,
#   L1+L3 and L1+L3,L4@5 checkpoints and restart time per level, against raw disk/tmpfs I/O of the same
#   bytes (figures in docs/performance.md). Builds ml_app if needed; the global level goes to
#   BUILD_DIR/bench-tmp (the disk), node-local storage to /dev/shm. --pfs-mbps N (root): the global level
#   on a loop-mounted ext4 throttled to N MB/s instead, a stand-in for a parallel file system's share.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
shift || true
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j2 --target ml_app >/dev/null
mpiexec=$(command -v mpiexec)
exec python3 bench/multilevel/bench.py "$build/tests/multilevel/ml_app" "$mpiexec" "$build/bench-tmp/multilevel" "$@"
