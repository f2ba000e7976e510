#!/usr/bin/env bash
# udp_pair_port_taken_test.sh REVIVE: a connected UDP pair inside the computation whose server end's port
# another program took between the kill and the restart (chan_dgram_name.cpp rebind_datagram). A python3
# server's socket is bound to 127.0.0.1:$lport and connected to its forked client's (127.0.0.1:$lport+2),
# which sends 40 requests on its connected socket (each sent again after 0.3 s without an answer).
# Checkpointed, killed; another program binds $lport (the holder, counting datagrams); restarted: the
# server's socket binds a new port, saying so, and the client is connected to it there (its peer's
# published address); checkpointed again and killed while the holder keeps the port, restarted again.
# Both logs must equal an uninterrupted run's, and the holder must have had no datagram of the computation.
# The restart used to fail with "cannot bind its name again".
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/prog.py" "$tmp/holder.py")
cat >"$tmp/prog.py" <<'PROG'
import os, socket, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
from udpserve import serve
port, d = int(sys.argv[1]), sys.argv[2]
srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
srv.bind(("127.0.0.1", port))
cli = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
cli.bind(("127.0.0.1", port + 2))
srv.connect(("127.0.0.1", port + 2))
cli.connect(("127.0.0.1", port))
pid = os.fork()
if pid == 0:
    srv.close()
    cli.settimeout(0.3)
    log = open(os.path.join(d, "client"), "w")
    for i in range(40):
        answer = None
        while answer is None:
            try:
                cli.send(b"%d" % i)
                while answer is None:
                    data = cli.recv(64).split()
                    if int(data[0]) == i:
                        answer = data[1]
            except (socket.timeout, ConnectionRefusedError):
                pass
        log.write("%d -> %s\n" % (i, answer.decode()))
        log.flush()
        time.sleep(0.1)
    for _ in range(20):
        try:
            cli.send(b"end")
        except ConnectionRefusedError:
            pass
        time.sleep(0.05)
    os._exit(0)
cli.close()
def reply(b, _):
    try:
        srv.send(b)
    except ConnectionRefusedError:  # the client has ended
        pass
log = serve(lambda: (srv.recv(64), None), reply, d)
os.waitpid(pid, 0)
log.write("done\n")
PROG
udp_holder
udp_server
py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3)
held_port_restarts "datagram(s)" \
  "UDP port $lport is taken by another program; bound to port [0-9]* instead (its peer in the computation connects to it there)" \
  "UDP port $lport is still taken by another program; bound to port [0-9]* again (its peer in the computation connects to it there)" \
  "$tmp/prog.py"
echo "UDP pair port taken test passed: port $lport held by another program at both restarts; the server's socket moved ($(grep -o 'bound to port [0-9]*' "$tmp/launch.err" | tr '\n' ' ')), its client followed, logs identical"
