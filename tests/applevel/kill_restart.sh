#!/bin/sh
# kill_restart.sh PROGRAM: SIGKILL the checkpointed PROGRAM at pseudo-random instants (alternating sync,
# async and zstd-compressed writing), then let it finish; its output must equal, byte for byte, that of
# an uninterrupted run without checkpoint reading.
set -u
prog=$1
kills=${2:-12}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
REVIVE_CP_PATH=$dir/ref REVIVE_READ_ON_RESTART=0 "$prog" "$dir/ref.out" || { echo "reference run failed"; exit 1; }
seed=12345
i=0
while [ $i -lt $kills ]; do
  seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
  delay_ms=$(( 30 + seed % 150 ))
  case $(( i % 3 )) in
    0) extra="" ;;
    1) extra="REVIVE_WRITE_ASYNC=1" ;;
    2) extra="REVIVE_COMPRESS=1" ;;
  esac
  env $extra REVIVE_CP_PATH="$dir/run" "$prog" "$dir/run.out" 2>>"$dir/err" &
  pid=$!
  sleep "$(awk "BEGIN{print $delay_ms/1000}")"
  kill -9 $pid 2>/dev/null
  wait $pid 2>/dev/null
  i=$((i + 1))
done
REVIVE_CP_PATH="$dir/run" "$prog" "$dir/run.out" 2>>"$dir/err" || { echo "final run failed"; cat "$dir/err"; exit 1; }
restarts=$(grep -c "restarted at iteration" "$dir/err")
echo "killrun: $kills kills, $restarts restarts read a checkpoint"
[ "$restarts" -ge 3 ] || { echo "too few restarts read a checkpoint (program too fast?)"; cat "$dir/err"; exit 1; }
if grep -v "restarted at iteration" "$dir/err" | grep -q .; then echo "unexpected stderr:"; cat "$dir/err"; exit 1; fi
cmp "$dir/ref.out" "$dir/run.out" || { echo "restarted output differs from the uninterrupted run"; exit 1; }
echo "outputs identical"
