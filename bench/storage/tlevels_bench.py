#!/usr/bin/env python3
"""Transparent multi-level storage end to end (docs/storage-levels.md, "Transparent images"; figures in
docs/performance.md): `revive launch --hosts h1,h2,h3 -n 3 --launcher netns` (network namespaces of this
machine as hosts, root needed) of bench_stall_prog (fills SIZE MB, then reads it in 1 MiB pieces and records
the longest gap between two pieces: the stall as the program itself sees it), checkpointed once from outside
with `revive checkpoint` (timed until the generation is published: images, partner copies and parity
durable, manifest written). Per mode (a REVIVE_LEVELS policy, with or without --fork) the median over --runs
of: the longest stall any of the three programs saw, and the checkpoint's wall time. The physical reference,
measured in the same run between the modes: a raw write + fsync of the same bytes (the three images) into the
same node-local root, by three writers in parallel (what the three hosts' L1 writes are at best).
Usage: tlevels_bench.py --build BUILD [--local DIR] [--size MB] [--runs 3] [--modes L1+L2,fork:L1+L2,...]"""
import argparse, json, os, shutil, statistics, subprocess, sys, threading, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "hosts"))
from harness import clean_env, coordinator_gone, free_port, run, wait_procs, with_namespaces

N = 3


def one(a, rng, prefix, net, mode):
    """One launch in `mode` ("[fork:]LEVELS"): (longest stall of the three programs, checkpoint seconds, bytes)."""
    fork, levels = mode.startswith("fork:"), mode.split(":")[-1]
    hosts = [prefix + str(k + 1) for k in range(N)]
    work = os.path.join(a.local, "run")
    shutil.rmtree(work, ignore_errors=True)
    ck, rund, local = (os.path.join(work, d) for d in ("ck", "out", "local"))
    os.makedirs(rund)
    port, sub = free_port(rng, net + ".1"), free_port(rng)
    env = clean_env(dict(REVIVE_INJECT_LIB=a.inject, REVIVE_RESTART_BIN=a.restart, REVIVE_LOG="0",
                         REVIVE_COORD_HOST=net + ".1", REVIVE_LEVELS=levels, REVIVE_LOCAL_PATH=local,
                         REVIVE_LOCAL_DIRS="", REVIVE_GROUP_SIZE="3"))
    script = 'exec "$0" %d %.1f > out-$REVIVE_LAUNCH_INDEX 2> err-$REVIVE_LAUNCH_INDEX' % (a.size, a.seconds)
    cmd = [a.revive, "launch", "--port", str(port), "--hosts", ",".join(hosts), "--launcher", "netns",
           "--sub-port", str(sub), "--ckpt-dir", ck, "-n", str(N)] + (["--fork"] if fork else []) + \
          ["--", "bash", "-c", script, a.prog]
    lp = subprocess.Popen(cmd, cwd=rund, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wait_procs(a.revive, port, ck, env, N, procs=[lp])
    deadline = time.time() + 60
    while sum(1 for i in range(N) if "ready" in open(os.path.join(rund, "err-%d" % i)).read()) < N:
        if time.time() > deadline or lp.poll() is not None:
            sys.exit("the programs did not get ready")
        time.sleep(0.05)
    time.sleep(1.0)
    t0 = time.time()
    r = run([a.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=env, timeout=300)
    secs = time.time() - t0
    if r.returncode != 0:
        sys.exit("%s: checkpoint failed: %s" % (mode, r.stderr))
    m = json.load(open(os.path.join(ck, "ckpt-1", "MANIFEST.json")))
    if m.get("storage", {}).get("levels") != levels.split(",")[0]:
        sys.exit("%s: the manifest records storage %r" % (mode, m.get("storage")))
    lp.wait(timeout=a.seconds + 120)
    stalls = []
    for i in range(N):
        out = open(os.path.join(rund, "out-%d" % i)).read().split()
        stalls.append(float(out[out.index("max_gap_ms") + 1]) / 1e3)
    coordinator_gone(a.revive, port, ck, env)
    shutil.rmtree(work, ignore_errors=True)
    return max(stalls), secs, sum(p["bytes"] for p in m["processes"])


def raw(a, nbytes):
    """Three writers in parallel, each write + fsync of a third of nbytes into the node-local root."""
    d = os.path.join(a.local, "raw")
    os.makedirs(d, exist_ok=True)
    chunk = os.urandom(1 << 20)
    def w(i):
        with open(os.path.join(d, "img-%d" % i), "wb") as f:
            left = nbytes // N
            while left > 0:
                left -= f.write(chunk[:min(left, len(chunk))])
            f.flush()
            os.fsync(f.fileno())
    t0 = time.time()
    ts = [threading.Thread(target=w, args=(i,)) for i in range(N)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    secs = time.time() - t0
    shutil.rmtree(d)
    return secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--local", default="/dev/shm/revive-tlevels-bench")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default="L1+L2,fork:L1+L2")
    ap.add_argument("--seed", type=int)
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    a.revive, a.inject = os.path.join(b, "src/cli/revive"), os.path.join(b, "src/inject/librevive_inject.so")
    a.restart, a.prog = os.path.join(b, "src/restart/revive-restart"), os.path.join(b, "bench/transparent/bench_stall_prog")
    a.netns = os.path.join(HERE, "..", "..", "scripts", "netns.sh")
    a.workdir = a.local
    modes = a.modes.split(",")

    def body(rng, seed, prefix, net):
        stall = {m: [] for m in modes}
        ckpt = {m: [] for m in modes}
        refs, nbytes = [], 0
        for _ in range(a.runs):  # interleaved: the machine's drift hits every mode alike
            for m in modes:
                s, c, nbytes = one(a, rng, prefix, net, m)
                stall[m].append(s)
                ckpt[m].append(c)
            refs.append(raw(a, nbytes))
        ref = statistics.median(refs)
        print("# 3 hosts (netns), %d MB per program, images %.0f MiB in all, %d runs (medians), load %s" % (
            a.size, nbytes / 2**20, a.runs, open("/proc/loadavg").read().split()[0]))
        print("raw write+fsync of the same bytes (3 writers, %s): %.3f s   runs %s" % (
            a.local, ref, " ".join("%.3f" % x for x in refs)))
        for m in modes:
            ms, mc = statistics.median(stall[m]), statistics.median(ckpt[m])
            print("%-16s stall %.3f s   ckpt %.3f s   ckpt/raw %.2f   stalls %s   ckpts %s" % (
                m, ms, mc, mc / ref, " ".join("%.3f" % x for x in stall[m]), " ".join("%.3f" % x for x in ckpt[m])))
        shutil.rmtree(a.local, ignore_errors=True)

    with_namespaces(a, "rvb", "10.86", N, body)


if __name__ == "__main__":
    main()
