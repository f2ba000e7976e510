#!/usr/bin/env python3
"""Overhead of librevive_rma on the RMA applications (issue 11, bench/rma).

  python3 bench/rma/run.py BUILD_DIR [--rounds 5] [--np 4] [--flavours openmpi,mpich] [--apps fft,dht,stencil]

For each MPI and application, runs alternate in one session: the program without the library
(native, the physical limit here), with the library logging only (REVIVE_RMA_CKPT=0), and with logging
plus in-memory checkpoints every --interval seconds. The time is the application's own (MPI_Init return
to MPI_Finalize, printed by --time on stderr), so mpirun's start-up noise stays out; outputs must be
identical to the native run's. Prints medians and ratios to native. Numbers, never assertions.
--lib-before BUILD2 adds a fourth mode, log+ckpt with BUILD2's library (e.g. a build of an earlier commit),
alternated with the others: a change's cost measured in the same session (double buffering, 2026-11-28).
Beside each checkpointing mode's run time, the time spent inside the checkpoints themselves (the library's
REVIVE_RMA_STATS line: slowest rank's sum) and per checkpoint, so the checkpoint cost is seen apart from
the run's noise. MPICH (--flavours mpich) runs through tests/rma/run_app.sh like the apps' tests
(mpiexec.mpich, UCX on loopback only) with librevive_rma_mpich.so.
"""
import argparse, os, re, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))

APPS = {  # sizes chosen for 1-3 s per run on the 2-core VM
    "fft": ["fft_transpose", "--n", "64", "--iters", "300"],
    "dht": ["dht", "--keys", "32768", "--keyspace", "262144", "--iters", "20"],
    "stencil": ["stencil", "--rows", "1024", "--cols", "1024", "--iters", "300"],
}


def run(flavour, out, app, np, env_extra):
    env = dict(os.environ)
    env.update(env_extra)
    cmd = ["bash", os.path.join(SRC, "tests/rma/run_app.sh"), flavour, out, APPS[app][0], str(np)] + APPS[app][1:] + ["--time"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"{flavour} {app}: exit {p.returncode}\n{p.stderr[-2000:]}")
    m = re.search(r"elapsed_s ([0-9.]+)", p.stderr)
    if not m:
        sys.exit(f"{flavour} {app}: no elapsed_s line on stderr\n{p.stderr[-2000:]}")
    ck = re.search(r"revive-rma: (\d+) checkpoints .*?, ([0-9.]+) s in checkpoints", p.stderr)
    return float(m.group(1)), p.stdout, int(ck.group(1)) if ck else 0, float(ck.group(2)) if ck else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--interval", type=float, default=0.25)
    ap.add_argument("--flavours", default="openmpi,mpich")
    ap.add_argument("--apps", default="fft,dht,stencil")
    ap.add_argument("--lib-before", default="")
    a = ap.parse_args()
    out = os.path.join(a.build, "bench-rma-apps")
    subprocess.run(["bash", os.path.join(SRC, "tests/rma/apps/build.sh"), out], check=True, capture_output=True)
    libs = {"openmpi": os.path.join(a.build, "src/rma/librevive_rma.so"),
            "mpich": os.path.join(a.build, "src/rma/librevive_rma_mpich.so")}
    modes = {
        "native": {},
        "log": {"REVIVE_RMA_CKPT": "0", "REVIVE_RMA_STATS": "1"},
        "log+ckpt": {"REVIVE_RMA_INTERVAL": str(a.interval), "REVIVE_RMA_STATS": "1"},
    }
    before = {}
    if a.lib_before:
        modes["before"] = dict(modes["log+ckpt"])
        before = {"openmpi": os.path.join(a.lib_before, "src/rma/librevive_rma.so"),
                  "mpich": os.path.join(a.lib_before, "src/rma/librevive_rma_mpich.so")}
    # in-ckpt: seconds inside checkpoints (slowest rank), and ms per checkpoint, of the same runs.
    print(f"{'mpi':8} {'app':8} {'native s':>9} {'log s':>8} {'ratio':>6} {'ckpt s':>8} {'ratio':>6} {'ckpts':>5}"
          f" {'in-ckpt s':>9} {'ms/ckpt':>7}"
          + (f" {'before s':>8} {'ratio':>6} {'ckpts':>5} {'in-ckpt s':>9} {'ms/ckpt':>7}" if before else ""))
    for fl in a.flavours.split(","):
        if not os.path.exists(libs[fl]) or not os.path.isdir(os.path.join(out, fl)):
            print(f"{fl}: not built, skipped")
            continue
        for app in a.apps.split(","):
            t = {m: [] for m in modes}
            cks = {m: [] for m in modes}
            inck = {m: [] for m in modes}
            ref = None
            for _ in range(a.rounds):
                for m, extra in modes.items():
                    e = dict(extra)
                    if m != "native":
                        e["REVIVE_RMA_PRELOAD"] = before[fl] if m == "before" else libs[fl]
                    secs, stdout, ck, ck_s = run(fl, out, app, a.np, e)
                    if ref is None:
                        ref = stdout
                    elif stdout != ref:
                        sys.exit(f"{fl} {app} {m}: output differs from the native run")
                    t[m].append(secs)
                    cks[m].append(ck)
                    inck[m].append(ck_s)
            med = {m: statistics.median(v) for m, v in t.items()}

            def ckpt_cols(m):
                n, s = statistics.median(cks[m]), statistics.median(inck[m])
                per = statistics.median([x / c * 1e3 for x, c in zip(inck[m], cks[m]) if c])
                return f"{statistics.median(cks[m]):5.0f} {s:9.3f} {per:7.2f}" if n else f"{0:5d} {s:9.3f} {'-':>7}"

            print(f"{fl:8} {app:8} {med['native']:9.3f} {med['log']:8.3f} {med['log']/med['native']:6.3f} "
                  f"{med['log+ckpt']:8.3f} {med['log+ckpt']/med['native']:6.3f} {ckpt_cols('log+ckpt')}"
                  + (f" {med['before']:8.3f} {med['before']/med['native']:6.3f} {ckpt_cols('before')}" if before else ""),
                  flush=True)


if __name__ == "__main__":
    main()
