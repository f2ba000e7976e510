#!/usr/bin/env bash
# demo.sh — the 1-minute story of revive's application-level checkpoints:
#   installs what is missing (scripts/deps.sh), builds (scripts/build.sh), runs the Lanczos eigensolver
#   once uninterrupted, runs it again and SIGKILLs it at a random moment, restarts it from its last
#   checkpoint, and shows that both runs print exactly the same eigenvalues (cmp). Exits non-zero on a
#   mismatch.   Usage: bash scripts/demo.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
say() { printf '\n== %s\n' "$*"; }

say "Installing missing dependencies (scripts/deps.sh)"
bash scripts/deps.sh
say "Building into $build (scripts/build.sh)"
bash scripts/build.sh "$build"
bin=$build/examples/lanczos/lanczos
[[ -x $bin ]] || { echo "demo: $bin was not built"; exit 1; }

work=$(mktemp -d /tmp/revive-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
args=(--nx 600 --ny 600 --iters 500 --nev 4)
now_ms() { date +%s%3N; }

say "Run 1: Lanczos, ${args[*]}, uninterrupted, no checkpoints"
t0=$(now_ms)
"$bin" "${args[@]}" --every 0 --fresh --dir "$work/none" >"$work/ref.out"
native=$(( $(now_ms) - t0 ))
cat "$work/ref.out"
echo "(took $native ms)"

say "Run 2: same problem, a checkpoint every 25 iterations (async), SIGKILLed at a random moment"
delay=$(( native * (30 + RANDOM % 50) / 100 ))
"$bin" "${args[@]}" --every 25 --async copy --dir "$work/ckpt" >"$work/killed.out" 2>"$work/killed.err" &
pid=$!
sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
kill -KILL "$pid" 2>/dev/null || true
{ wait "$pid"; } 2>/dev/null && echo "(it finished before the kill; the restart below will just re-read its last checkpoint)" ||
  echo "kill -9 after $delay ms: the process died without a chance to clean up."
echo "Checkpoint versions on disk:"
for v in $(ls -dv "$work"/ckpt/lanczos/v-* 2>/dev/null); do
  [[ -d $v ]] || continue
  if [[ -f $v/MANIFEST ]]; then
    echo "  $(basename "$v"): complete (MANIFEST published), iteration $(sed -n 's/^iteration=//p' "$v/MANIFEST")"
  else
    echo "  $(basename "$v"): incomplete (the kill hit while it was being written; restart ignores it)"
  fi
done

say "Run 3: the same command again; it finds the newest complete checkpoint and continues from there"
"$bin" "${args[@]}" --every 25 --async copy --dir "$work/ckpt" >"$work/restarted.out" 2>"$work/restarted.err"
grep 'restarted after' "$work/restarted.err" || echo "(no checkpoint was complete at the kill: it started over)"
cat "$work/restarted.out"

say "Comparing run 1 and run 3 byte for byte"
if cmp "$work/ref.out" "$work/restarted.out"; then
  echo "IDENTICAL: the killed-and-restarted run printed exactly the eigenvalues of the uninterrupted run."
else
  echo "MISMATCH: the restarted run differs from the uninterrupted run."
  diff "$work/ref.out" "$work/restarted.out" || true
  exit 1
fi
