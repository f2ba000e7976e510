#!/usr/bin/env python3
"""Restart of transparent images kept on the hosts (docs/storage-levels.md, "Transparent images"; figures in
docs/performance.md): `revive launch --hosts h1,h2,h3 -n 3 --launcher netns` (network namespaces of this
machine as hosts, root needed) of bench_stall_prog (SIZE MB each) at L1+L3 (XOR over the 3 hosts),
checkpointed once, killed (it would run --seconds, long enough to be restored still running); then `revive restart --hosts` timed until the coordinator lists the three
processes restored. Modes: "intact" (every L1 copy there) and "rebuild" (host 2's node-local storage wiped
first: its image rebuilt from the group's parity, its parity written again). Medians over --runs, modes
interleaved. The physical reference, measured in the same run: a raw read of the same bytes (the three
images) from the same node-local root by three readers in parallel.
Usage: tlevels_restart_bench.py --build BUILD [--before REVIVE] [--local DIR] [--size MB] [--runs 3]
--before: another build's revive command; every mode is also restarted with it ("MODE/before"), interleaved."""
import json, os, shutil, statistics, subprocess, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "hosts"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "tlevels"))
from harness import coordinator_gone, run, wait_procs, with_namespaces
from crash_test import kill_all
from tlevels_bench import Launched, options, parallel, raw

N = 3


def one(a, rng, prefix, net, mode):
    """One launch, checkpoint, kill and timed restart: (restart seconds, image bytes)."""
    c = Launched(a, rng, prefix, net, "L1+L3", False, append=True)
    port, ck, rund, env, lp, work, local, hosts, place = c.port, c.ck, c.rund, c.env, c.lp, c.work, c.local, c.hosts, c.place
    r = run([a.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=env, timeout=300)
    if r.returncode != 0:
        sys.exit("%s: checkpoint failed: %s" % (mode, r.stderr))
    m = json.load(open(os.path.join(ck, "ckpt-1", "MANIFEST.json")))
    kill_all(ck)
    lp.wait(timeout=60)
    coordinator_gone(a.revive, port, ck, env)
    cli = a.before if mode.endswith("/before") else a.revive
    if mode.startswith("rebuild"):
        shutil.rmtree(os.path.join(local, hosts[1]))
    err = os.path.join(work, "restart-stderr")
    t0 = time.time()
    rp = subprocess.Popen([cli, "restart"] + place + [ck], cwd=rund, stdout=subprocess.DEVNULL,
                          stderr=open(err, "wb"), env=env)
    wait_procs(a.revive, port, ck, env, N, timeout=300, procs=[rp])
    secs = time.time() - t0
    said = open(err).read()
    if mode.startswith("rebuild") and "rebuilt from its group's parity" not in said:
        sys.exit("rebuild: the restart did not rebuild host %s's image:\n%s" % (hosts[1], said))
    kill_all(ck)
    rp.wait(timeout=60)
    coordinator_gone(a.revive, port, ck, env)
    shutil.rmtree(work, ignore_errors=True)
    return secs, sum(p["bytes"] for p in m["processes"])


def raw_read(a, nbytes):
    """Three readers in parallel, each reading a third of nbytes from the node-local root (written first)."""
    raw(a, nbytes, keep=True)
    d = os.path.join(a.local, "raw")
    def r(i):
        with open(os.path.join(d, "img-%d" % i), "rb", buffering=0) as f:
            while f.read(1 << 20):
                pass
    secs = parallel(r)
    shutil.rmtree(d)
    return secs


def main():
    a = options("/dev/shm/revive-tlevels-restart-bench", 120.0, "intact,rebuild",
                lambda ap: ap.add_argument("--before"))
    a.before = os.path.abspath(a.before) if a.before else None
    modes = a.modes.split(",")
    if a.before:  # each mode also restarted by the other revive command, interleaved
        modes = [x for m in modes for x in (m + "/before", m)]

    def body(rng, seed, prefix, net):
        secs = {m: [] for m in modes}
        refs, nbytes = [], 0
        for _ in range(a.runs):  # interleaved: the machine's drift hits every mode alike
            for m in modes:
                s, nbytes = one(a, rng, prefix, net, m)
                secs[m].append(s)
            refs.append(raw_read(a, nbytes))
        ref = statistics.median(refs)
        print("# 3 hosts (netns), L1+L3 XOR, %d MB per program, images %.0f MiB in all, %d runs (medians), restart "
              "with %s (/before: %s), load %s" % (a.size, nbytes / 2**20, a.runs, a.revive, a.before, open("/proc/loadavg").read().split()[0]))
        print("raw read of the same bytes (3 readers, %s): %.3f s   runs %s" % (
            a.local, ref, " ".join("%.3f" % x for x in refs)))
        for m in modes:
            med = statistics.median(secs[m])
            print("%-15s restart %.3f s   restart/raw %.1f   runs %s" % (
                m, med, med / ref, " ".join("%.3f" % x for x in secs[m])))
        shutil.rmtree(a.local, ignore_errors=True)

    with_namespaces(a, "rvq", "10.91", N, body)


if __name__ == "__main__":
    main()
