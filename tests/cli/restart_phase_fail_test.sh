#!/usr/bin/env bash
# restart_phase_fail_test.sh REVIVE: a restart whose reconnect or refill phase fails in a restored process
# (a channel it cannot rebuild: a backlog client whose listener cannot be reached) ends the restart,
# naming the reason: every restored process ends, `revive restart` exits non-zero within seconds saying
# "the restart was ended: ... phase P of the restart: ...". Before 2026-11-29 the restored processes were
# resumed regardless on a half-made channel and `revive restart` said nothing (hosts.migrate_reconnect:
# an empty answer read, then a hang). The failure is injected (REVIVE_TEST_FAIL_PHASE=P in the restart's
# environment), once for each phase; then the same checkpoint restarts and the output equals an
# uninterrupted run's.
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/prog.py")
cat >"$tmp/prog.py" <<'PROG'
import os, socket, sys, time
a, b = socket.socketpair()  # parent and child talk over it: the chan plugin rebuilds it at restart
if os.fork() == 0:
    b.close()
    for i in range(40):
        a.sendall(b"%d\n" % i)
        time.sleep(0.1)
    os._exit(0)
a.close()
f = b.makefile("rb")
for line in f:
    print("child says", int(line), flush=True)
os.wait()
PROG
py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3)
"$py" "$tmp/prog.py" >"$tmp/ref.out"
ck=$tmp/ck
"$rv" launch --port "$port" --ckpt-dir "$ck" -- "$py" "$tmp/prog.py" >"$tmp/run.out" 2>"$tmp/launch.err" &
launcher=$!
for _ in $(seq 100); do [ "$(wc -l <"$tmp/run.out")" -ge 8 ] && break; sleep 0.05; done
checkpoint_and_kill "$launcher" "$tmp/prog.py"
for phase in reconnect refill; do
  start=$(date +%s.%N)
  set +e
  REVIVE_TEST_FAIL_PHASE=$phase timeout 30 "$rv" restart --port "$port" "$ck" >>"$tmp/run.out" 2>"$tmp/$phase.err"
  rc=$?
  set -e
  took=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}")
  [ "$rc" != 124 ] || { cat "$tmp/$phase.err"; fail "$phase: revive restart waited for ever (30 s timeout)"; }
  [ "$rc" != 0 ] || { cat "$tmp/$phase.err"; fail "$phase: revive restart succeeded although phase $phase failed"; }
  awk "BEGIN{exit !($took < 15)}" || { cat "$tmp/$phase.err"; fail "$phase: the failed restart took $took s"; }
  grep -q "the restart was ended: .*phase $phase of the restart: .*REVIVE_TEST_FAIL_PHASE" "$tmp/$phase.err" ||
    { cat "$tmp/$phase.err"; fail "$phase: revive restart does not say why (exit $rc)"; }
  sleep 0.5
  ! pgrep -f "$tmp/prog.py" >/dev/null || { ps -ef | grep "[p]rog.py"; fail "$phase: restored processes left running"; }
  echo "$phase: the restart ended in $took s (exit $rc): $(grep -o 'the restart was ended: .*' "$tmp/$phase.err" | head -1)"
done
timeout 60 "$rv" restart --port "$port" "$ck" >>"$tmp/run.out" 2>"$tmp/restart.err" ||
  { cat "$tmp/restart.err"; fail "restart without the injected failure"; }
cmp "$tmp/ref.out" "$tmp/run.out" || { diff "$tmp/ref.out" "$tmp/run.out" | head; fail "output differs after the restart"; }
echo "restart phase failure test passed"
