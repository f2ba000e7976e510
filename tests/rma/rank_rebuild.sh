#!/usr/bin/env bash
# rank_rebuild.sh OUTDIR BUILD -- when a rank of an RMA program dies (Open MPI, `--enable-recovery --mca
# orte_abort_on_non_zero_status 0`), the survivors of its checksum group rebuild its checkpointed windows
# from their copies and parity parts over the failure mesh, without MPI (src/rma/rank_rebuild.h), and the
# lowest of them checks the result against the XXH3-64 the dead rank recorded. Cases:
#  - a death inside a checkpoint, on demand (REVIVE_RMA_TEST_DIE=rank:ckpt:phase, a hook for tests):
#    phase 0, after the dying rank wrote its new copy and before the parity exchange (before double
#    buffering this made the rebuild impossible: the copies were already overwritten); phase 1, after the
#    exchange and before the checkpoint's last barrier; for a fence code and a lock code. The dying rank
#    leaves its complete generations in REVIVE_RMA_REBUILD_DIR first, and the rebuilt images the
#    survivors write there must equal them byte for byte;
#  - a random rank SIGKILLed at a random moment (checkpoints every 0.05 s, so some kills land in one);
#  - a damaged parity part (REVIVE_RMA_VERIFY_FLIP): the rebuild must be refused, by name;
#  - a program with 11 windows (apps/many_wins.c), killed inside a checkpoint (every one of its windows is
#    rebuilt and equals the dying rank's copy; the rebuild once stopped at the first 8) and at random.
# Every case also checks how many windows were rebuilt (one line each): all the program has.
# With all ranks on one host, groups of 2 are {0,2} and {1,3} (storage::FormGroups deals ranks round robin).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/death_common.sh"

fft="fft_transpose --n 16 --iters 2000 --sleep-ms 5"
dht="dht --keyspace 4096 --keys 64 --iters 2000 --lock --sleep-ms 5"
many="many_wins --wins 11 --iters 2000 --sleep-ms 5"
# name|app and args|extra environment|victim (random: any rank, SIGKILLed from here)|regex every rebuild line must match|compare with dumps|windows (rebuild lines expected)
cases=(
  "fence-in-ckpt-0|$fft|REVIVE_RMA_TEST_DIE=2:4:0|2|rebuilt rank 2's window [0-9]+ as of checkpoint 3 .*from checksum group \{0,2\} .*verified|cmp|1"
  "fence-in-ckpt-1|$fft|REVIVE_RMA_TEST_DIE=2:4:1|2|rebuilt rank 2's window [0-9]+ as of checkpoint [34] .*from checksum group \{0,2\} .*verified|cmp|1"
  "lock-in-ckpt-0|$dht|REVIVE_RMA_TEST_DIE=1:3:0|1|rebuilt rank 1's window [0-9]+ as of checkpoint 2 .*from checksum group \{1,3\} .*verified|cmp|1"
  "many-wins-in-ckpt-0|$many|REVIVE_RMA_TEST_DIE=1:3:0|1|rebuilt rank 1's window [0-9]+ as of checkpoint 2 .*from checksum group \{1,3\} .*verified|cmp|11"
  "fence-random|$fft||random|rebuilt rank [0-3]'s window [0-9]+ as of checkpoint [1-9][0-9]* .*verified||1"
  "lock-random|$dht||random|rebuilt rank [0-3]'s window [0-9]+ as of checkpoint [1-9][0-9]* .*verified||1"
  "many-wins-random|$many||random|rebuilt rank [0-3]'s window [0-9]+ as of checkpoint [1-9][0-9]* .*verified||11"
  "damaged|$fft|REVIVE_RMA_TEST_DIE=2:3:0 REVIVE_RMA_VERIFY_FLIP=0|2|refused the rebuild of rank 2's window [0-9]+ as of checkpoint 2 from checksum group \{0,2\}: the rebuilt copy's XXH3-64 [0-9a-f]+ is not the [0-9a-f]+ rank 2 recorded||1"
)
for c in "${cases[@]}"; do
 # A case whose MPI job failed on its own (Open MPI 4.1's osc/ucx with passive-target locks sometimes
 # aborts with MPI_ERRORS_ARE_FATAL before any rank died, natively too: CI of 2026-11-29) is made once more.
 for attempt in 1 2; do
  IFS='|' read -r name cmd envs victim want compare nwins <<<"$c"
  dir=$tmp/$name
  rm -rf "$dir"
  mkdir -p "$dir"
  read -r app args <<<"$cmd"
  # shellcheck disable=SC2086
  env $envs REVIVE_RMA_PRELOAD=$lib REVIVE_RMA_GROUP=2 REVIVE_RMA_INTERVAL=0.05 REVIVE_RMA_REBUILD_DIR="$dir" \
    RMA_LAUNCH_ARGS="--enable-recovery --mca orte_abort_on_non_zero_status 0" \
    bash "$here/run_app.sh" openmpi "$out" "$app" 4 $args >"$dir/out" 2>"$dir/err" &
  launcher=$!  # run_app.sh exec's mpirun
  if [[ $victim == random ]]; then
    victim=$((RANDOM % 4))
    pid=
    for _ in $(seq 100); do
      for p in $(pgrep -P "$launcher" -x "$app"); do
        [[ $(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p') == "$victim" ]] && pid=$p
      done
      [[ -n $pid ]] && break
      sleep 0.1
    done
    [[ -n $pid ]] || { bad "$name: rank $victim did not start"; kill -9 "$launcher"; wait "$launcher"; launcher=; continue 2; }
    # A random moment 0.8-1.8 s after the rank started (the first in-memory checkpoint is at the first
    # sync point, within a few hundredths of a second).
    sleep 0.8
    sleep "0.$(printf '%03d' $((RANDOM % 1000)))"
    kill -9 "$pid"
    name="$name(rank $victim)"
  fi
  ended=
  for _ in $(seq 300); do
    kill -0 "$launcher" 2>/dev/null || { ended=1; break; }
    sleep 0.05
  done
  [[ -n $ended ]] || { bad "$name: mpirun still running 15 s after the start"; kill -9 "$launcher"; }
  wait "$launcher"
  launcher=
  lines=$(grep -E "revive-rma: (rebuilt|refused|cannot rebuild)" "$dir/err")
  if [[ -z $lines && $attempt == 1 ]] && grep -q "MPI_ERRORS_ARE_FATAL" "$dir/err"; then
    echo "note: $name: the MPI job failed on its own before any rebuild, made once more:"
    grep -m3 "MPI_ERR\|An error occurred" "$dir/err" | sed 's/^/    /'
    continue
  fi
  break
 done
  if [[ -z $lines ]]; then
    bad "$name: no rebuild line"
    sed 's/^/    /' "$dir/err" | tail -8
    continue
  fi
  while IFS= read -r l; do
    grep -Eq "$want" <<<"$l" || bad "$name: /$want/ does not match: $l"
  done <<<"$lines"
  # One line per window, each window once: every window the program had, none twice.
  got=$(grep -Eo "rank [0-9]+'s window [0-9]+" <<<"$lines" | sort -u | wc -l)
  (($(wc -l <<<"$lines") == nwins && got == nwins)) ||
    bad "$name: $(wc -l <<<"$lines") rebuild line(s) for $got distinct window(s), the program had $nwins"
  if [[ -n $compare ]]; then
    n=0
    for img in "$dir"/rank*.win*.ckpt[0-9]*; do
      [[ $img == *.dump ]] && continue
      [[ -f $img.dump ]] || { bad "$name: $(basename "$img") rebuilt, the dying rank left no such generation"; continue; }
      cmp -s "$img" "$img.dump" || bad "$name: $(basename "$img") differs from the dead rank's own copy"
      n=$((n + 1))
    done
    ((n == nwins)) || bad "$name: $n rebuilt image(s) written, the program had $nwins window(s)"
    echo "$name: $n rebuilt image(s) equal to the dead rank's copies"
  fi
  echo "$name: $lines"
done
exit $fail
