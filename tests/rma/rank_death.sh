#!/usr/bin/env bash
# rank_death.sh OUTDIR BUILD -- a rank of an RMA program SIGKILLed under Open MPI with
# `--enable-recovery --mca orte_abort_on_non_zero_status 0` (mpirun lets the survivors live): without
# librevive_rma's watcher they wait in the fence/lock/PSCW for good (docs/status.md); with it, within 2 s
# of the kill, the lowest survivor prints one line naming the dead rank(s), the last in-memory checkpoint
# and whether its checksum group could rebuild it, and every survivor exits with status 79, so mpirun
# ends. Cases: a fence code and a lock code losing one rank (rebuildable), the fence code losing two in one
# checksum group (not); a PSCW code, which is logged but never checkpointed (docs/rma.md). With all ranks
# on one host, groups of 2 are {0,2} and {1,3} (storage::FormGroups deals ranks round robin).
# (mpirun itself exits 0 under orte_abort_on_non_zero_status 0, whatever the ranks' statuses: the test
# looks at the line and at the processes.)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/death_common.sh"
now() { date +%s.%N; }

# name|app|args|ranks to kill|regex the line must match
cases=(
  "fence|fft_transpose|--n 16 --iters 2000 --sleep-ms 5|2|revive-rma: rank 2 died \(seen by 3 survivors.*last in-memory checkpoint: checkpoint [1-9][0-9]* .*rebuildable from memory: (yes: checksum group \{0,2\} lost only rank 2, the logs of its accesses since checkpoint [0-9]+ are complete|no: checkpoint [0-9]+ was being taken)"
  "lock|dht|--keyspace 4096 --keys 64 --iters 2000 --lock --sleep-ms 5|1|revive-rma: rank 1 died \(seen by 3 survivors.*rebuildable from memory: (yes: checksum group \{1,3\} lost only rank 1, the logs|no: checkpoint [0-9]+ was being taken)"
  "fence-two|fft_transpose|--n 16 --iters 2000 --sleep-ms 5|1 3|revive-rma: ranks 1, 3 died \(seen by 2 survivors.*rebuildable from memory: no: checksum group \{1,3\} lost ranks 1, 3: its parity rebuilds one member"
  "pscw|stencil|--rows 32 --cols 24 --iters 2000 --pscw --sleep-ms 5|3|revive-rma: rank 3 died \(seen by 3 survivors.*last in-memory checkpoint: none; rebuildable from memory: no: no in-memory checkpoint had been taken yet"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name app args victims want <<<"$c"
  # shellcheck disable=SC2086
  REVIVE_RMA_PRELOAD=$lib REVIVE_RMA_GROUP=2 REVIVE_RMA_INTERVAL=0.2 \
    RMA_LAUNCH_ARGS="--enable-recovery --mca orte_abort_on_non_zero_status 0" \
    bash "$here/run_app.sh" openmpi "$out" "$app" 4 $args >"$tmp/$name.out" 2>"$tmp/$name.err" &
  launcher=$!  # run_app.sh exec's mpirun
  declare -A pid_of=()
  for _ in $(seq 100); do
    for p in $(pgrep -P "$launcher" -x "$app"); do
      r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
      [[ -n $r ]] && pid_of[$r]=$p
    done
    [[ ${#pid_of[@]} -eq 4 ]] && break
    sleep 0.1
  done
  [[ ${#pid_of[@]} -eq 4 ]] || { bad "$name: the 4 ranks did not start"; kill -9 "$launcher"; wait "$launcher"; continue; }
  sleep 1.5  # past the first in-memory checkpoints (the first sync point takes one, then every 0.2 s)
  t0=$(now)
  for v in $victims; do kill -9 "${pid_of[$v]}"; done
  seen=
  while [[ -z $seen ]] && (($(echo "$(now) - $t0 < 10" | bc))); do
    grep -q 'revive-rma: .* died' "$tmp/$name.err" && seen=$(now)
    sleep 0.02
  done
  ended=
  for _ in $(seq 200); do
    kill -0 "$launcher" 2>/dev/null || { ended=1; break; }
    sleep 0.05
  done
  if [[ -z $ended ]]; then
    bad "$name: mpirun still running 10 s after the kill (the survivors hang)"
    kill -9 "$launcher" "${pid_of[@]}" 2>/dev/null
  fi
  wait "$launcher"
  rc=$?
  launcher=
  line=$(grep 'revive-rma: .* died' "$tmp/$name.err")
  if [[ -z $seen ]]; then
    bad "$name: no survivor said that a rank died"
    sed 's/^/    /' "$tmp/$name.err" | tail -8
    continue
  fi
  lat=$(echo "$seen - $t0" | bc)
  (($(echo "$lat < 2" | bc))) || bad "$name: the death was reported $lat s after the kill (want < 2 s)"
  [[ $(wc -l <<<"$line") -eq 1 ]] || bad "$name: want one line, got: $line"
  grep -Eq "$want" <<<"$line" || bad "$name: the line does not say what it must (/$want/): $line"
  grep -q 'exit with status 79' <<<"$line" || bad "$name: the line does not name the exit status: $line"
  for r in 0 1 2 3; do
    kill -0 "${pid_of[$r]}" 2>/dev/null && bad "$name: rank $r (pid ${pid_of[$r]}) still alive after mpirun ended"
  done
  echo "$name: mpirun exit $rc; reported ${lat} s after the kill: $line"
  unset pid_of
done
exit $fail
