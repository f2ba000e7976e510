#!/usr/bin/env bash
# run.sh [BUILD_DIR] [MIB] [REPS] — erasure-code encode/rebuild bandwidth of one redundancy group against
#   memcpy of the same bytes (figures in docs/performance.md). Builds ec_bench if needed.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
mib=${2:-256}
reps=${3:-5}
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j2 --target ec_bench >/dev/null
echo "### ec_bench --mib $mib --reps $reps (machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg))"
"$build/bench/storage/ec_bench" --mib "$mib" --reps "$reps"
