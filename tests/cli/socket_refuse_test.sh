#!/usr/bin/env bash
# socket_refuse_test.sh REVIVE: sockets revive can neither rebuild nor make again never come back as a
# /dev/null stand-in; the checkpoint fails at once instead, naming the process, the fd and the socket,
# publishes nothing, and the program runs on. python3 holds (1) a Unix stream socket bound to a name,
# neither listening nor connected: refused; (2) a netlink socket with a reply it never reads: refused for now,
# taken again by the coordinator, then failed saying how often it was taken. (A connected UDP socket with a
# datagram it never reads was case 2 until revive kept such queues, 2026-11-27: channels.udp_queue.)
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/hold.py")
cat >"$tmp/hold.py" <<'PROG'
import os, socket, struct, sys, time
if sys.argv[2] == "named":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.path.join(sys.argv[1], "named.sock"))
else:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # NETLINK_ROUTE
    s.bind((0, 0))
    # RTM_GETLINK dump (NLM_F_REQUEST | NLM_F_DUMP): its replies are never read.
    s.send(struct.pack("=LHHLL", 32, 18, 0x301, 1, 0) + struct.pack("=BxHiII", 0, 0, 0, 0, 0))
print("fd", s.fileno(), os.getpid(), flush=True)
for i in range(600):
    time.sleep(0.1)
print("done", flush=True)
PROG

# check KIND MESSAGE-REGEX: launch, checkpoint, expect the refusal.
check() {
  local kind=$1 want=$2 ck=$tmp/ck-$1
  "$rv" launch --port "$port" --ckpt-dir "$ck" -- python3 "$tmp/hold.py" "$tmp" "$kind" >"$tmp/out-$kind" 2>"$tmp/launch-$kind.err" &
  local launcher=$!
  for _ in $(seq 100); do grep -q "^fd" "$tmp/out-$kind" 2>/dev/null && break; sleep 0.1; done
  local fd pid
  fd=$(awk '/^fd/ {print $2}' "$tmp/out-$kind")
  pid=$(awk '/^fd/ {print $3}' "$tmp/out-$kind")
  [ -n "$fd" ] || { cat "$tmp/launch-$kind.err"; fail "$kind: the program did not start"; }
  local rc=0
  "$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"$tmp/ck-$kind.out" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || { cat "$tmp/ck-$kind.out"; fail "$kind: the checkpoint succeeded"; }
  grep -Eq "${want//@PID@/$pid}" "$tmp/ck-$kind.out" ||
    { cat "$tmp/ck-$kind.out"; fail "$kind: the failure does not name process $pid, fd $fd and the socket"; }
  grep -q "fd $fd is" "$tmp/ck-$kind.out" || { cat "$tmp/ck-$kind.out"; fail "$kind: not fd $fd"; }
  ! ls "$ck"/ckpt-*/MANIFEST.json >/dev/null 2>&1 || fail "$kind: a generation was published"
  kill -0 "$pid" 2>/dev/null || fail "$kind: the program did not survive the failed checkpoint"
  echo "$kind: $(tail -1 "$tmp/ck-$kind.out")"
  kill -9 "$pid" "$launcher" 2>/dev/null || true
  wait "$launcher" 2>/dev/null || true
  pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
  sleep 0.3
}
check named "checkpoint refused: process @PID@ \(python3[.0-9]*\) fd [0-9]+ is a Unix stream socket bound to a name but neither listening nor connected, which revive cannot restore"
check queued "checkpoint refused for now: process @PID@ \(python3[.0-9]*\) fd [0-9]+ is a netlink raw socket with replies not yet read.*taken [0-9]+ times"
echo "socket refusal test passed"
