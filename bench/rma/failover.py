#!/usr/bin/env python3
"""Time from a rank's SIGKILL to the RMA job working again (issue 11, bench/rma; docs/performance.md).

  python3 bench/rma/failover.py BUILD_DIR [--runs 5] [--modes recovery,default]

Each run is tests/rma/run_kill.py: fft_transpose linked with librevive_rma, 4 Open MPI ranks under `revive
run --interval 0.5`, one random rank SIGKILLed at a random moment after a checkpoint; "working again" is
the job printing an iteration after its relaunch from the last transparent generation (the output is
also checked against an uninterrupted run). Modes: `recovery` (mpirun --enable-recovery --mca
orte_abort_on_non_zero_status 0: the survivors are ended by the library's watcher, docs/rma.md) and
`default` (mpirun ends the job itself). The physical limit measured in the same session: a fresh mpirun
of the same program to its first printed iteration (no relaunch can be faster). Medians; no assertions.
"""
import argparse, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


def fresh_start(build, work):
    """Seconds from starting mpirun to rank 0's first iteration line."""
    prog = os.path.join(work, "fft_plain")
    if not os.path.exists(prog):
        subprocess.run(["mpicc", "-O2", "-o", prog, os.path.join(SRC, "tests/rma/apps/fft_transpose.c")], check=True)
    t0 = time.time()
    p = subprocess.Popen(["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "4", "--mca", "osc", "ucx", prog,
                          "--n", "16", "--iters", "5", "--sleep-ms", "20"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdout.readline()
    t = time.time() - t0
    p.communicate(timeout=60)
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--modes", default="recovery,default")
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    work = tempfile.mkdtemp(prefix="revive-rma-failover-bench-")
    times = os.path.join(work, "times")
    limits = []
    for r in range(a.runs):
        for mode in a.modes.split(","):
            cmd = [sys.executable, os.path.join(SRC, "tests/rma/run_kill.py"), "--revive", b + "/src/cli/revive",
                   "--inject", b + "/src/inject/librevive_inject.so", "--restart", b + "/src/restart/revive-restart",
                   "--lib", b + "/src/rma", "--app", os.path.join(SRC, "tests/rma/apps/fft_transpose.c"),
                   "--workdir", os.path.join(work, "w"), "--mode", mode, "--times", times]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
            print("run %d %s: %s" % (r + 1, mode, (p.stdout.strip().splitlines() or ["?"])[-1]), flush=True)
        limits.append(fresh_start(b, work))
    got = {}
    for line in open(times) if os.path.exists(times) else []:
        m, t = line.split()
        got.setdefault(m, []).append(float(t))
    lim = statistics.median(limits)
    print("fresh mpirun to first iteration (physical limit): median %.2f s over %d" % (lim, len(limits)))
    for m, ts in got.items():
        med = statistics.median(ts)
        print("%-8s kill -> working again: median %.2f s over %d runs (min %.2f, max %.2f), %.1fx the limit" %
              (m, med, len(ts), min(ts), max(ts), med / lim))
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
