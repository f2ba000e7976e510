#!/usr/bin/env bash
# udp_port_taken_test.sh REVIVE: a restored bound UDP socket whose port another program took between the
# kill and the restart (chan_dgram_name.cpp rebind_datagram, chan_portmap.cpp). A python3 server answers
# on UDP port $lport (bound to every address); its forked client sends each of 40 requests with sendto to
# 127.0.0.1:$lport and, as a resolver does, takes an answer only from that address and port (every other
# request made by a python3 program it execs, which starts without revive's table). Checkpointed, killed;
# another program binds the port (the holder, answering "HOLDER" and counting datagrams); restarted: the
# restart must go on, saying where the socket is bound instead; checkpointed again and killed while the
# holder still has the port, restarted again. Both logs must equal an uninterrupted run's byte for byte,
# and the holder must have had no datagram of the computation. The restart used to fail with "cannot bind
# its name again".
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/prog.py" "$tmp/holder.py")
cat >"$tmp/ask.py" <<'ASK'
import socket, sys
def ask(port, i):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.3)
    for _ in range(40):
        s.sendto(b"%d" % i, ("127.0.0.1", port))
        try:
            while True:
                data, src = s.recvfrom(64)
                if src != ("127.0.0.1", port):
                    return b"answer from %s:%d" % (src[0].encode(), src[1])
                if data.split()[0] == b"%d" % i:
                    return data.split()[1]
        except socket.timeout:
            continue
    return b"no answer"
if __name__ == "__main__":
    sys.stdout.write(ask(int(sys.argv[1]), int(sys.argv[2])).decode())
ASK
cat >"$tmp/prog.py" <<'PROG'
import os, socket, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
from ask import ask
from udpserve import serve
port, d = int(sys.argv[1]), sys.argv[2]
srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
srv.bind(("0.0.0.0", port))
pid = os.fork()
if pid == 0:
    srv.close()
    log = open(os.path.join(d, "client"), "w")
    for i in range(40):
        if i % 2:  # a program exec'd for the request (after a restart it starts without revive's table)
            reply = subprocess.run([sys.executable, os.path.join(os.path.dirname(sys.argv[0]), "ask.py"), str(port), str(i)],
                                   stdout=subprocess.PIPE, check=True).stdout
        else:
            reply = ask(port, i)
        log.write("%d -> %s\n" % (i, reply.decode()))
        log.flush()
        time.sleep(0.1)
    for _ in range(20):
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"end", ("127.0.0.1", port))
        time.sleep(0.05)
    os._exit(0)
log = serve(lambda: srv.recvfrom(64), srv.sendto, d)
os.waitpid(pid, 0)
log.write("done\n")
PROG
udp_holder
udp_server
py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3)
held_port_restarts "datagram(s)" \
  "UDP port $lport is taken by another program; bound to port [0-9]* instead" \
  "UDP port $lport is still taken by another program; bound to port [0-9]* again" \
  "$tmp/prog.py" "$tmp/ask.py"
echo "UDP port taken test passed: port $lport held by another program at both restarts; the socket moved ($(grep -o 'bound to port [0-9]*' "$tmp/launch.err" | tr '\n' ' ')), the datagrams followed, logs identical"
