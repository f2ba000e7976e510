#!/usr/bin/env python3
"""Time of the in-job rebuild of a dead rank's window by its checksum group (issue 11, bench/rma).

  python3 bench/rma/rebuild.py BUILD_DIR [--runs 3] [--sizes 64,128,256] [--group 2]

fft_transpose (n^3 uint64 over 4 Open MPI ranks) with librevive_rma, `--enable-recovery --mca
orte_abort_on_non_zero_status 0`; rank 2 SIGKILLs itself inside its 2nd checkpoint (REVIVE_RMA_TEST_DIE,
before the parity exchange), so the survivors of its group rebuild it as of the 1st over the failure mesh
(src/rma/rank_rebuild.h). The figure is the one the collecting survivor prints (shares computed, sent,
XORed and checked against the recorded XXH3-64). Limit measured in the same run: the same number of bytes
per share through a loopback TCP connection between two processes (the transport alone). Medians; numbers,
never assertions.
"""
import argparse, os, re, socket, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


def rebuild_once(build, out, n, group):
    env = dict(os.environ, REVIVE_RMA_PRELOAD=os.path.join(build, "src/rma/librevive_rma.so"),
               REVIVE_RMA_GROUP=str(group), REVIVE_RMA_INTERVAL="0.05", REVIVE_RMA_TEST_DIE="2:2:0",
               RMA_LAUNCH_ARGS="--enable-recovery --mca orte_abort_on_non_zero_status 0")
    cmd = ["bash", os.path.join(SRC, "tests/rma/run_app.sh"), "openmpi", out, "fft_transpose", "4",
           "--n", str(n), "--iters", "100000"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    m = re.search(r"rebuilt rank 2's window \d+ as of checkpoint \d+ \((\d+) bytes\).* in ([0-9.]+) s: .*verified", p.stderr)
    if not m:
        sys.exit(f"n={n}: no verified rebuild line\n{p.stderr[-2000:]}")
    return int(m.group(1)), float(m.group(2))


def loopback(nbytes):
    """Seconds to move nbytes from one process to another over loopback TCP."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"\x5a" * nbytes)
        c.recv(1)
        os._exit(0)
    conn, _ = srv.accept()
    buf = bytearray(1 << 20)
    t0 = time.monotonic()
    got = 0
    while got < nbytes:
        r = conn.recv_into(buf)
        if r == 0:
            break
        got += r
    dt = time.monotonic() - t0
    conn.send(b"k")
    os.waitpid(pid, 0)
    conn.close()
    srv.close()
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="64,128,256")
    ap.add_argument("--group", type=int, default=2)
    a = ap.parse_args()
    out = os.path.join(a.build, "bench-rma-apps")
    subprocess.run(["bash", os.path.join(SRC, "tests/rma/apps/build.sh"), out], check=True, capture_output=True)
    print(f"{'n':>4} {'window MB':>9} {'rebuild s':>10} {'MB/s':>8} {'loopback s':>10} {'ratio':>6}")
    for n in (int(x) for x in a.sizes.split(",")):
        times, lim, size = [], [], 0
        for _ in range(a.runs):
            size, t = rebuild_once(a.build, out, n, a.group)
            times.append(t)
            lim.append(loopback(size))
        t, l = statistics.median(times), statistics.median(lim)
        print(f"{n:4} {size / 1e6:9.2f} {t:10.4f} {size / 1e6 / t:8.0f} {l:10.4f} {t / l:6.2f}", flush=True)


if __name__ == "__main__":
    main()
