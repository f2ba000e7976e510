#!/usr/bin/env bash
# lone_restart_test.sh REVIVE INJECT RESTART WORKDIR -- connections and pipes between processes of a
# computation when one image is restarted alone (`revive-restart IMAGE`, no coordinator: its peers are not
# coming back). They come back widowed (the other end closed: writes fail with EPIPE, reads see end of
# file) with a warning, like a connection to a peer outside the computation, never as a /dev/null
# stand-in (a socket call on it fails ENOTSOCK; a pipe write would vanish as if read). A FIFO writer whose
# reader does not come back (within 2 s) is widowed too: its writes fail with EPIPE.
# Then a standalone checkpoint (no coordinator, the checkpoint signal) of a process holding a socket revive
# cannot restore fails at once naming process, fd and socket, and the program runs on (before, a standalone
# checkpoint never refused a socket: it came back as /dev/null).
. "$(dirname "$0")/lone_common.sh" "$@"
fail() { echo "FAIL: $*"; for f in launch.err out.txt restart.err lone.out lone.err; do echo "--- $f"; tail -5 "$f" 2>/dev/null; done; exit 1; }
cat > pair.py <<'PY'
# The parent pings its child over a socketpair and reports over a pipe and a FIFO; the child echoes and
# drains the pipe and the FIFO.
import errno, os, socket, sys, time
a, b = socket.socketpair()
r, w = os.pipe()
os.mkfifo("fifo")
pid = os.fork()
if pid == 0:
    a.close()
    os.close(w)
    fr = os.open("fifo", os.O_RDONLY)
    while True:
        d = b.recv(4)
        if not d:
            os._exit(0)
        b.sendall(d)
        os.read(r, 4)
        os.read(fr, 4)
b.close()
os.close(r)
fw = os.open("fifo", os.O_WRONLY)
print("pid", os.getpid(), flush=True)
n = 0
def ping():
    try:
        a.sendall(b"ping")
        return None if a.recv(4) else "end of file"
    except OSError as e:
        return errno.errorcode[e.errno]
while True:
    sock = ping()
    if sock:
        print("socket: %s" % sock, flush=True)
        break
    n += 1
    try:
        os.write(w, b"note")
        os.write(fw, b"note")
    except OSError:
        # The checkpoint came between the ping and these writes: restored alone, the pipe or the FIFO
        # failed first. The socket is asked again; the writes are tried again below.
        print("socket: %s" % (ping() or "answered"), flush=True)
        break
    if n == 1:
        print("ping ok", flush=True)
    time.sleep(0.05)
try:
    os.write(w, b"note")
    print("pipe: written", flush=True)
except OSError as e:
    print("pipe: %s" % errno.errorcode[e.errno], flush=True)
try:
    os.write(fw, b"note")
    print("fifo: written", flush=True)
except OSError as e:
    print("fifo: %s" % errno.errorcode[e.errno], flush=True)
PY
touch restart.err  # before the checkpoint: the restart moves aside files made after it
"$revive" launch --port "$cport" --ckpt-dir "$work/ck" -- python3 "$work/pair.py" > out.txt 2> launch.err &
pids+=($!)
for _ in $(seq 100); do grep -q 'ping ok' out.txt 2>/dev/null && break; sleep 0.05; done
parent=$(awk '/^pid/ {print $2}' out.txt)
[ -n "$parent" ] || fail "the program did not start"
"$revive" checkpoint --port "$cport" --ckpt-dir "$work/ck" > ck.out 2> ck.err || fail "checkpoint failed: $(cat ck.err)"
child=$(ps -o pid= --ppid "$parent" | head -1)
kill -9 "$parent" $child
wait "${pids[0]}"
# The parent's image alone (the child's would put out.txt back as it was at the checkpoint, too).
img=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print([p["image"] for p in m["processes"] if p["pid"]==int(sys.argv[2])][0])' ck/ckpt-1/MANIFEST.json "$parent") ||
  fail "no image of process $parent in the manifest"
timeout 30 "$restart_bin" "ck/ckpt-1/$img" >> restart.err 2>&1 || fail "revive-restart $img failed"
for _ in $(seq 200); do grep -q '^fifo:' out.txt 2>/dev/null && break; sleep 0.05; done  # restored in the background
grep -q '^socket: EPIPE$' out.txt || fail "the restored parent's socket is not widowed (want 'socket: EPIPE')"
grep -q '^pipe: EPIPE$' out.txt || fail "the restored parent's pipe is not widowed (want 'pipe: EPIPE')"
grep -q '^fifo: EPIPE$' out.txt || fail "the restored parent's FIFO is not widowed (want 'fifo: EPIPE')"
grep -q 'cannot be rebuilt without a coordinator' out.txt restart.err launch.err ||
  fail "no warning that the connection cannot be rebuilt"
echo "restored alone: $(grep -E '^(socket|pipe|fifo):' out.txt | tr '\n' ' ')"

# A standalone checkpoint refuses a socket it cannot restore.
cat > hold.py <<'PY'
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(os.path.join(sys.argv[1], "named.sock"))
print("fd", s.fileno(), os.getpid(), flush=True)
time.sleep(2)
print("done", flush=True)
PY
standalone_refused lone \
  "checkpoint refused: process {pid} (python3[.0-9]*) fd {fd} is a Unix stream socket bound to a name but neither listening nor connected" \
  hold.py "$work"
echo "lone restart test passed"
