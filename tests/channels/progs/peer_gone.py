"""A parent with a socketpair to each of two children (tests/channels/peer_gone_test.sh).
Child A sends 5000 bytes the parent does not read yet, says so in A.sent, and sleeps: the test's engine
hook kills it when a checkpoint's write phase begins (a process killed in the middle of a checkpoint).
Child B streams numbered lines that the parent checks as they come, before, during and after the checkpoint.
Once the file `go` exists the parent reads A's socket to its end, reaps A and waits for B to finish.
A dies PEER_GONE_DELAY_MS ms into the write phase (default 0): with a delay its peer's drain marker is
in its queue when it dies, so the peer reads a reset (made by revive's own marker: the program must
still see end of file). Usage: peer_gone.py [A FD | B FD LINES]"""
import os, signal, socket, subprocess, sys, threading, time

def pattern(n):
    return bytes((i * 7 + 3) % 251 for i in range(n))

if len(sys.argv) > 1 and sys.argv[1] == "A":
    s = socket.socket(fileno=int(sys.argv[2]))
    s.sendall(pattern(5000))
    open("A.sent", "w").close()
    time.sleep(600)
    sys.exit(1)
if len(sys.argv) > 1 and sys.argv[1] == "B":
    s = socket.socket(fileno=int(sys.argv[2]))
    for i in range(int(sys.argv[3])):
        s.sendall(b"%d\n" % i)
        time.sleep(0.004)
    s.close()
    sys.exit(0)

lines = 2500
pa, ca = socket.socketpair()
pb, cb = socket.socketpair()
a = subprocess.Popen([sys.executable, __file__, "A", str(ca.fileno())], pass_fds=[ca.fileno()],
                     env=dict(os.environ, REVIVE_TEST_DIE_IN_WRITE=str(1 + int(os.environ.get("PEER_GONE_DELAY_MS", "0")))))
b = subprocess.Popen([sys.executable, __file__, "B", str(cb.fileno()), str(lines)], pass_fds=[cb.fileno()])
ca.close()
cb.close()
got_b = []

def read_all(s):
    buf = b""
    while True:
        d = s.recv(65536)
        if not d:
            return buf
        buf += d

def read_b():
    got_b.extend(read_all(pb).split(b"\n")[:-1])

t = threading.Thread(target=read_b)
t.start()
while not os.path.exists("A.sent"):
    time.sleep(0.01)
print("ready", flush=True)
while not os.path.exists("go"):
    time.sleep(0.01)
data = read_all(pa)
print("A: %d bytes, %s, then end of file" % (len(data), "as sent" if data == pattern(5000) else "NOT as sent"))
status = a.wait()
print("A: ended by signal %d" % -status if status < 0 else "A: exited %d" % status, flush=True)
t.join()
ok = got_b == [b"%d" % i for i in range(lines)]
print("B: %d lines, %s" % (len(got_b), "in order" if ok else "NOT in order"))
print("B: exited %d" % b.wait())
print("done")
