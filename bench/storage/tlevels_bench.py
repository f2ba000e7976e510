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


class Launched:
    """A computation launched on the 3 namespace hosts at `levels`, its programs ready (filled)."""
    def __init__(self, a, rng, prefix, net, levels, fork, append=False):
        self.hosts = [prefix + str(k + 1) for k in range(N)]
        self.work = os.path.join(a.local, "run")
        shutil.rmtree(self.work, ignore_errors=True)
        self.ck, self.rund, self.local = (os.path.join(self.work, d) for d in ("ck", "out", "local"))
        os.makedirs(self.rund)
        self.port, sub = free_port(rng, net + ".1"), free_port(rng)
        self.env = clean_env(dict(REVIVE_INJECT_LIB=a.inject, REVIVE_RESTART_BIN=a.restart, REVIVE_LOG="0",
                                  REVIVE_COORD_HOST=net + ".1", REVIVE_LEVELS=levels, REVIVE_LOCAL_PATH=self.local,
                                  REVIVE_LOCAL_DIRS="", REVIVE_GROUP_SIZE="3"))
        to = ">>" if append else ">"  # a restarted program's outputs follow the first run's
        script = 'exec "$0" %d %.1f %s out-$REVIVE_LAUNCH_INDEX 2%s err-$REVIVE_LAUNCH_INDEX' % (a.size, a.seconds, to, to)
        self.place = ["--port", str(self.port), "--hosts", ",".join(self.hosts), "--launcher", "netns",
                      "--sub-port", str(sub)]
        cmd = [a.revive, "launch"] + self.place + ["--ckpt-dir", self.ck, "-n", str(N)] + \
              (["--fork"] if fork else []) + ["--", "bash", "-c", script, a.prog]
        self.lp = subprocess.Popen(cmd, cwd=self.rund, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env)
        wait_procs(a.revive, self.port, self.ck, self.env, N, procs=[self.lp])
        deadline = time.time() + 60
        while sum(1 for i in range(N) if "ready" in open(os.path.join(self.rund, "err-%d" % i)).read()) < N:
            if time.time() > deadline or self.lp.poll() is not None:
                sys.exit("the programs did not get ready")
            time.sleep(0.05)


def one(a, rng, prefix, net, mode):
    """One launch in `mode` ("[fork:]LEVELS"): (longest stall of the three programs, checkpoint seconds, bytes)."""
    fork, levels = mode.startswith("fork:"), mode.split(":")[-1]
    c = Launched(a, rng, prefix, net, levels, fork)
    port, ck, rund, env, lp, work = c.port, c.ck, c.rund, c.env, c.lp, c.work
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


def parallel(fn):
    """fn(i) on N threads at once: the seconds until the last one ends."""
    t0 = time.time()
    ts = [threading.Thread(target=fn, args=(i,)) for i in range(N)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.time() - t0


def raw(a, nbytes, keep=False):
    """Three writers in parallel, each write + fsync of a third of nbytes into the node-local root (the
    files a.local/raw/img-I removed unless keep)."""
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
    secs = parallel(w)
    if not keep:
        shutil.rmtree(d)
    return secs


def options(local, seconds, modes, extra=lambda ap: None):
    """The options both tlevels benches take, parsed, with the build's programs' paths."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--local", default=local)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=seconds)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default=modes)
    ap.add_argument("--seed", type=int)
    extra(ap)
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    a.revive, a.inject = os.path.join(b, "src/cli/revive"), os.path.join(b, "src/inject/librevive_inject.so")
    a.restart, a.prog = os.path.join(b, "src/restart/revive-restart"), os.path.join(b, "bench/transparent/bench_stall_prog")
    a.netns = os.path.join(HERE, "..", "..", "scripts", "netns.sh")
    a.workdir = a.local
    return a


def main():
    a = options("/dev/shm/revive-tlevels-bench", 5.0, "L1+L2,fork:L1+L2")
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
