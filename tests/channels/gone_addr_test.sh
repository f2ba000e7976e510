#!/usr/bin/env bash
# gone_addr_test.sh REVIVE INJECT RESTART WORKDIR -- a TCP listener bound to an address of this host that
# is gone at restart (an interface removed, as another job's bridge; or a restart on another host): the
# chan plugin listens on the same port of every address instead, with a warning, and the restored
# program accepts a connection there. Root (adds 10.123.45.1/32 to lo for the run).
set -uo pipefail
revive=$1 inject=$2 restart_bin=$3 work=$4
addr=10.123.45.1
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
export REVIVE_INJECT_LIB=$inject REVIVE_RESTART_BIN=$restart_bin REVIVE_LOCAL_DIRS=
fail() { echo "FAIL: $*"; for f in launch.err restart.err out.txt; do echo "--- $f"; tail -5 "$f" 2>/dev/null; done; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port) cport=$(free_port)
ip addr add "$addr/32" dev lo || fail "cannot add $addr to lo (root needed)"
trap 'ip addr del "$addr/32" dev lo 2>/dev/null; pkill -KILL -f "gone_addr_srv.py $port\$" 2>/dev/null' EXIT
cat > gone_addr_srv.py <<'PY'
import socket, sys, time
port = int(sys.argv[1])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.123.45.1", port))
s.listen(5)
for i in range(40):
    print("tick", i, flush=True)
    time.sleep(0.1)
s.settimeout(20)
c, _ = s.accept()
print("accepted:", c.recv(16).decode(), flush=True)
PY
setsid "$revive" launch --port "$cport" --ckpt-dir "$work/ck" -- python3 "$work/gone_addr_srv.py" "$port" > out.txt 2> launch.err &
for _ in $(seq 100); do grep -q 'tick 5' out.txt 2>/dev/null && break; sleep 0.05; done
"$revive" checkpoint --port "$cport" --ckpt-dir "$work/ck" > ck.out 2> ck.err || fail "checkpoint failed: $(cat ck.err)"
pkill -KILL -f "gone_addr_srv.py $port\$"
pkill -KILL -f "revive launch --port $cport " 
sleep 0.3
ip addr del "$addr/32" dev lo || fail "cannot remove $addr"
setsid "$revive" restart --port "$cport" "$work/ck" >> out.txt 2> restart.err &
rpid=$!
for _ in $(seq 200); do grep -q 'tick 39' out.txt 2>/dev/null && break; sleep 0.05; done
python3 -c "import socket,sys; c=socket.create_connection(('127.0.0.1', $port), timeout=5); c.sendall(b'hello')" ||
  fail "no listener on port $port after the restart"
wait "$rpid" || fail "revive restart exited $?"
python3 -c 'print("\n".join("tick %d" % i for i in range(40))); print("accepted: hello")' > ref.txt
cmp -s ref.txt out.txt || fail "output differs from an uninterrupted run"
grep -q "the address it listened on is gone; listening on port $port of every address instead" launch.err ||
  fail "no warning naming the port"
echo "OK: the listener came back on port $port of every address; output identical"
