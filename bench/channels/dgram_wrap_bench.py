#!/usr/bin/env python3
"""What the library's sendto/recvfrom/connect wrappers cost a program (printed, never asserted).

bench/channels/dgram_wrap.c (`bench_chan_dgram_wrap`) times N sendto+recvfrom round trips of a UDP
socket to itself and N connect() calls of a UDP socket, natively and under `revive launch`, alternated
RUNS times; prints the medians and the ratios to native (the limit: the same calls without the library).
The wrappers look up the routes of sockets restarted on other hosts (docs/channels.md); with none (every
run that was not migrated) that is two loads per call.

  python3 bench/channels/dgram_wrap_bench.py --revive BUILD/src/cli/revive --prog BUILD/bench/channels/bench_chan_dgram_wrap [--runs 7] [--n 200000]"""
import argparse, os, shutil, socket, statistics, subprocess, tempfile

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--revive", required=True)
    ap.add_argument("--prog", required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--n", type=int, default=200000)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="dgram-wrap-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("REVIVE_") and k != "LD_PRELOAD"}
    res = {"native": [], "revive launch": []}
    try:
        for r in range(a.runs):
            for mode in res:
                cmd = [a.prog, str(a.n)]
                if mode != "native":
                    with socket.socket() as s:
                        s.bind(("127.0.0.1", 0))
                        port = s.getsockname()[1]
                    cmd = [a.revive, "launch", "--port", str(port), "--ckpt-dir", os.path.join(work, "ck%d" % r), "--"] + cmd
                out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, check=True).stdout.split()
                res[mode].append((float(out[0]), float(out[1])))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    nat = [statistics.median(x[k] for x in res["native"]) for k in (0, 1)]
    for mode, xs in res.items():
        med = [statistics.median(x[k] for x in xs) for k in (0, 1)]
        print("%-14s sendto+recvfrom %7.1f ns (%.3fx native)   UDP connect %7.1f ns (%.3fx native)   [median of %d]"
              % (mode, med[0], med[0] / nat[0], med[1], med[1] / nat[1], len(xs)))

if __name__ == "__main__":
    main()
