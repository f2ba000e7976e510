#!/usr/bin/env python3
"""Transparent C/R figures: checkpoint time vs raw write+fsync of the same bytes (same run, same disk),
program pause (normal, fork), restart time (normal, lazy), image size; runtime overhead of the preloaded
engine vs native. Medians of --runs runs. Printed, never asserted."""
import argparse, glob, os, re, shutil, signal, statistics, subprocess, sys, time

def med(xs):
    return statistics.median(xs) if xs else float("nan")

def wait_line(stream, pattern, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = stream.readline()
        if not line:
            return None
        m = re.search(pattern, line.decode(errors="replace"))
        if m:
            return m
    return None

def checkpoint_once(a, size, kind, env_extra):
    ck = os.path.join(a.dir, "ck")
    shutil.rmtree(ck, ignore_errors=True)
    env = dict(os.environ, LD_PRELOAD=a.inject, REVIVE_CKPT_DIR=ck, REVIVE_LOG="1", **env_extra)
    p = subprocess.Popen([a.prog, "hold", str(size), kind], env=env, stderr=subprocess.PIPE,
                         stdout=subprocess.DEVNULL)
    if not wait_line(p.stderr, r"^ready", 300):
        sys.exit("bench program did not get ready")
    os.kill(p.pid, signal.SIGRTMAX - 2)
    m = wait_line(p.stderr, r"checkpoint written: (\S+) quiesce_us=(\d+) pause_us=(\d+) total_us=(\d+)", 600)
    p.kill()
    p.wait()
    if not m:
        sys.exit("no checkpoint line from the engine")
    img = m.group(1)
    return img, int(m.group(3)) / 1e6, int(m.group(4)) / 1e6, os.path.getsize(img)

def restart_once(a, img, lazy):
    env = dict(os.environ, REVIVE_LOG="1")
    t0 = time.time()
    p = subprocess.Popen([a.restart] + (["--lazy"] if lazy else []) + [img], env=env, stderr=subprocess.PIPE,
                         stdout=subprocess.DEVNULL)
    m = wait_line(p.stderr, r"revive: restored", 600)
    t = time.time() - t0
    p.kill()
    p.wait()
    if not m:
        sys.exit("restart did not report 'restored'")
    return t

def raw_once(a, size, kind):
    out = subprocess.run([a.prog, "rawwrite", str(size), kind, os.path.join(a.dir, "raw.bin")],
                         capture_output=True, check=True)
    return float(out.stdout)

def cpu_seconds(cmd, env=None):
    # CPU time (user+sys) of the whole process, the engine's start-up included: on a shared 2-core
    # machine wall time mostly measures the neighbours.
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit("%s failed" % cmd)
    return ru.ru_utime + ru.ru_stime

def overhead(a, mode, n):
    nat, pre = [], []
    env = dict(os.environ, LD_PRELOAD=a.inject, REVIVE_CKPT_DIR=os.path.join(a.dir, "ck"))
    for _ in range(max(a.runs, 7)):  # interleaved, so drift hits both alike
        nat.append(cpu_seconds([a.prog, mode, str(n)]))
        pre.append(cpu_seconds([a.prog, mode, str(n)], env))
    return med(nat), med(pre)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only-overhead", action="store_true")
    ap.add_argument("--no-overhead", action="store_true")
    ap.add_argument("--modes", nargs="+", help="only these checkpoint modes (names as printed)")
    a = ap.parse_args()
    ncpu = os.cpu_count() or 1
    # zstd-0: compressed on the writing thread; zstd-K: K compression workers (REVIVE_COMPRESS_THREADS,
    # default = online CPUs).
    modes = [("normal", {}), ("fork", {"REVIVE_FORK": "1"})] + [
        ("zstd-%d" % k, {"REVIVE_COMPRESS": "1", "REVIVE_COMPRESS_THREADS": str(k)})
        for k in sorted({0, 1, ncpu})]
    a.inject = os.path.join(a.build, "src/inject/librevive_inject.so")
    a.restart = os.path.join(a.build, "src/restart/revive-restart")
    a.prog = os.path.join(a.build, "bench/transparent/bench_transparent_prog")
    os.makedirs(a.dir, exist_ok=True)
    print("# medians of %d runs; disk = %s; images are streamed out of the page cache as written, so restarts read the disk" % (a.runs, a.dir))
    print("# raw_s: write+fsync of the same bytes from memory, measured right before each checkpoint;")
    print("# raw/ck: median of per-run ratios (1.0 = checkpoint as fast as the raw write)")
    print("%-6s %-12s %-10s %9s %9s %9s %7s %10s %9s %9s" % (
        "MB", "data", "mode", "raw_s", "ckpt_s", "pause_s", "raw/ck", "image_MB", "rst_s", "lazy_s"))
    for size in ([] if a.only_overhead else a.sizes):
        for kind in ("random", "compressible"):
            for mode, extra in modes:
                if a.modes and mode not in a.modes:
                    continue
                ck, pause, img_mb, rst, lazy, raws, ratio = [], [], [], [], [], [], []
                for _ in range(a.runs):
                    # The limit is measured next to each checkpoint: the disk is shared and its speed drifts.
                    raw = raw_once(a, size, kind)
                    img, p, t, sz = checkpoint_once(a, size, kind, extra)
                    raws.append(raw), ratio.append(raw / t)
                    ck.append(t), pause.append(p), img_mb.append(sz / 2**20)
                    if mode in ("normal", "zstd-%d" % ncpu):  # restart does not depend on the workers
                        rst.append(restart_once(a, img, False))
                        if mode == "normal":
                            lazy.append(restart_once(a, img, True))
                print("%-6d %-12s %-10s %9.3f %9.3f %9.3f %7.2f %10.1f %9s %9s" % (
                    size, kind, mode, med(raws), med(ck), med(pause), med(ratio), med(img_mb),
                    "%.3f" % med(rst) if rst else "-", "%.3f" % med(lazy) if lazy else "-"), flush=True)
    for mode, n in (() if a.no_overhead else (("compute", 300000000), ("syscall", 1000000))):
        nat, pre = overhead(a, mode, n)
        print("overhead %-8s native %.4f CPU-s preloaded %.4f CPU-s ratio %.4f" % (mode, nat, pre, pre / nat),
              flush=True)
    if not a.no_overhead:
        # Native, no engine: the same syscall loop with and without one idle extra pthread. A second
        # thread sharing the fd table turns off the kernel's single-threaded fd lookup (no refcount in
        # fdget) and glibc's single-thread syscall paths. The engine used to keep such a thread (its
        # checkpoint thread); it now has none between checkpoints, so this is the cost it avoids.
        one, two = [], []
        for _ in range(max(a.runs, 7)):
            one.append(cpu_seconds([a.prog, "syscall", "1000000"]))
            two.append(cpu_seconds([a.prog, "syscall-idle-thread", "1000000"]))
        print("native syscall loop: 1 thread %.4f CPU-s, + 1 idle pthread %.4f CPU-s, ratio %.4f" % (
            med(one), med(two), med(two) / med(one)), flush=True)
    shutil.rmtree(os.path.join(a.dir, "ck"), ignore_errors=True)

if __name__ == "__main__":
    main()
