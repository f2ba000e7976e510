#!/usr/bin/env python3
"""Scale: N small processes (default 128) on this host under one coordinator (--mode flat) or under a
two-level tree (--mode tree: a root and --subs sub-coordinators, processes spread over the subs). Launch
all, checkpoint at a random moment, SIGKILL all, restart all from the manifest (tree: through the first
sub-coordinator), and compare every process's stdout and the exit status with uninterrupted runs.
Prints launch, checkpoint and restart times (information only; bench/distributed measures them)."""
import argparse, json, os, random, shutil, signal, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
from harness import *

VARIANTS = 4  # distinct argument sets, so a process restored from another's image shows

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--revive", required=True)
    ap.add_argument("--inject", required=True)
    ap.add_argument("--restart", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--procs", type=int, default=128)
    ap.add_argument("--mode", choices=["flat", "tree"], default="flat")
    ap.add_argument("--subs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("prog", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    prog = a.prog[1:] if a.prog and a.prog[0] == "--" else a.prog
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    port = free_port(rng)
    subports = [free_port(rng) for _ in range(a.subs)] if a.mode == "tree" else []
    print("seed %d port %d subs %s" % (seed, port, subports), flush=True)
    shutil.rmtree(a.workdir, ignore_errors=True)
    ck = os.path.join(a.workdir, "ck")
    os.makedirs(ck)
    revive = os.path.abspath(a.revive)
    env = clean_env(dict(REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
                         REVIVE_LOG="0"))
    progs = [prog[:1] + [str(int(prog[1]) + 5 * v)] + prog[2:] for v in range(VARIANTS)]
    refs = []
    for v, p in enumerate(progs):
        d = os.path.join(a.workdir, "ref-%d" % v)
        os.makedirs(d)
        refs.append(subprocess.Popen(p, cwd=d, stdout=open(os.path.join(d, "stdout"), "wb"),
                                     stdin=subprocess.DEVNULL))
    coords = []
    try:
        if a.mode == "tree":
            coords.append(subprocess.Popen([revive, "coordinator", "--port", str(port), "--ckpt-dir", ck], env=env,
                                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(a.workdir, "root.err"), "wb")))
            wait_procs(revive, port, ck, env, 0, timeout=10)
            for i, sp in enumerate(subports):
                coords.append(subprocess.Popen([revive, "coordinator", "--parent", "127.0.0.1:%d" % port, "--port",
                                                str(sp), "--ckpt-dir", ck], env=env, stdout=subprocess.DEVNULL,
                                               stderr=open(os.path.join(a.workdir, "sub%d.err" % i), "wb")))
                wait_procs(revive, sp, ck, env, 0, timeout=10)
        run_test(a, revive, env, ck, port, subports, progs, refs, rng)
    finally:
        for c in coords:
            c.terminate()
            c.wait()

def run_test(a, revive, env, ck, port, subports, progs, refs, rng):
    t0 = time.time()
    procs = []
    for i in range(a.procs):
        d = os.path.join(a.workdir, "run-%d" % i)
        os.makedirs(d)
        pport = subports[i % len(subports)] if subports else port
        procs.append(subprocess.Popen([revive, "launch", "--port", str(pport), "--ckpt-dir", ck, "--"] +
                                      progs[i % VARIANTS], cwd=d, stdout=open(os.path.join(d, "stdout"), "wb"),
                                      stderr=open(os.path.join(d, "stderr"), "wb"), stdin=subprocess.DEVNULL, env=env))
    wait_procs(revive, port, ck, env, a.procs, timeout=60)
    launch_s = time.time() - t0
    time.sleep(rng.uniform(0.1, 0.5))
    m, ckpt_s = checkpoint(revive, port, ck, env, 1, a.procs)
    hosts = set(p["host"] for p in m["processes"])
    for p in procs:
        if p.poll() is not None:
            fail("a launched program ended (rc %s) before it was killed; make it run longer" % p.returncode)
        p.send_signal(signal.SIGKILL)
    for p in procs:
        p.wait()
    ref_rc = [r.wait(timeout=120) for r in refs]
    if a.mode == "flat" and not coordinator_gone(revive, port, ck, env):
        fail("the coordinator did not exit after its processes died")

    rport = subports[0] if subports else port
    t0 = time.time()
    rerr = open(os.path.join(a.workdir, "restart-stderr"), "wb")
    rp = subprocess.Popen([revive, "restart", "--port", str(rport), ck], cwd=a.workdir, stdout=rerr, stderr=rerr,
                          stdin=subprocess.DEVNULL, env=env)
    rerr.close()
    wait_procs(revive, port, ck, env, a.procs, timeout=60)
    restart_s = time.time() - t0
    try:
        rp.wait(timeout=120)
    except subprocess.TimeoutExpired:
        rp.kill()
        fail("restarted computation did not finish")
    # Exit status: the first non-zero in manifest order (pid -> process index -> variant).
    index = {p.pid: i for i, p in enumerate(procs)}
    rcs = [ref_rc[index[q["pid"]] % VARIANTS] for q in m["processes"]]
    want_rc = next((c for c in rcs if c != 0), 0)
    if rp.returncode != want_rc:
        fail("revive restart exited %s, want %s; stderr: %s" % (rp.returncode, want_rc,
             open(os.path.join(a.workdir, "restart-stderr")).read()[-2000:]))
    want = [open(os.path.join(a.workdir, "ref-%d" % v, "stdout"), "rb").read() for v in range(VARIANTS)]
    for i in range(a.procs):
        got = open(os.path.join(a.workdir, "run-%d" % i, "stdout"), "rb").read()
        if got != want[i % VARIANTS]:
            fail("process %d: stdout differs after restart (%d bytes vs %d)" % (i, len(got), len(want[i % VARIANTS])))
    print("OK %s: %d processes (hosts %s): launch %.2f s, checkpoint %.2f s, restart until all reconnected %.2f s; "
          "outputs identical" % (a.mode, a.procs, sorted(hosts), launch_s, ckpt_s, restart_s), flush=True)

if __name__ == "__main__":
    main()
