#!/usr/bin/env bash
# Transparent C/R benchmarks. Usage: bench/transparent/run.sh [BUILD_DIR] [extra bench.py args, e.g. --sizes 256]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build-eng}
shift || true
cmake --build "$build" -j2 --target revive_inject revive-restart bench_transparent_prog >/dev/null
python3 "$here/bench.py" --build "$build" --dir "$build/bench/transparent/work" "$@"
