#!/usr/bin/env bash
# nm_kill_restart.sh MPIEXEC NM_APP WORKDIR N:M[:ml]...
#   For each N:M: runs nm_app with N ranks, SIGKILLs every rank at a pseudo-random instant after its second
#   checkpoint, restarts it with M ranks to the end; the gathered array and the printed line must equal, byte
#   for byte, those of an uninterrupted run (whose result does not depend on the rank count).
#   N:M:ml: with multi-level storage (each rank a simulated host, L1+L2 every version, L4 every second): the
#   restart must skip the node-local versions and say it reads the global level.
set -uo pipefail
mpiexec=$1; app=$2; work=$3; shift 3
steps=40; every=4
rm -rf "$work"; mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
REVIVE_CP_PATH=$work/ref REVIVE_READ_ON_RESTART=0 "$mpiexec" -n 2 "$app" "$work/ref.bin" $steps $every \
  >"$work/ref.out" 2>"$work/ref.err" || { echo "reference run failed"; cat "$work/ref.err"; exit 1; }
seed=4242
for pair in "$@"; do
  IFS=: read -r n m ml <<<"$pair"
  cp_dir=$work/cp-$n-$m$ml; pids=$work/pids-$n-$m
  rm -rf "$cp_dir" "$pids"; mkdir -p "$pids"
  levels=(); host=()
  if [[ $ml == ml ]]; then
    levels=(REVIVE_LEVELS=L1+L2,L4@2 REVIVE_LOCAL_PATH=$cp_dir-local)
    host=(sh -c 'REVIVE_HOST=h${OMPI_COMM_WORLD_RANK} exec "$@"' sh)
  fi
  env "${levels[@]}" NM_PIDS=$pids REVIVE_CP_PATH=$cp_dir "$mpiexec" -n "$n" "${host[@]}" "$app" "$work/run.bin" \
    $steps $every >/dev/null 2>"$work/kill-$n-$m.err" &
  job=$!
  # After version 2 is complete, at a pseudo-random moment of the next steps (possibly inside a write).
  for _ in $(seq 600); do [[ -e $cp_dir/nmapp/v-2/MANIFEST ]] && break; sleep 0.02; done
  [[ -e $cp_dir/nmapp/v-2/MANIFEST ]] || { echo "$n ranks: no version 2 after 12 s"; cat "$work/kill-$n-$m.err"; exit 1; }
  seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
  sleep "$(awk "BEGIN{print $(( seed % 200 ))/1000}")"
  for f in "$pids"/*; do kill -9 "$(cat "$f")" 2>/dev/null; done
  wait $job 2>/dev/null
  env "${levels[@]}" REVIVE_CP_PATH=$cp_dir "$mpiexec" -n "$m" "${host[@]}" "$app" "$work/run.bin" $steps $every \
    >"$work/run.out" 2>"$work/run.err" || { echo "$n -> $m: restart failed"; cat "$work/run.err"; exit 1; }
  if [[ $ml == ml ]] && ! grep -q "another number of ranks restarts from the global level only" "$work/run.err"; then
    echo "$n -> $m with levels: did not say it skips the node-local levels"; cat "$work/run.err"; exit 1
  fi
  grep -q "started at step 1$" "$work/run.err" && { echo "$n -> $m: the restart read no checkpoint"; cat "$work/run.err"; exit 1; }
  cmp "$work/ref.bin" "$work/run.bin" || { echo "$n -> $m: gathered array differs from the uninterrupted run"; exit 1; }
  cmp "$work/ref.out" "$work/run.out" || { echo "$n -> $m: output differs"; cat "$work/ref.out" "$work/run.out"; exit 1; }
  echo "$n -> $m${ml:+ ($ml)}: $(grep -o 'started at step [0-9]*' "$work/run.err"), output identical"
done
