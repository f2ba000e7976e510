#!/usr/bin/env bash
# port_taken_test.sh REVIVE: a restored TCP listener whose port another program took between the kill and
# the restart (chan_portmap.cpp). A python3 server listens on port $lport and forks a client that opens a
# new connection to 127.0.0.1:$lport for every request (60 requests, 0.1 s apart; every other one made by
# a python3 program it execs for it, which starts without revive's table); both log what they saw.
# Checkpointed, killed; another program takes the port (the holder: listening on it, answering "HOLDER" and
# counting its connections); restarted: the restart must go on (saying which port it listens on instead), checkpointed again
# and killed while the holder still has the port, restarted again. Both logs must equal an uninterrupted
# run's byte for byte, and the holder must have had no connection of the computation. The restart used to
# fail with "cannot listen again on port".
# ADDR=<IPv6 address of an interface> (cli.port_taken_v6, in a network namespace of its own): the server,
# the client and the holder use that address instead of 127.0.0.1 (before 2026-11-29 only ::1 and :: were
# known as this host's IPv6 addresses: the connects went to the holder).
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/prog.py" "$tmp/holder.py")
export ADDR=${ADDR:-127.0.0.1}
cat >"$tmp/ask.py" <<'ASK'
import os, socket, sys
def line(c):
    """One line from connection c (without its newline; b"" at end of file)."""
    got = b""
    while not got.endswith(b"\n"):
        more = c.recv(64)
        if not more:
            break
        got += more
    return got.strip()
def ask(port, i):
    c = socket.create_connection((os.environ["ADDR"], port))
    c.sendall(b"%d\n" % i)
    reply = line(c)
    c.close()
    return reply
if __name__ == "__main__":
    sys.stdout.write(ask(int(sys.argv[1]), int(sys.argv[2])).decode())
ASK
cat >"$tmp/prog.py" <<'PROG'
import os, socket, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
from ask import ask, line
port, d = int(sys.argv[1]), sys.argv[2]
v6 = ":" in os.environ["ADDR"]
srv = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET)
# As most servers do: else the connections it closed before the checkpoint sit in TIME_WAIT without the
# option and keep the holder below from binding the port (the restored listener then moves for them).
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("::" if v6 else "0.0.0.0", port))
srv.listen(16)
pid = os.fork()
if pid == 0:
    srv.close()
    log = open(os.path.join(d, "client"), "w")
    for i in range(60):
        if i % 2:  # a program exec'd for the request (after a restart it starts without revive's table)
            reply = subprocess.run([sys.executable, os.path.join(os.path.dirname(sys.argv[0]), "ask.py"), str(port), str(i)],
                                   stdout=subprocess.PIPE, check=True).stdout
        else:
            reply = ask(port, i)
        log.write("%d -> %s\n" % (i, reply.decode()))
        log.flush()
        time.sleep(0.1)
    c = socket.create_connection((os.environ["ADDR"], port))
    c.sendall(b"end\n")
    c.close()
    os._exit(0)
log = open(os.path.join(d, "server"), "w")
total = 0
while True:
    conn, _ = srv.accept()
    data = line(conn)
    if data == b"end":
        break
    n = int(data)
    total += n
    conn.sendall(b"%d\n" % (n * n))
    conn.close()
    log.write("request %d, total %d\n" % (n, total))
    log.flush()
os.waitpid(pid, 0)
log.write("done\n")
PROG
cat >"$tmp/holder.py" <<'HOLD'
import os, socket, sys
s = socket.socket(socket.AF_INET6 if ":" in os.environ["ADDR"] else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((os.environ["ADDR"], int(sys.argv[1])))
s.listen(16)
print("held", flush=True)
n = 0
while True:
    c, _ = s.accept()
    n += 1
    open(sys.argv[2], "w").write("%d\n" % n)
    c.sendall(b"HOLDER\n")
    c.close()
HOLD
py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3)  # not a pyenv shim: its bash and env would be restored too
held_port_restarts "connection(s)" \
  "port $lport is taken by another program; listening on port [0-9]* instead" \
  "port $lport is still taken by another program; listening on port [0-9]* again" \
  "$tmp/prog.py"
echo "port taken test passed: port $lport held by another program at both restarts; the listener moved ($(grep -o 'listening on port [0-9]*' "$tmp/launch.err" | tr '\n' ' ')), the client's connects followed, logs identical"
