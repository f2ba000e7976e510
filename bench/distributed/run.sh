#!/bin/bash
# Distributed C/R benchmark: bench/distributed/run.sh [BUILD_DIR] [extra bench.py args, e.g. --sizes 2:64]
# Prints a Markdown table (medians of --reps runs) for docs/performance.md ("Distributed").
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$HERE/../../build-hosts}" && pwd)
shift || true
cmake --build "$B" -j2 --target revive_cmd revive_inject revive-restart dist_memhog >/dev/null
exec python3 "$HERE/bench.py" --revive "$B/src/cli/revive" --inject "$B/src/inject/librevive_inject.so" \
  --restart "$B/src/restart/revive-restart" --memhog "$B/bench/distributed/dist_memhog" "$@"
