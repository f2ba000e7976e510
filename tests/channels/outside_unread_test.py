#!/usr/bin/env python3
"""Bytes a peer outside the computation sent and the program had not read at the checkpoint
(docs/channels.md, "Connections to peers outside the computation"). A python3 program connects to a
server that is not part of the computation, which sends ~100 KB and closes; the program reads nothing
until a file appears. Checkpointed while it waits:
  - not killed: the program then reads every byte and the end of file (the save only peeked them);
  - killed and restarted (the server long gone): the restored program reads the same bytes, then the end
    of file, as it would have without the checkpoint. Before 2026-11-29 it read an end of file at once:
    the bytes were lost (seen as a lost answer when a server wrote it and closed just before a checkpoint,
    tests/hosts' request pair).
Both outputs must equal an uninterrupted run's, byte for byte."""
import argparse, os, shutil, socket, subprocess, sys, threading, time

PROG = r"""
import hashlib, os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print("connected", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
print("read %d bytes, sha256 %s, then end of file" % (len(data), hashlib.sha256(data).hexdigest()), flush=True)
"""

PAYLOAD = b"".join(b"line %06d of what the outside server said\n" % i for i in range(2400))  # ~100 KB

def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)

def serve_once(lsock, sent):
    conn, _ = lsock.accept()
    conn.sendall(PAYLOAD)  # the program reads nothing yet: its receive queue holds it all
    conn.close()
    sent.set()

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def run_case(a, name, kill, env):
    d = os.path.join(a.workdir, name)
    os.makedirs(d)
    ck, go, out = os.path.join(d, "ck"), os.path.join(d, "go"), os.path.join(d, "stdout")
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    sent = threading.Event()
    threading.Thread(target=serve_once, args=(lsock, sent), daemon=True).start()
    cport = free_port()
    argv = [sys.executable, "-c", PROG, str(lsock.getsockname()[1]), go]
    with open(out, "wb") as f:
        if not a.revive:
            p = subprocess.Popen(argv, stdout=f, stdin=subprocess.DEVNULL)
        else:
            p = subprocess.Popen([a.revive, "launch", "--port", str(cport), "--ckpt-dir", ck, "--"] + argv,
                                 stdout=f, stdin=subprocess.DEVNULL, env=env)
    if not sent.wait(30):
        fail("%s: the server could not send its bytes" % name)
    lsock.close()
    time.sleep(0.3)  # the server's end of file is there too
    if a.revive:
        r = subprocess.run([a.revive, "checkpoint", "--port", str(cport), "--ckpt-dir", ck], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        if r.returncode != 0:
            fail("%s: checkpoint failed: %s" % (name, r.stderr))
    if kill:
        p.kill()
        p.wait()
        deadline = time.time() + 10
        while subprocess.run([a.revive, "status", "--port", str(cport), "--ckpt-dir", ck], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL).returncode == 0:
            if time.time() > deadline:
                fail("%s: the coordinator of the killed run is still there" % name)
            time.sleep(0.1)
        rp = subprocess.Popen([a.revive, "restart", "--port", str(cport), ck], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env)
        time.sleep(0.5)
        open(go, "w").close()
        o, e = rp.communicate(timeout=60)
        if rp.returncode != 0:
            fail("%s: restart exited %d: %s" % (name, rp.returncode, e.decode()))
    else:
        open(go, "w").close()
        if p.wait(timeout=60) != 0:
            fail("%s: the program exited %d" % (name, p.returncode))
    return open(out, "rb").read()

def main():
    ap = argparse.ArgumentParser()
    for k in ("revive", "inject", "restart", "workdir"):
        ap.add_argument("--" + k, required=True)
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    env = dict(os.environ, REVIVE_INJECT_LIB=a.inject, REVIVE_RESTART_BIN=a.restart, REVIVE_LOG="0")
    for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD"):
        env.pop(k, None)
    revive = a.revive
    a.revive = None
    ref = run_case(a, "ref", False, env)
    a.revive = revive
    if not ref.endswith(b"then end of file\n") or b"read %d bytes" % len(PAYLOAD) not in ref:
        fail("reference run: %r" % ref)
    for name, kill in (("checkpointed", False), ("restarted", True)):
        got = run_case(a, name, kill, env)
        if got != ref:
            fail("%s: output differs from an uninterrupted run:\n%s\nwant:\n%s" % (name, got.decode(), ref.decode()))
        print("%s: identical (%s)" % (name, got.decode().splitlines()[-1]), flush=True)
    print("PASS", flush=True)

if __name__ == "__main__":
    main()
