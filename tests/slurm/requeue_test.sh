#!/usr/bin/env bash
# End to end under a real (private) Slurm of two nodes on this host (slurm_env.sh): a batch job of both runs
#   revive run --hosts slurm -n 2 --checkpoint-signal USR1 --requeue -- counter
# (one copy per node, each started there by srun),
# gets Slurm's walltime warning (sent with `scancel --signal=USR1 --batch`, what `--signal=B:USR1@T`
# sends, at a moment the test chooses), checkpoints, requeues itself and exits 75; Slurm starts the script
# again, whose `revive run` restarts from that checkpoint. The job's output must equal an uninterrupted
# run's byte for byte. Then the same once more with a NEW job (a new allocation) on the same --ckpt-dir.
#   requeue_test.sh REVIVE COUNTER WORKDIR
set -u
REVIVE=$1 COUNTER=$2 W=$3
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -z "${SLURM_ENV_DIR:-}" ]; then  # first, our own Slurm; this script again inside it
  rm -rf "$W"
  mkdir -p "$W"
  exec bash "$HERE/slurm_env.sh" "$W/slurm" -- bash "$0" "$@"
fi
STEPS=120 SLEEP_MS=30  # 3.6 s of job; the checkpoint signal comes after ~1 s of it
fail() {
  echo "FAIL: $*" >&2
  for f in "$W"/job*/run.log "$W"/job*/slurm-*.out; do [ -f "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }; done
  tail -n 15 "$SLURM_ENV_DIR/log/slurmctld.log" >&2
  exit 1
}
now() { date +%s.%N; }
since() { awk "BEGIN{printf \"%.1f\", $(now) - $1}"; }
job_state() { scontrol -o show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
job_field() { scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | grep "^$2=" | cut -d= -f2-; }
wait_lines() {  # FILE N TIMEOUT: until FILE has N lines
  local end=$((SECONDS + $3))
  while ((SECONDS < end)); do
    [ "$( { wc -l <"$1"; } 2>/dev/null || echo 0)" -ge "$2" ] && return 0
    case $(job_state "$JOB") in FAILED | COMPLETED | CANCELLED | TIMEOUT | NODE_FAIL) break ;; esac
    sleep 0.05
  done
  fail "$1 has not $2 lines (after up to $3 s) (job state $(job_state "$JOB"))"
}
wait_state() {  # JOB STATE TIMEOUT
  local end=$((SECONDS + $3))
  while ((SECONDS < end)); do
    [ "$(job_state "$1")" = "$2" ] && return 0
    sleep 0.1
  done
  fail "job $1 is $(job_state "$1"), not $2, after $3 s"
}
same() {  # DIR WHAT: both copies' outputs equal the uninterrupted runs'
  local i
  for i in 0 1; do cmp "$W/ref-$i" "$1/out-$i" || fail "$2: copy $i's output differs from the uninterrupted run"; done
}
# The coordinator's port and the two sub-coordinators' (port+1, port+2): all three free, and below the
# kernel's ephemeral range (32768-60999), where another test's outgoing connection took port+1 once.
port=$(python3 -c '
import random, socket
for _ in range(1000):
    p = random.randrange(20000, 32000)
    s = [socket.socket() for _ in range(3)]
    try:
        for k, x in enumerate(s): x.bind(("127.0.0.1", p + k))
    except OSError:
        continue
    finally:
        for x in s: x.close()
    print(p); break')
[ -n "$port" ] || fail "no three free ports in a row"

# The uninterrupted runs, meanwhile: copy i prints STEPS + 7i steps (so a mix-up of copies shows).
"$COUNTER" $STEPS $SLEEP_MS >"$W/ref-0" &
REF=$!
"$COUNTER" $((STEPS + 7)) $SLEEP_MS >"$W/ref-1" &

# The batch script: `exec` so that the batch shell Slurm signals IS revive run. $1 = its directory (where
# it writes out and starts), $2 = extra revive run options.
write_job() {
  mkdir -p "$1" "$1/ckpt"
  cat >"$1/job.sh" <<JOB
#!/bin/bash
echo "\${SLURM_JOB_ID} \${SLURM_RESTART_COUNT:-0} \${SLURM_JOB_NODELIST}" >>"$1/starts"
exec "$REVIVE" run --hosts slurm -n 2 --port $port --ckpt-dir "$1/ckpt" --checkpoint-signal USR1 $2 \\
  -- sh -c 'exec "$COUNTER" \$(($STEPS + 7 * \$REVIVE_LAUNCH_INDEX)) $SLEEP_MS > "$1/out-\$REVIVE_LAUNCH_INDEX"'
JOB
}
submit() { sbatch --parsable -N2 --open-mode=append -D "$1" -o "$1/slurm-%j.out" "${@:2}" "$1/job.sh" || fail "sbatch"; }
warn() {  # JOB DIR: the walltime warning once the job has printed 30 lines
  wait_lines "$2/out-0" 30 20
  before=$(wc -l <"$2/out-0")
  ts=$(now)
  scancel --signal=USR1 --batch "$1" || fail "scancel --signal=USR1 --batch $1"
}

# 1. Requeue: the second start of the script is the same job with SLURM_RESTART_COUNT=1.
write_job "$W/job" --requeue
t0=$(now)
JOB=$(submit "$W/job" --requeue)
warn "$JOB" "$W/job"
end=$((SECONDS + 30))
while ((SECONDS < end)) && [ "$(wc -l <"$W/job/starts")" -lt 2 ]; do sleep 0.1; done
[ "$(wc -l <"$W/job/starts")" -ge 2 ] || fail "job $JOB was not started again: $(scontrol -o show job "$JOB" | tr ' ' '\n' | grep -E '^(JobState|Reason|BeginTime|SubmitTime)=' | tr '\n' ' ')"
requeued_in=$(since "$ts")
wait_state "$JOB" COMPLETED 30
wait
[ "$(sed -n 2p "$W/job/starts" | cut -d' ' -f1,2)" = "$JOB 1" ] || fail "second start: $(sed -n 2p "$W/job/starts")"
grep -q "requeued Slurm job $JOB" "$W/job/ckpt/run.log" || fail "revive run did not requeue the job"
grep -q "launched the job on $SLURM_ENV_NODES" "$W/job/ckpt/run.log" || fail "not launched on both nodes ($SLURM_ENV_NODES)"
grep -q "restarting from generation" "$W/job/ckpt/run.log" || fail "the second run did not restart from the checkpoint"
[ "$(job_field "$JOB" Restarts)" = 1 ] || fail "Restarts=$(job_field "$JOB" Restarts), want 1"
same "$W/job" "the requeued job"
echo "PASS: requeue: warned at line $before of $STEPS, started again after $requeued_in s, output identical" \
  "(job done in $(since "$t0") s)"

# 2. A new allocation: a job that cannot be requeued (sbatch --no-requeue, though revive run asks) stops
# with 75 after its checkpoint, run.log saying why the requeue failed in scontrol's words; the next job
# on the same checkpoint directory continues from it.
write_job "$W/job2" --requeue
t0=$(now)
JOB=$(submit "$W/job2" --no-requeue)
warn "$JOB" "$W/job2"
wait_state "$JOB" FAILED 30
[ "$(job_field "$JOB" ExitCode)" = 75:0 ] || fail "job $JOB ended with $(job_field "$JOB" ExitCode), want 75:0"
grep -q "scontrol requeue $JOB failed (exit status [0-9]*): ." "$W/job2/ckpt/run.log" ||
  fail "run.log does not give scontrol's reason for the refused requeue"
JOB=$(submit "$W/job2" --no-requeue)
wait_state "$JOB" COMPLETED 30
grep -q "restarting from generation" "$W/job2/ckpt/run.log" || fail "the new job did not restart from the checkpoint"
same "$W/job2" "the new allocation"
echo "PASS: new allocation: warned at line $before, requeue refused (reason in run.log), exit 75, the next job continued, output identical" \
  "($(since "$t0") s)"
