#!/usr/bin/env bash
# outside_writer_test.sh REVIVE HOLDER SCRIBBLE: memory that changes while the image is written. HOLDER maps
# a memfd shared with SCRIBBLE, a static program (outside the computation, never stopped by a checkpoint)
# that overwrites it without pause. The checkpoint writes that region raw (random words do not compress)
# while it changes. Before 2026-11-29 the file then held other bytes than the chunk's checksum described:
# `revive inspect` said "checksum mismatch" and the image could never be restored (seen in CI as a rare
# mpi_cr.rank_dies failure). Now: every checksum verifies, and the restart finishes the run with the
# uninterrupted run's output.
set -euo pipefail
rv=$(realpath "$1")
holder=$(realpath "$2")
scribble=$(realpath "$3")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("^$holder" "^$scribble")  # anchored: this script's own command line names both
export REVIVE_LOCAL_DIRS=
ck=$tmp/ck
"$holder" "$scribble" 40 >"$tmp/ref.out"
pkill -9 -f "^$scribble" || true
(cd "$tmp" && exec "$rv" launch --port "$port" --ckpt-dir "$ck" -- "$holder" "$scribble" 40) >"$tmp/out" 2>"$tmp/launch.err" &
launcher=$!
for _ in $(seq 100); do [ "$(wc -l <"$tmp/out")" -ge 8 ] && break; sleep 0.05; done
checkpoint_and_kill "$launcher" "^$holder"
pkill -9 -f "^$scribble" || true
gen=$(ls -d "$ck"/ckpt-* | sort -V | tail -1)
for img in "$gen"/*.rimg; do
  "$rv" inspect "$img" >"$tmp/inspect.out" 2>&1 || { grep -E "checksums" "$tmp/inspect.out"; fail "revive inspect $img: not whole"; }
  grep -q "^checksums  ok" "$tmp/inspect.out" || { grep checksums "$tmp/inspect.out"; fail "$img: checksums not ok"; }
done
grep -q "memfd" "$tmp/inspect.out" || fail "the image holds no memfd region (the scenario did not happen)"
(cd "$tmp" && timeout 60 "$rv" restart --port "$port" "$ck") >"$tmp/restart.out" 2>"$tmp/restart.err" ||
  { tail -5 "$tmp/restart.err"; fail "restart"; }
cmp "$tmp/ref.out" "$tmp/out" || { diff "$tmp/ref.out" "$tmp/out" | head; fail "output differs after the restart"; }
echo "outside writer test passed: the region another program kept writing was saved whole (checksums ok), restarted, output identical"
