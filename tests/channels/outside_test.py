#!/usr/bin/env python3
"""Policy for connections to peers outside the computation (docs/channels.md): a program pinging an echo
server that is not part of the computation is checkpointed twice (the pings go on through each
checkpoint: the connection is left alone, and the checkpoint does not wait for that peer), killed and restarted
with the echo server gone; the restored program must find its connection closed ("peer closed") and
exit 0 promptly, after exactly the pings it had printed at the checkpoint."""
import argparse, json, os, random, shutil, signal, socket, subprocess, sys, threading, time

def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)

def echo_server(lsock, stop):
    conn, _ = lsock.accept()
    conn.settimeout(0.2)
    while not stop.is_set():
        try:
            d = conn.recv(4096)
        except socket.timeout:
            continue
        if not d:
            break
        conn.sendall(d)
    conn.close()

def main():
    ap = argparse.ArgumentParser()
    for k in ("revive", "inject", "restart", "workdir", "prog"):
        ap.add_argument("--" + k, required=True)
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    ck = os.path.join(a.workdir, "ck")
    env = dict(os.environ, REVIVE_INJECT_LIB=a.inject, REVIVE_RESTART_BIN=a.restart, REVIVE_LOG="0")
    for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD"):
        env.pop(k, None)
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        cport = s.getsockname()[1]
    stop = threading.Event()
    threading.Thread(target=echo_server, args=(lsock, stop), daemon=True).start()
    out = os.path.join(a.workdir, "stdout")
    with open(out, "wb") as f:
        p = subprocess.Popen([a.revive, "launch", "--port", str(cport), "--ckpt-dir", ck, "--", a.prog,
                              str(lsock.getsockname()[1]), "400"], stdout=f, stdin=subprocess.DEVNULL, env=env)
    time.sleep(0.5)
    for gen in (1, 2):
        t = time.time()
        r = subprocess.run([a.revive, "checkpoint", "--port", str(cport), "--ckpt-dir", ck],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        if r.returncode != 0:
            fail("checkpoint %d failed: %s" % (gen, r.stderr))
        print("checkpoint %d took %.2fs" % (gen, time.time() - t), flush=True)
        n0 = open(out).read().count("ping")
        time.sleep(0.4)
        if open(out).read().count("ping") <= n0:
            fail("no pings answered after checkpoint %d: the outside connection was disturbed" % gen)
    if p.poll() is not None:
        fail("program ended early")
    p.kill()
    p.wait()
    stop.set()
    lsock.close()
    with open(os.path.join(ck, "ckpt-2", "MANIFEST.json")) as f:
        json.load(f)
    # The killed run's coordinator leaves once its last process is gone; a restart on its port before
    # then would talk to it (and see the connection closed).
    deadline = time.time() + 10
    while subprocess.run([a.revive, "status", "--port", str(cport), "--ckpt-dir", ck], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL).returncode == 0:
        if time.time() > deadline:
            fail("the coordinator of the killed run is still there")
        time.sleep(0.1)
    t = time.time()
    r = subprocess.run([a.revive, "restart", "--port", str(cport), ck], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env=env, timeout=60)
    lines = open(out).read().splitlines()
    print("restart took %.2fs, exit %d, last lines %s" % (time.time() - t, r.returncode, lines[-2:]), flush=True)
    if r.returncode != 0:
        fail("restart exited %d: %s" % (r.returncode, r.stderr))
    if not lines or not lines[-1].startswith("peer closed"):
        fail("the restored program did not see its outside connection closed: %s" % lines[-3:])
    pings = [l for l in lines[:-1]]
    if pings != ["ping %d" % i for i in range(len(pings))]:
        fail("pings before the close are not 0..n-1 exactly once: %s" % pings[-5:])
    print("PASS: outside connection came back closed after %d pings" % len(pings), flush=True)

if __name__ == "__main__":
    main()
