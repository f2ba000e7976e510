#!/usr/bin/env bash
# pty_lone_test.sh REVIVE INJECT RESTART WORKDIR -- a pseudo-terminal pair split between two processes of
# a computation (the parent holds the master, its child the slave at fd > 2), checkpointed under
# `revive launch`, killed, and each image restarted alone (`revive-restart IMAGE`, no coordinator).
# The parent's master comes back widowed: a new pair whose slave was opened and closed, so its read fails
# with EIO (before: a fresh master of an unrelated pair, whose read blocked for ever). The child's slave
# comes back widowed too: a new pair whose master is closed, so its write fails with EIO (before: the path
# /dev/pts/N reopened, gone with the killed pair, so a /dev/null stand-in swallowed every write). Each
# restart warns naming the fd and the kind, and the output is exactly as expected. Then a standalone
# checkpoint of a process whose pty master revive cannot rebuild is refused, naming process and fd.
. "$(dirname "$0")/lone_common.sh" "$@"
fail() { echo "FAIL: $*"; for f in launch.err out.txt restart-*.err; do echo "--- $f"; tail -5 "$f" 2>/dev/null; done; exit 1; }
cat > pty.py <<'PY'
# The child writes a line through the slave every 50 ms; the parent reads the master.
import errno, os, sys, time
m, s = os.openpty()
pid = os.fork()
if pid == 0:
    os.close(m)
    while True:
        try:
            os.write(s, b"tick\n")
        except OSError as e:
            print("slave: %s" % errno.errorcode[e.errno], flush=True)
            os._exit(0)
        time.sleep(0.05)
os.close(s)
print("pid", os.getpid(), pid, flush=True)
said = False
while True:
    try:
        d = os.read(m, 100)
    except OSError as e:
        print("master: %s" % errno.errorcode[e.errno], flush=True)
        break
    if not d:
        print("master: end of file", flush=True)
        break
    if not said:
        print("master: got output", flush=True)
        said = True
PY
touch restart-parent.err restart-child.err  # before the checkpoint: a restart moves aside files made after it
"$revive" launch --port "$cport" --ckpt-dir "$work/ck" -- python3 "$work/pty.py" > out.txt 2> launch.err &
pids+=($!)
for _ in $(seq 100); do grep -q 'master: got output' out.txt 2>/dev/null && break; sleep 0.05; done
read -r _ parent child < out.txt
[ -n "${child:-}" ] || fail "the program did not start"
pids+=("$parent" "$child")
"$revive" checkpoint --port "$cport" --ckpt-dir "$work/ck" > ck.out 2> ck.err || fail "checkpoint failed: $(cat ck.err)"
kill -9 "$parent" "$child"
wait "${pids[0]}"
image_of() {
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print([p["image"] for p in m["processes"] if p["pid"]==int(sys.argv[2])][0])' \
    ck/ckpt-1/MANIFEST.json "$1" || fail "no image of process $1 in the manifest"
}
# restore WHO PID LINE: restarts PID's image alone and waits (10 s) for LINE, the program's last.
restore() {
  local img; img=$(image_of "$2")
  timeout 20 "$restart_bin" "ck/ckpt-1/$img" >> "restart-$1.err" 2>&1 || fail "revive-restart of the $1 failed"
  for _ in $(seq 200); do grep -q "^$3\$" out.txt 2>/dev/null && break; sleep 0.05; done
  printf 'pid %s %s\nmaster: got output\n%s\n' "$parent" "$child" "$3" > want.txt
  cmp -s out.txt want.txt || fail "the $1 restored alone printed $(tr '\n' '|' < out.txt), want $(tr '\n' '|' < want.txt)"
  grep -q "pseudo-terminal $4.*cannot be rebuilt without a coordinator" "restart-$1.err" launch.err ||
    fail "no warning that the $1's pseudo-terminal $4 cannot be rebuilt"
  echo "$1 restored alone: $3"
}
restore parent "$parent" "master: EIO" master
kill -9 "$parent" 2>/dev/null
restore child "$child" "slave: EIO" slave

# A standalone checkpoint refuses a pty master it cannot rebuild (here: the plugin's table of channels is
# full of pipe ends before it), naming process and fd, rather than let it come back as a fresh master.
cat > full.py <<'PY'
import os, time
ps = [os.pipe() for _ in range(130)]
m, s = os.openpty()
print("fd", m, os.getpid(), flush=True)
time.sleep(2)
print("done", flush=True)
PY
standalone_refused full "checkpoint refused: process {pid} fd {fd} is a pseudo-terminal master that revive cannot rebuild" full.py
echo "pty lone test passed"
