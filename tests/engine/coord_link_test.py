#!/usr/bin/env python3
"""The engine's coordinator link against a scripted coordinator (wire protocol of docs/contracts.md):
  full   - suspend/drain/write/resume, SIGKILL, restart: HELLO restart=1 with our upid, reconnect/refill/
           resume, then identical output and exit code
  lost   - the coordinator vanishes while the program is suspended: the program must go on and finish
           with identical output (no hang)"""
import argparse, hashlib, hmac, os, shutil, socket, struct, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cr_driver

def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)

def frame(t, fields, seq=0):
    body = "".join("%s=%s\n" % kv for kv in fields.items()).encode()
    return b"RVP1" + struct.pack("<HHII", t, 0, len(body), seq) + body

def recv_frame(conn):
    def exact(n):
        b = b""
        while len(b) < n:
            c = conn.recv(n - len(b))
            if not c:
                fail("engine closed the connection")
            b += c
        return b
    h = exact(16)
    if h[:4] != b"RVP1":
        fail("bad magic from engine")
    t, _, n, seq = struct.unpack("<HHII", h[4:])
    kv = dict(l.split("=", 1) for l in exact(n).decode().splitlines())
    return t, kv, seq

def single_threaded(pid, when):
    try:
        n = len(os.listdir("/proc/%d/task" % pid))
    except OSError:
        fail("program gone (%s)" % when)
    if n != 1:
        fail("the single-threaded program has %d threads (%s)" % (n, when))

class Coord:
    def __init__(self, secret, ckdir):
        self.secret, self.ckdir = secret, ckdir
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(4)
        self.srv.settimeout(30)
        self.port = self.srv.getsockname()[1]

    def accept(self, restart, upid):
        conn, _ = self.srv.accept()
        conn.settimeout(30)
        nonce = os.urandom(32)
        conn.sendall(frame(2, {"nonce": nonce.hex()}))
        t, kv, _ = recv_frame(conn)
        if t != 1:
            fail("expected HELLO, got type %d" % t)
        want = hmac.new(self.secret, nonce, hashlib.sha256).hexdigest()
        if kv.get("proof", "").lower() != want:
            fail("HELLO proof is wrong")
        if kv.get("role") != "proc" or kv.get("restart") != ("1" if restart else "0"):
            fail("HELLO fields %r" % kv)
        if restart and kv.get("upid") != str(upid):
            fail("restarted process sent upid %r, expected %d" % (kv.get("upid"), upid))
        conn.sendall(frame(3, {"upid": str(upid), "ckpt_dir": self.ckdir, "generation": "0", "compress": "0",
                               "fork": "0", "interval": "0"}))
        return conn

    kv = {}  # PUBLISH/LOOKUP as the real coordinator serves them to plugins (docs/protocol.md)

    @classmethod
    def phase(cls, conn, name, gen, d, seq):
        conn.sendall(frame(20, {"name": name, "generation": str(gen), "dir": d}, seq))
        while True:
            t, kv, rseq = recv_frame(conn)
            if t == 30:  # PUBLISH: no reply
                cls.kv[kv["key"]] = kv.get("value", "")
            elif t == 31:  # LOOKUP, never waiting here: wait=1 is answered at once as well
                k = kv["key"]
                if kv.get("next") == "1":
                    pre = kv.get("prefix", "")
                    later = sorted(x for x in cls.kv if x > k and x.startswith(pre))
                    k = later[0] if later else ""
                elif kv.get("count") == "1":
                    n = sum(1 for x in cls.kv if x.startswith(k))
                    conn.sendall(frame(32, {"key": k, "value": str(n), "found": "1"}, rseq))
                    continue
                found = k in cls.kv
                conn.sendall(frame(32, {"key": k, "value": cls.kv.get(k, ""), "found": "1" if found else "0"}, rseq))
            else:
                break
        if t != 21 or kv.get("name") != name or rseq != seq:
            fail("bad reply to PHASE %s: type %d %r seq %d" % (name, t, kv, rseq))
        if kv.get("ok") != "1":
            fail("PHASE %s failed: %s" % (name, kv.get("error")))
        return kv

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inject", required=True)
    ap.add_argument("--restart", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--scenario", choices=["full", "lost"], required=True)
    ap.add_argument("prog", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    prog = a.prog[1:] if a.prog and a.prog[0] == "--" else a.prog
    ref, run, ck, ref_rc = cr_driver.prepare(a.workdir, prog, 60)
    secret = os.urandom(32)
    sfile = os.path.join(a.workdir, "secret")
    with open(sfile, "wb") as f:
        f.write(secret)
    os.chmod(sfile, 0o600)
    coord = Coord(secret, ck)
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(a.inject), REVIVE_CKPT_DIR=ck, REVIVE_COORD_HOST="127.0.0.1",
               REVIVE_COORD_PORT=str(coord.port), REVIVE_SECRET_FILE=sfile, REVIVE_LOG="1")
    out = open(os.path.join(run, "stdout"), "wb")
    err = open(os.path.join(a.workdir, "stderr-run"), "wb")
    proc = subprocess.Popen(prog, cwd=run, stdout=out, stderr=err, env=env)
    conn = coord.accept(False, 7)
    time.sleep(0.5)
    # The engine has no thread of its own between checkpoints (src/inject/init.cpp): the single-threaded
    # program must still be single-threaded for the kernel while connected.
    single_threaded(proc.pid, "connected to its coordinator")
    gdir = os.path.join(ck, "ckpt-1")
    os.makedirs(gdir)
    Coord.phase(conn, "suspend", 1, gdir, 1)
    if a.scenario == "lost":
        conn.close()  # gone while the program is suspended
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("program hung after the coordinator was lost")
    else:
        Coord.phase(conn, "drain", 1, gdir, 2)
        kv = Coord.phase(conn, "write", 1, gdir, 3)
        img = kv.get("image", "")
        if not os.path.isfile(img) or int(kv.get("bytes", "0")) != os.path.getsize(img):
            fail("PHASE_DONE write names %r (%s bytes) but that is not the image on disk" % (img, kv.get("bytes")))
        if os.path.basename(img) != "%s-7.rimg" % os.path.basename(prog[0]):
            fail("image name %s does not follow <prog>-<upid>.rimg" % img)
        Coord.phase(conn, "resume", 1, gdir, 4)
        time.sleep(0.3)
        single_threaded(proc.pid, "after a checkpoint")
        proc.kill()
        proc.wait()
        if proc.returncode != -9:
            fail("program finished before the kill; make it run longer")
        conn.close()
        renv = dict(os.environ, REVIVE_COORD_HOST="127.0.0.1", REVIVE_COORD_PORT=str(coord.port),
                    REVIVE_SECRET_FILE=sfile, REVIVE_CKPT_DIR=ck, REVIVE_LOG="1")
        rerr = open(os.path.join(a.workdir, "stderr-restart"), "wb")
        proc = subprocess.Popen([os.path.abspath(a.restart), img], cwd=run, stdout=subprocess.DEVNULL, stderr=rerr,
                                env=renv)
        conn = coord.accept(True, 7)
        for i, name in enumerate(("reconnect", "refill", "resume")):
            Coord.phase(conn, name, 1, gdir, 10 + i)
        time.sleep(0.3)
        single_threaded(proc.pid, "restored")
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("restarted program did not finish")
    if rc != ref_rc:
        fail("exit code %d, expected %d; stderr: %s" % (rc, ref_rc, open(os.path.join(a.workdir, "stderr-run")).read()))
    want = open(os.path.join(ref, "stdout"), "rb").read()
    got = open(os.path.join(run, "stdout"), "rb").read()
    if want != got:
        fail("stdout differs (%d bytes vs %d expected)" % (len(got), len(want)))
    print("OK: %s scenario, identical stdout (%d bytes), rc %d" % (a.scenario, len(want), rc))

if __name__ == "__main__":
    main()
