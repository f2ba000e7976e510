#!/bin/sh
# Usage: bench/proctree/run.sh BUILD_DIR [N] [ROUNDS]
# fork()+_exit+waitpid per fork: native (the limit) vs under `revive launch` (child says HELLO to the
# coordinator and starts its checkpoint thread before fork returns). Medians of ROUNDS rounds of N forks.
set -e
B=${1:?build dir}; N=${2:-50}; R=${3:-7}
prog=$B/bench/proctree/proctree_fork_bench
ck=$(mktemp -d); port=$((20000 + $$ % 20000))
native=$($prog "$N" "$R")
revived=$(REVIVE_INJECT_LIB=$B/src/inject/librevive_inject.so REVIVE_LOG=0 \
  "$B/src/cli/revive" launch --port "$port" --ckpt-dir "$ck" -- "$prog" "$N" "$R")
rm -rf "$ck"
echo "fork+exit+waitpid: native ${native} us, under revive ${revived} us, ratio $(echo "$revived / $native" | bc -l | cut -c1-5)"
