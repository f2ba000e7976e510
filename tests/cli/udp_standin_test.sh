#!/usr/bin/env bash
# udp_standin_test.sh REVIVE: datagrams queued at the checkpoint whose sender is a program outside the
# computation that still holds its address (bound without SO_REUSEADDR) when the restart queues them
# again: the restart must send them from a stand-in socket of its own (chan_udp.cpp), and the program's
# recvfrom must still report the sender's address for them. A python3 receiver (the computation) reads 40
# datagrams an outside python3 sender sent in one burst, one every 0.1 s, printing for each whether it
# came from the sender's address; checkpointed after a few, killed, restarted while the sender lives on.
# Output identical to an uninterrupted run's. Before 2026-11-29 the restored receiver saw the rest "from"
# the stand-in's address.
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/recv.py" "$tmp/send.py")
cat >"$tmp/recv.py" <<'RECV'
import socket, sys, time
port, sender, n, ready = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", port))
open(ready, "w").write("ready\n")
for i in range(n):
    data, src = s.recvfrom(64)
    who = "the sender" if src == ("127.0.0.1", sender) else "elsewhere (%s:%d)" % src
    print("datagram %s from %s" % (data.decode(), who), flush=True)
    time.sleep(0.1)
RECV
cat >"$tmp/send.py" <<'SEND'
import socket, sys, time
port, to, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", port))  # no SO_REUSEADDR: the address is this program's alone
for i in range(n):
    s.sendto(b"%d" % i, ("127.0.0.1", to))
print("sent", flush=True)
time.sleep(120)  # holds the address while the receiver is killed and restarted
SEND
py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3)
wait_file() { for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.05; done; fail "no $1"; }
# Reference: receiver on lport+1, sender on lport+3.
"$py" "$tmp/recv.py" "$((lport + 1))" "$((lport + 3))" 40 "$tmp/ref.ready" >"$tmp/ref.out" &
r=$!
wait_file "$tmp/ref.ready"
"$py" "$tmp/send.py" "$((lport + 3))" "$((lport + 1))" 40 >"$tmp/ref.sent" &
wait "$r"
pkill -f "$tmp/send.py" || true
[ "$(grep -c 'from the sender' "$tmp/ref.out")" = 40 ] || { cat "$tmp/ref.out"; fail "reference run"; }
# Under revive: receiver on lport, sender on lport+2.
ck=$tmp/ck
"$rv" launch --port "$port" --ckpt-dir "$ck" -- "$py" "$tmp/recv.py" "$lport" "$((lport + 2))" 40 "$tmp/run.ready" \
  >"$tmp/run.out" 2>"$tmp/launch.err" &
launcher=$!
wait_file "$tmp/run.ready"
"$py" "$tmp/send.py" "$((lport + 2))" "$lport" 40 >"$tmp/run.sent" &
wait_file "$tmp/run.sent"
wait_lines "$tmp/run.out" 5
"$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"$tmp/ck.out" 2>&1 || { cat "$tmp/ck.out" "$tmp/launch.err"; fail "checkpoint"; }
kill -9 "$launcher" 2>/dev/null || true
pkill -9 -f "$tmp/recv.py" || true
wait "$launcher" 2>/dev/null || true
pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
pgrep -f "$tmp/send.py" >/dev/null || fail "the sender is gone: nothing holds its address"
timeout 60 "$rv" restart --port "$port" "$ck" >>"$tmp/run.out" 2>"$tmp/restart.err" ||
  { tail "$tmp/restart.err"; fail "restart"; }
grep -q "queued again from another address" "$tmp/launch.err" ||
  { cat "$tmp/launch.err"; fail "the sender's address could be bound: nothing tested (no stand-in)"; }
cmp "$tmp/ref.out" "$tmp/run.out" || { diff "$tmp/ref.out" "$tmp/run.out" | head; fail "output differs from an uninterrupted run"; }
echo "UDP stand-in test passed: $(grep -o '[0-9]* of its [0-9]* queued datagrams' "$tmp/launch.err") came from a stand-in, all reported from the sender"
