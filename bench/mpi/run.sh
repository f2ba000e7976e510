#!/bin/bash
# MPI C/R benchmark (issue 7): bench/mpi/run.sh [BUILD_DIR] [bench.py args, e.g. --mpi openmpi --reps 3]
# Prints Markdown rows for docs/performance.md ("MPI"). Root (drops the page cache for cold restarts).
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$HERE/../../build}" && pwd)
shift || true
cmake --build "$B" -j2 --target revive_cmd revive_inject revive-restart >/dev/null
export REVIVE_INJECT_LIB="$B/src/inject/librevive_inject.so" REVIVE_RESTART_BIN="$B/src/restart/revive-restart"
exec python3 "$HERE/bench.py" --revive "$B/src/cli/revive" "$@"
