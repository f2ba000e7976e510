#!/usr/bin/env python3
"""Coordinator death: N real processes run under one coordinator; after a first checkpoint the
coordinator is SIGKILLed. The processes must run on to the end (no hang) with exactly the output and exit
status of uninterrupted runs; `revive status` must say the coordinator is lost (naming its pid) and
`revive checkpoint` must fail promptly with a message. Then the checkpoint taken before the loss must still
restart to the same output."""
import argparse, os, random, re, shutil, signal, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--revive", required=True)
    ap.add_argument("--inject", required=True)
    ap.add_argument("--restart", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("prog", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    prog = a.prog[1:] if a.prog and a.prog[0] == "--" else a.prog
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    port = free_port(rng)
    print("seed %d port %d" % (seed, port), flush=True)
    shutil.rmtree(a.workdir, ignore_errors=True)
    ck = os.path.join(a.workdir, "ck")
    revive = os.path.abspath(a.revive)
    env = clean_env(dict(REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
                         REVIVE_LOG="0"))
    progs = [prog[:1] + [str(int(prog[1]) + 3 * i)] + prog[2:] for i in range(a.procs)]
    refs, procs = [], []
    for i, p in enumerate(progs):
        d = os.path.join(a.workdir, "ref-%d" % i)
        os.makedirs(d)
        refs.append(subprocess.Popen(p, cwd=d, stdout=open(os.path.join(d, "stdout"), "wb"), stdin=subprocess.DEVNULL))
    for i, p in enumerate(progs):
        d = os.path.join(a.workdir, "run-%d" % i)
        os.makedirs(d)
        procs.append(subprocess.Popen([revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--"] + p, cwd=d,
                                      stdout=open(os.path.join(d, "stdout"), "wb"), stdin=subprocess.DEVNULL, env=env))
    out = wait_procs(revive, port, ck, env, a.procs)
    m = re.search(r"coordinator: pid (\d+)", out)
    if not m:
        fail("revive status does not name the coordinator's pid: " + out)
    cpid = int(m.group(1))
    time.sleep(rng.uniform(0.1, 0.4))
    checkpoint(revive, port, ck, env, 1, a.procs)
    os.kill(cpid, signal.SIGKILL)
    print("coordinator pid %d killed" % cpid, flush=True)
    time.sleep(0.2)
    r = status(revive, port, ck, env)
    if r.returncode != 2 or "coordinator is lost" not in r.stderr or ("pid %d" % cpid) not in r.stderr \
            or "ended without shutting down" not in r.stderr:
        fail("revive status after the coordinator died: rc %d, %r" % (r.returncode, r.stderr))
    print("status: " + r.stderr.strip().splitlines()[-1][:160], flush=True)
    t0 = time.time()
    r = run([revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=env, timeout=60)
    if r.returncode != 2 or not r.stderr.strip() or time.time() - t0 > 20:
        fail("revive checkpoint without a coordinator: rc %d after %.1f s: %r" % (r.returncode, time.time() - t0, r.stderr))
    for i, p in enumerate(procs):
        try:
            rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            fail("process %d hangs after its coordinator died" % i)
        want_rc = refs[i].wait(timeout=60)
        if rc != want_rc:
            fail("process %d exited %d after losing its coordinator, uninterrupted run %d" % (i, rc, want_rc))
    for i in range(a.procs):
        want = open(os.path.join(a.workdir, "ref-%d" % i, "stdout"), "rb").read()
        got = open(os.path.join(a.workdir, "run-%d" % i, "stdout"), "rb").read()
        if want != got:
            fail("process %d: stdout differs after losing the coordinator (%d bytes vs %d)" % (i, len(got), len(want)))
    print("all %d processes finished identically without their coordinator" % a.procs, flush=True)

    # The generation written before the loss is complete: restart it (a new coordinator is started).
    r = run([revive, "restart", "--port", str(port), ck], cwd=a.workdir, env=env, timeout=120)
    first_rc = next((refs[i].returncode for i in range(a.procs) if refs[i].returncode != 0), 0)
    if r.returncode not in [p.returncode for p in refs] or (first_rc == 0 and r.returncode != 0):
        fail("restart of the checkpoint taken before the loss exited %d: %s" % (r.returncode, r.stderr[-2000:]))
    for i in range(a.procs):
        want = open(os.path.join(a.workdir, "ref-%d" % i, "stdout"), "rb").read()
        got = open(os.path.join(a.workdir, "run-%d" % i, "stdout"), "rb").read()
        if want != got:
            fail("process %d: stdout differs after restarting ckpt-1 (%d bytes vs %d)" % (i, len(got), len(want)))
    r = status(revive, port, ck, env)
    if "coordinator is lost" in r.stderr:
        fail("a cleanly exited coordinator is reported lost: " + r.stderr)
    print("OK: restart of ckpt-1 identical; status after a clean exit: %s" % r.stderr.strip()[:120], flush=True)

if __name__ == "__main__":
    main()
