#!/usr/bin/env python3
"""End-to-end test of the `revive` command with the real engine:
reference run of PROG; then `revive launch` PROG, `revive checkpoint` at a random moment (or wait for an
--interval checkpoint), SIGKILL, `revive restart CKPT-DIR`; stdout (a regular file, restored by the fd
plugin) and exit code must equal the reference. --chain N checkpoints and kills the restored program again
N times (restart picks the newest generation each time)."""
import argparse, os, random, shutil, signal, subprocess, sys, time

def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)

def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)

def coordinator_gone(revive, port, ck, timeout=10):
    """Until the coordinator stops answering and its port can be bound again (a coordinator that has
    stopped answering may not have closed its listener yet, and the restart's would then fail to bind)."""
    import socket
    deadline = time.time() + timeout
    while time.time() < deadline:
        if run([revive, "status", "--port", str(port), "--ckpt-dir", ck]).returncode != 0:
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", port))
                    return True
                except OSError:
                    pass
        time.sleep(0.1)
    return False

def wait_connected(revive, port, ck, n, timeout=30):
    """Until the coordinator has n processes and is idle (a restored one has finished its restart
    barrier): on a loaded machine a fixed delay is not enough for launch/restore to get there."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = run([revive, "status", "--port", str(port), "--ckpt-dir", ck])
        if r.returncode == 0 and "processes:   %d\n" % n in r.stdout and "state:       idle" in r.stdout:
            return
        time.sleep(0.05)
    fail("the coordinator never had %d idle processes: %s" % (n, r.stdout + r.stderr))

def checkpoint(revive, port, ck, want_gen, procs=1, forked=False, compressed=False):
    r = run([revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], timeout=120)
    if r.returncode != 0:
        fail("revive checkpoint exited %d: %s" % (r.returncode, r.stderr.strip()))
    got = r.stdout.strip()
    if got != os.path.join(ck, "ckpt-%d" % want_gen):
        fail("revive checkpoint printed %r, want generation %d" % (got, want_gen))
    if not os.path.exists(os.path.join(got, "MANIFEST.json")):
        fail("checkpoint returned before %s/MANIFEST.json existed" % got)
    import json
    n = len(json.load(open(os.path.join(got, "MANIFEST.json")))["processes"])
    if n != procs:
        fail("%s/MANIFEST.json lists %d processes, want %d" % (got, n, procs))
    print("checkpoint: %s" % got, flush=True)
    inspect(revive, got, forked, compressed)

def inspect(revive, gen_dir, forked=False, compressed=False):
    """revive inspect on every image of the generation: JSON parses, names the program, checksums verify;
    a copy with one flipped byte in the middle is reported damaged (exit 1 or 2, never a crash)."""
    import json
    manifest = json.load(open(os.path.join(gen_dir, "MANIFEST.json")))
    for p in manifest["processes"]:
        img = os.path.join(gen_dir, p["image"])
        r = run([revive, "inspect", "--json", img])
        if r.returncode != 0:
            fail("revive inspect %s exited %d: %s" % (img, r.returncode, r.stderr.strip()))
        j = json.loads(r.stdout)
        if j["header"]["prog"] != p["prog"] or j["header"]["upid"] != p["upid"] or not j["checksums"]["ok"]:
            fail("revive inspect %s: unexpected summary %s" % (img, r.stdout[:400]))
        if not j["threads"] or not j["regions"]:
            fail("revive inspect %s: no threads or regions" % img)
        if forked and not j["header"]["forked"]:
            fail("launch --fork, but %s was not written by a forked child" % img)
        # launch --compress: every chunk may be a zstd frame. By default only regions up to 8 MiB are
        # (the program's metadata; docs/image-format.md): a larger one stored smaller is a defect, and the
        # header says "compressed" exactly when some chunk is a frame.
        size = lambda r: int(r["end"], 16) - int(r["start"], 16)
        framed = [r for r in j["regions"] if r["stored_bytes"] < r["saved_bytes"]]
        if compressed and not j["header"]["compressed"]:
            fail("%s: launched with --compress, but the header says uncompressed" % img)
        if not compressed:
            big = [r for r in framed if size(r) > 8 << 20]
            if big:
                fail("%s: a %d-byte region was compressed without --compress" % (img, size(big[0])))
            if j["header"]["compressed"] != bool(framed):
                fail("%s: header compressed=%s, but %d regions hold frames" % (img, j["header"]["compressed"],
                                                                              len(framed)))
        bad = img + ".damaged"
        data = bytearray(open(img, "rb").read())
        data[len(data) // 2] ^= 0xFF
        open(bad, "wb").write(data)
        r = run([revive, "inspect", bad])
        os.unlink(bad)
        if r.returncode not in (1, 2) or not r.stderr + r.stdout:
            fail("revive inspect of a damaged image exited %d: %s" % (r.returncode, r.stderr.strip()))

def kill(proc, what):
    if proc.poll() is not None:
        fail("%s ended (rc %s) before it could be killed; make it run longer" % (what, proc.returncode))
    # The launched/restarted program: revive launch execs it (same pid); revive restart waits for
    # revive-restart, which becomes the restored program. Kill the program itself.
    os.kill(proc.pid if what == "launched program" else child_of(proc.pid), signal.SIGKILL)
    proc.wait()

def child_of(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        kids = f.read().split()
    if len(kids) != 1:
        fail("revive restart has %d children, want 1" % len(kids))
    return int(kids[0])

def free_port(rng):
    """A random port nobody listens on now (another test or engineer may hold a fixed one)."""
    import socket
    for _ in range(100):
        port = 20000 + rng.randrange(12000)  # below the ephemeral range (32768-60999): an outgoing connection cannot hold it
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    fail("no free port found")

def parser():
    """The arguments every driver of the real engine takes (also tests/hooks/hooks_driver.py)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--revive", required=True)
    ap.add_argument("--inject", required=True)
    ap.add_argument("--restart", required=True)
    ap.add_argument("--workdir", required=True)
    return ap

def main():
    ap = parser()
    ap.add_argument("--delay", type=float, nargs=2, default=[0.3, 0.8])
    ap.add_argument("--chain", type=int, default=0)
    ap.add_argument("--interval", type=float, default=0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--lazy", action="store_true",
                    help="restart --lazy (the images' small regions are compressed chunks, the rest mapped)")
    ap.add_argument("--fork", action="store_true", help="launch --fork: images written by a forked child")
    ap.add_argument("--compress", action="store_true", help="launch --compress: zstd images")
    ap.add_argument("--copies", type=int, default=1,
                    help="launch PROG this many times into one computation (one coordinator, one manifest)")
    ap.add_argument("prog", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    prog = a.prog[1:] if a.prog and a.prog[0] == "--" else a.prog
    a.revive = os.path.abspath(a.revive)
    if a.copies > 1 and a.chain:
        fail("--copies and --chain together are not supported")
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    port = free_port(rng)
    print("seed %d port %d" % (seed, port), flush=True)
    shutil.rmtree(a.workdir, ignore_errors=True)
    ref, work, ck = (os.path.join(a.workdir, d) for d in ("ref", "run", "ck"))
    runs = [os.path.join(work, "copy-%d" % i) for i in range(a.copies)]
    for d in [ref] + runs:
        os.makedirs(d)
    env = dict(os.environ, REVIVE_INJECT_LIB=os.path.abspath(a.inject),
               REVIVE_RESTART_BIN=os.path.abspath(a.restart), REVIVE_LOG="0")
    for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD"):
        env.pop(k, None)

    with open(os.path.join(ref, "stdout"), "wb") as out:
        r = subprocess.run(prog, cwd=ref, stdout=out, stdin=subprocess.DEVNULL, timeout=120)
    ref_rc = r.returncode
    print("reference: rc %d" % ref_rc, flush=True)

    launch = [a.revive, "launch", "--port", str(port), "--ckpt-dir", ck]
    if a.interval:
        launch += ["--interval", str(a.interval)]
    if a.fork:
        launch += ["--fork"]
    if a.compress:
        launch += ["--compress"]
    procs = []
    for d in runs:  # each copy writes its own stdout file; the fd plugin restores each one
        with open(os.path.join(d, "stdout"), "wb") as out:
            procs.append(subprocess.Popen(launch + ["--"] + prog, cwd=d, stdout=out, stdin=subprocess.DEVNULL,
                                          env=env))
    proc = procs[0]
    gen = 1
    if a.interval:
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(ck, "ckpt-1", "MANIFEST.json")):
            if time.time() > deadline or proc.poll() is not None:
                fail("no --interval checkpoint appeared")
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 0.1))
        gen = max(int(d[5:]) for d in os.listdir(ck) if d.startswith("ckpt-") and
                  os.path.exists(os.path.join(ck, d, "MANIFEST.json"))) + 1
        print("interval checkpoints seen, newest complete: ckpt-%d" % (gen - 1), flush=True)
    else:
        wait_connected(a.revive, port, ck, a.copies)
        time.sleep(rng.uniform(*a.delay))
        checkpoint(a.revive, port, ck, gen, a.copies, a.fork, a.compress)
        gen += 1
        time.sleep(rng.uniform(0, a.delay[0]))
    for p in procs:
        kill(p, "launched program")
        if p.returncode != -signal.SIGKILL:
            fail("launched program was not killed by SIGKILL (rc %s)" % p.returncode)
    if not coordinator_gone(a.revive, port, ck):
        fail("launch's coordinator did not exit after its only process died")

    for c in range(a.chain + 1):
        cmd = [a.revive, "restart", "--port", str(port)] + (["--lazy"] if a.lazy else []) + [ck]
        print("restart %d: %s" % (c, " ".join(cmd)), flush=True)
        rerr = open(os.path.join(work, "restart-stderr-%d" % c), "wb")
        proc = subprocess.Popen(cmd, cwd=work, stdout=rerr, stderr=rerr, stdin=subprocess.DEVNULL, env=env)
        rerr.close()
        if c < a.chain:
            wait_connected(a.revive, port, ck, 1)
            time.sleep(rng.uniform(*a.delay))
            checkpoint(a.revive, port, ck, gen)
            gen += 1
            time.sleep(rng.uniform(0, a.delay[0]))
            kill(proc, "restored program")
            if not coordinator_gone(a.revive, port, ck):
                fail("restart's coordinator did not exit after its only process died")
            continue
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("restarted program did not finish")
    if proc.returncode != ref_rc:
        fail("revive restart exited %s, the uninterrupted run %s; stderr: %s" % (
            proc.returncode, ref_rc, open(os.path.join(work, "restart-stderr-%d" % a.chain)).read()))
    want = open(os.path.join(ref, "stdout"), "rb").read()
    for d in runs:
        got = open(os.path.join(d, "stdout"), "rb").read()
        if want != got:
            fail("%s/stdout differs after restart: %d bytes vs %d expected" % (d, len(got), len(want)))
    if not coordinator_gone(a.revive, port, ck):
        fail("restart's coordinator did not exit after the program ended")
    print("OK: stdout of %d process(es) identical (%d bytes), rc %d" % (a.copies, len(want), ref_rc), flush=True)

if __name__ == "__main__":
    main()
