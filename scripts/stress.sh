#!/usr/bin/env bash
# stress.sh BUILD_DIR TEST_REGEX [N] [LOAD]: runs the CTest tests matching TEST_REGEX N times (default 200)
# under load (LOAD busy-looping processes, default one per core), stopping at the first failure: the
# crash stage for rare defects such as engine.compress_mt_fork (issue 13). Not part of scripts/test.sh
# (200 runs of a 3 s test are 10 minutes); run it after touching the engine's fork or compression paths:
#   bash scripts/stress.sh build '^engine\.compress_mt_fork$' 200
set -euo pipefail
dir=${1:?build dir}; re=${2:?test regex}; n=${3:-200}; load=${4:-$(nproc)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pids=()
for _ in $(seq "$load"); do (while :; do :; done) & pids+=($!); done
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
start=$(date +%s)
if ctest --test-dir "$dir" -R "$re" --repeat "until-fail:$n" --output-on-failure >"$dir/stress.log" 2>&1; then
  echo "stress.sh: $re passed $n times under $load busy loops in $(( $(date +%s) - start )) s"
else
  echo "stress.sh: $re FAILED under load (see $dir/stress.log):"; tail -40 "$dir/stress.log"; exit 1
fi
