#!/usr/bin/env bash
# restore_fail_test.sh REVIVE: a restored process that cannot be restored (here: its TCP listener's port
# is taken by another program at restart) says why, tells the restart's coordinator, which ends the other
# process of the restart (its parent, parked until every process is back), and `revive restart` ends at once with a non-zero status and that message -- it used to wait forever, because the engine's
# report to the coordinator held a newline, which the wire format refuses. Once the port is free again,
# the same checkpoint restarts at once (no wait for the failed restart's coordinator) and the output
# equals an uninterrupted run's.
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
# A taken port fails the restore only when the restart asks for the program's own ports (otherwise the
# listener moves to a new port: docs/channels.md "A listener's port taken").
export REVIVE_KEEP_PORTS=1
cleanup_patterns=("$tmp/prog.py")
cat >"$tmp/prog.py" <<'PROG'
import os, socket, sys, time
child = os.fork()  # the listener is the child's; the parent (the root of the restart) waits for it
if child == 0:
    s = socket.socket()
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen()
    for i in range(50):
        print("line", i, flush=True)
        time.sleep(0.1)
    os._exit(0)
os.waitpid(child, 0)
PROG
py=$(command -v python3)
"$py" "$tmp/prog.py" "$lport" >"$tmp/ref.out"
export REVIVE_LOCAL_DIRS=
ck=$tmp/ck
"$rv" launch --port "$port" --ckpt-dir "$ck" -- "$py" "$tmp/prog.py" "$lport" >"$tmp/run.out" 2>"$tmp/launch.err" &
launcher=$!
for _ in $(seq 100); do [ -s "$tmp/run.out" ] && break; sleep 0.05; done
sleep 0.5
checkpoint_and_kill "$launcher" "$tmp/prog.py"
sleep 0.3
# Another program takes the listener's port.
hold_port
start=$(date +%s.%N)
set +e
timeout 30 "$rv" restart --port "$port" "$ck" >>"$tmp/run.out" 2>"$tmp/restart1.err"
rc=$?
set -e
took=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}")
[ "$rc" != 124 ] || { cat "$tmp/restart1.err"; fail "revive restart still waited after the restore failed (30 s)"; }
[ "$rc" != 0 ] || fail "revive restart succeeded although the port was taken"
# revive restart says why, where the user looks (the restored process's own message went to its stderr:
# the launch's file, which the other process's restore may cut back to its checkpoint size meanwhile).
grep -q "revive restart: the restart was ended: restore failed: .*cannot listen again on port $lport" "$tmp/restart1.err" ||
  { cat "$tmp/restart1.err" "$ck/coordinator.log"; fail "revive restart does not say why (exit $rc after $took s)"; }
release_port
# Retried at once, as a user would: the failed restart's coordinator must not take the retry's processes
# for its latecomers (it told them to exit, and the retry failed, for its 30 s grace), nor make it wait
# that long. The program's remaining lines take at most 5 s.
start=$(date +%s.%N)
timeout 60 "$rv" restart --port "$port" "$ck" >>"$tmp/run.out" 2>"$tmp/restart2.err" ||
  { tail -20 "$tmp/restart2.err"; tail -20 "$ck/coordinator.log"; fail "restart retried at once with the port free"; }
took2=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}")
awk "BEGIN{exit !($took2 < 15)}" || { cat "$tmp/restart2.err"; fail "the retry took $took2 s (waited for the failed restart's coordinator?)"; }
cmp "$tmp/ref.out" "$tmp/run.out" || { diff "$tmp/ref.out" "$tmp/run.out" | head; fail "output differs after restart"; }
echo "restore failure test passed: the failed restart ended in $took s (exit $rc) naming port $lport; retried at once, done in $took2 s"
