#!/usr/bin/env python3
"""The pause a program sees under `revive launch`, with and without --fork.

A program (stall_prog) fills SIZE MB and reads it in 1 MiB pieces in a loop, recording the longest gap
between two pieces: the stall as the program itself sees it. It runs under `revive launch [--fork]`; after
it is ready, `revive checkpoint` is run from outside and timed (until the generation is durable and
published). Also the same program without revive (its longest natural gap). Medians of --runs.
Usage: stall_bench.py --build BUILD --dir DIR [--size 1024] [--runs 3]"""
import argparse, os, random, re, shutil, statistics, subprocess, sys, time

def one(a, fork):
    ck = os.path.join(a.dir, "ck")
    shutil.rmtree(ck, ignore_errors=True)
    port = str(random.randint(20000, 40000))
    cmd = [a.revive, "launch", "--port", port, "--ckpt-dir", ck] + (["--fork"] if fork else []) + \
          ["--", a.prog, str(a.size), str(a.seconds)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while True:
        line = p.stderr.readline().decode(errors="replace")
        if not line:
            sys.exit("program ended before it was ready")
        if line.startswith("ready"):
            break
    time.sleep(1.0)
    t0 = time.time()
    r = subprocess.run([a.revive, "checkpoint", "--port", port, "--ckpt-dir", ck], capture_output=True)
    ckpt = time.time() - t0
    if r.returncode != 0:
        sys.exit("checkpoint failed: " + r.stderr.decode())
    out, _ = p.communicate(timeout=a.seconds + 120)
    m = re.search(rb"max_gap_ms ([0-9.]+)", out)
    if not m:
        sys.exit("no max_gap_ms line")
    return float(m.group(1)) / 1e3, ckpt

def native(a):
    out = subprocess.run([a.prog, str(a.size), str(a.seconds)], capture_output=True, check=True).stdout
    return float(re.search(rb"max_gap_ms ([0-9.]+)", out).group(1)) / 1e3

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=6.0)
    a = ap.parse_args()
    a.revive = os.path.join(a.build, "src/cli/revive")
    a.prog = os.path.join(a.build, "bench/transparent/bench_stall_prog")
    os.makedirs(a.dir, exist_ok=True)
    rows = {"native": [], "plain": [], "fork": []}
    ck = {"plain": [], "fork": []}
    for _ in range(a.runs):  # interleaved: the machine's drift hits all three alike
        rows["native"].append(native(a))
        for mode in ("plain", "fork"):
            s, c = one(a, mode == "fork")
            rows[mode].append(s)
            ck[mode].append(c)
    med = {k: statistics.median(v) for k, v in rows.items()}
    mc = {k: statistics.median(v) for k, v in ck.items()}
    print("# %d MB, %d runs (medians); stall = longest gap the program saw; ckpt = `revive checkpoint` wall time"
          % (a.size, a.runs))
    print("native   stall %.3f s   runs %s" % (med["native"], " ".join("%.3f" % x for x in rows["native"])))
    for mode in ("plain", "fork"):
        print("%-8s stall %.3f s   ckpt %.3f s   stall/ckpt %.2f   runs %s" % (
            mode, med[mode], mc[mode], med[mode] / mc[mode], " ".join("%.3f" % x for x in rows[mode])))
    print("fork stall / plain checkpoint time: %.3f (goal <= 0.2); fork stall %.0f ms (goal <= 50 ms)" % (
        med["fork"] / mc["plain"], med["fork"] * 1e3))
    shutil.rmtree(os.path.join(a.dir, "ck"), ignore_errors=True)

if __name__ == "__main__":
    main()
