#!/usr/bin/env python3
"""Shared memory between processes: what a checkpoint stores and what a restart costs.

NPROC processes share one MIB MiB segment (SysV attached by each, or shared anonymous inherited; random
bytes, every page touched by every process). For each round: `revive launch`, checkpoint once all are
ready, kill, then
  image bytes   the generation's images together; the segment is stored once, so the ideal is MIB MiB
                plus each process's own few hundred KiB (printed: per process beyond the segment)
  restart       `revive restart` from command to exit, images evicted from the page cache first (the
                tree exits as soon as it runs, once the parent has checked one byte per page of the
                segment and each child one byte per 64 pages)
  cold read     the same images read with O_DIRECT into fresh memory, every page touched once: what
                reading those bytes costs at least
Prints medians and the ratios. Usage: run.py BUILD [--mode sysv|anon] [--mib 64] [--procs 4] [--rounds 3]"""
import argparse, glob, os, shutil, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "transparent"))
from restart_bench import evict, raw_read  # page-cache eviction; O_DIRECT read into fresh memory + touch

def cold_read(paths):
    return sum(raw_read(p, direct=True, touch=True) for p in paths)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--mode", default="sysv", choices=["sysv", "anon"])
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    rv = os.path.join(b, "src/cli/revive")
    prog = os.path.join(b, "bench/shm/shm_bench")
    env = dict(os.environ, REVIVE_INJECT_LIB=os.path.join(b, "src/inject/librevive_inject.so"),
               REVIVE_RESTART_BIN=os.path.join(b, "src/restart/revive-restart"), REVIVE_LOG="0")
    port = 20000 + os.getpid() % 10000
    sizes, restarts, reads = [], [], []
    for r in range(a.rounds):
        w = tempfile.mkdtemp(prefix="shm_bench.", dir=os.environ.get("BENCH_DIR", "/var/tmp"))
        ck, run, flags = os.path.join(w, "ck"), os.path.join(w, "run"), os.path.join(w, "flags")
        os.makedirs(run)
        os.makedirs(flags)
        out = open(os.path.join(w, "out"), "wb")
        launch = subprocess.Popen([rv, "launch", "--port", str(port), "--ckpt-dir", ck, "--", prog, a.mode,
                                   str(a.mib), str(a.procs), flags], cwd=run, env=env, stdout=out, stderr=out)
        for _ in range(600):
            if len(glob.glob(os.path.join(flags, "ready-*"))) == a.procs:
                break
            time.sleep(0.05)
        else:
            sys.exit("shm_bench never got ready")
        got = subprocess.run([rv, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=env,
                             capture_output=True, text=True)
        if got.returncode != 0:
            sys.exit("checkpoint failed: " + got.stdout + got.stderr)
        subprocess.run([rv, "kill", "--port", str(port), "--ckpt-dir", ck], env=env, capture_output=True)
        launch.wait()
        images = sorted(glob.glob(os.path.join(ck, "ckpt-1", "*.rimg")))
        if len(images) != a.procs:
            sys.exit("expected %d images, found %d" % (a.procs, len(images)))
        sizes.append(sum(os.path.getsize(p) for p in images))
        out.close()
        open(os.path.join(flags, "stop"), "w").close()
        def wait_gone():
            for _ in range(100):  # the coordinator exits with its last process
                if subprocess.run([rv, "status", "--port", str(port), "--ckpt-dir", ck], env=env,
                                  capture_output=True).returncode != 0:
                    break
                time.sleep(0.05)
        # Twice: the first restart may find the killed tree's pids still held by zombies that nobody has
        # reaped yet (it then waits for them, or makes a pid namespace): not what is measured here.
        for attempt in range(2):
            wait_gone()
            for p in images:
                evict(p)
            t0 = time.time()
            rs = subprocess.run([rv, "restart", "--port", str(port), ck], cwd=run, env=env, capture_output=True,
                                text=True, timeout=120)
            t = time.time() - t0
            oks = open(os.path.join(w, "out")).read().count("ok ")  # the restored tree's stdout is the launch's
            if rs.returncode != 0 or oks != a.procs:  # the files plugin rolls the output back each time
                sys.exit("restart failed (rc %d, %d ok): %s %s" % (rs.returncode, oks, rs.stdout, rs.stderr))
        restarts.append(t)
        reads.append(cold_read(images))
        shutil.rmtree(w)
    seg = a.mib << 20
    size, rst, rd = statistics.median(sizes), statistics.median(restarts), statistics.median(reads)
    print("%d processes sharing a %d MiB %s segment, median of %d rounds:" % (a.procs, a.mib, a.mode, a.rounds))
    print("  image bytes, all processes  %8.1f MiB  = %.2f x the segment (one copy per process would be %.2f x)"
          % (size / 2**20, size / seg, a.procs * 1.0 + (size - seg) / seg))
    print("  per process beyond it      %8.0f KiB" % ((size - seg) / a.procs / 1024))
    print("  restart, command to exit   %8.1f ms" % (rst * 1000))
    print("  cold read of those images  %8.1f ms  (O_DIRECT, every page touched)" % (rd * 1000))
    print("  restart / cold read        %8.2f" % (rst / rd))

if __name__ == "__main__":
    main()
