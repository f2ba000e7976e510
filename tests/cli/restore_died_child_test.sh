#!/usr/bin/env bash
# restore_died_child_test.sh REVIVE REVIVE_RESTART: a process *below* a root of a restored tree whose
# restorer dies before it is back, with no report. Its restorer is not `revive restart`'s child (its
# parent, restored, is the program): nothing used to tell the coordinator, and the parent, back, waited at
# the restart barrier for ever. A python3 parent forks a worker; both write a line every 0.1 s; the
# parent waits for the worker. revive-restart is wrapped so that the worker's restorer is SIGKILLed
# 1 s in (the parent is back and waits at the barrier) and then at once (none is back yet):
#  1. each restart must fail within 15 s, naming the worker's upid and pid;
#  2. retried at once without the wrapper: both files identical to an uninterrupted run's.
set -euo pipefail
rv=$(realpath "$1")
rr=$(realpath "$2")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/prog.py")
cat >"$tmp/prog.py" <<'PROG'
import os, sys, time
def work(name, n):
    out = open(os.path.join(sys.argv[1], name), "w")
    for i in range(n):
        out.write("%s line %d\n" % (name, i))
        out.flush()
        time.sleep(0.1)
pid = os.fork()
if pid == 0:
    with open(os.path.join(sys.argv[1], "workerpid"), "w") as f:
        f.write(str(os.getpid()))
    work("worker", 50)
    os._exit(0)
work("parent", 30)
_, st = os.waitpid(pid, 0)
print("worker exit", st, flush=True)
PROG
py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3)  # not a pyenv shim: its bash and env would be restored too
mkdir "$tmp/ref" "$tmp/run"
"$py" "$tmp/prog.py" "$tmp/ref" >"$tmp/ref/stdout"
export REVIVE_LOCAL_DIRS=
ck=$tmp/ck
"$rv" launch --port "$port" --ckpt-dir "$ck" -- "$py" "$tmp/prog.py" "$tmp/run" >"$tmp/run/stdout" 2>"$tmp/launch.err" &
launcher=$!
for _ in $(seq 100); do [ -s "$tmp/run/worker" ] && [ -s "$tmp/run/workerpid" ] && break; sleep 0.05; done
sleep 0.5
checkpoint_and_kill "$launcher" "$tmp/prog.py"
make_kill_wrapper "$(cat "$tmp/run/workerpid")"
took_all=
for die in 1 0; do
  restart_must_end "$die" "process upid $kupid (pid [0-9]*) ended .*before it was restored" "restart (worker)"
  took_all="$took_all ${took}s"
  # Nothing of the failed restart may stay: its programs would write beside the retry's.
  for _ in $(seq 100); do pgrep -f "$tmp/prog.py" >/dev/null || break; sleep 0.05; done
  ! pgrep -f "$tmp/prog.py" >/dev/null || { ps -ef | grep -v grep | grep "$tmp/prog.py"; fail "a process of the failed restart stayed"; }
done
start=$(date +%s.%N)
timeout 60 "$rv" restart --port "$port" "$ck" >>"$tmp/run/stdout" 2>"$tmp/restart3.err" ||
  { tail -20 "$tmp/restart3.err"; tail -20 "$ck/coordinator.log"; fail "restart retried at once"; }
t3=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}")
for f in parent worker stdout; do
  cmp "$tmp/ref/$f" "$tmp/run/$f" || { diff "$tmp/ref/$f" "$tmp/run/$f" | head; fail "$f differs after restart"; }
done
echo "restore died child test passed: a tree's worker killed before it came back ended the restart in$took_all, retry done in $t3 s, files identical"
