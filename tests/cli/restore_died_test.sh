#!/usr/bin/env bash
# restore_died_test.sh REVIVE REVIVE_RESTART: a restored process whose restorer dies before it is back,
# with no report (killed while it reads its image), must not keep the restart's coordinator waiting.
# Two independent copies (`revive launch -n 2`); revive-restart is wrapped so that copy 1's restorer is
# SIGKILLed before it connects:
#  1. copy 0 cannot be restored (its listener's port is taken) and says so; copy 1 dies 1.5 s later. The
#     coordinator used to stay 30 s for copy 1 (a latecomer of the failed restart), and a retry waited.
#  2. port free, copy 1 killed 1 s in: copy 0 comes back and waits at the restart barrier for copy 1,
#     which never comes; `revive restart` used to wait for ever. It must fail at once, naming copy 1.
#     Again with copy 1 killed at once, before any process came back.
#  3. retried at once without the wrapper: done within the program's remaining run, files identical to
#     an uninterrupted run's.
set -euo pipefail
rv=$(realpath "$1")
rr=$(realpath "$2")
source "$(dirname "$0")/lib.sh"
# A taken port fails the restore only when the restart asks for the program's own ports (otherwise the
# listener moves to a new port: docs/channels.md "A listener's port taken").
export REVIVE_KEEP_PORTS=1
cleanup_patterns=("$tmp/prog.py")
cat >"$tmp/prog.py" <<'PROG'
import os, socket, sys, time
idx = int(os.environ.get("REVIVE_LAUNCH_INDEX", "0"))
if idx == 0:  # copy 0 listens: its restore fails while another program holds the port
    s = socket.socket()
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen()
with open(os.path.join(sys.argv[2], "pid%d" % idx), "w") as f:
    f.write(str(os.getpid()))
out = open(os.path.join(sys.argv[2], "out%d" % idx), "w")
for i in range(40):
    out.write("copy %d line %d\n" % (idx, i))
    out.flush()
    time.sleep(0.1)
PROG
py=$(command -v python3)
mkdir "$tmp/ref" "$tmp/run"
REVIVE_LAUNCH_INDEX=0 "$py" "$tmp/prog.py" "$lport" "$tmp/ref" &
REVIVE_LAUNCH_INDEX=1 "$py" "$tmp/prog.py" "$lport" "$tmp/ref"
wait
export REVIVE_LOCAL_DIRS=
ck=$tmp/ck
"$rv" launch -n 2 --port "$port" --ckpt-dir "$ck" -- "$py" "$tmp/prog.py" "$lport" "$tmp/run" >"$tmp/launch.out" 2>"$tmp/launch.err" &
launcher=$!
for _ in $(seq 100); do [ -s "$tmp/run/out0" ] && [ -s "$tmp/run/out1" ] && break; sleep 0.05; done
sleep 0.5
checkpoint_and_kill "$launcher" "$tmp/prog.py"
# copy 1's image: the manifest's entry with copy 1's pid.
make_kill_wrapper "$(cat "$tmp/run/pid1")"
sleep 0.3
# 1. copy 0 fails (port held), copy 1 dies 1.5 s later without a report.
hold_port
set +e
DIE_AFTER=1.5 REVIVE_RESTART_BIN=$tmp/wrap.sh timeout 60 "$rv" restart --port "$port" "$ck" 2>"$tmp/restart1.err"
rc=$?
set -e
[ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat "$tmp/restart1.err"; fail "restart 1 exited $rc"; }
grep -q "the restart was ended: restore failed: .*cannot listen again on port $lport" "$tmp/restart1.err" ||
  { cat "$tmp/restart1.err" "$ck/coordinator.log"; fail "restart 1 does not say why"; }
release_port
took2s=
# 2. copy 1 dies 1 s in (copy 0 is restored by then and waits for it at the barrier), then at once
#    (before any process came). Timed from the start, so a wait for the previous coordinator counts too.
for die in 1 0; do
  restart_must_end "$die" "process upid [0-9]* (pid [0-9]*) ended by signal 9 before it was restored" "restart 2"
  took2s="$took2s ${took}s"
done
# 3. retried at once: no 30 s wait for a latecomer that cannot come.
start=$(date +%s.%N)
timeout 60 "$rv" restart --port "$port" "$ck" 2>"$tmp/restart3.err" ||
  { tail -20 "$tmp/restart3.err"; tail -20 "$ck/coordinator.log"; fail "restart retried at once"; }
took3=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}")
awk "BEGIN{exit !($took3 < 15)}" || { cat "$tmp/restart3.err"; fail "the retry took $took3 s (waited for the failed restart's coordinator?)"; }
for i in 0 1; do
  cmp "$tmp/ref/out$i" "$tmp/run/out$i" || { diff "$tmp/ref/out$i" "$tmp/run/out$i" | head; fail "out$i differs after restart"; }
done
echo "restore died test passed: a restorer killed before it came back: failed restart ended, the kill alone ended the restart in$took2s, retry done in $took3 s"
