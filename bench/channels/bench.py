#!/usr/bin/env python3
"""Throughput of a TCP client/server pair (tests/channels/progs/tcp_pair.c: the client streams BYTES, the
server checks and echoes them, the client checks the echo) natively and under `revive launch`, runs
interleaved, medians printed with the ratio to the native run (the physical limit on this machine).
With --ckpt-every S, the revive runs also take a checkpoint every S seconds (drain + refill of the pair's
data in flight each time), and the checkpoint times are printed.

  build-X/bench/channels: python3 bench.py --build BUILD-DIR [--bytes N] [--runs R] [--ckpt-every S]"""
import argparse, os, random, shutil, socket, statistics, subprocess, sys, tempfile, time

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def one(prog, nbytes, revive=None, ck=None, ckpt_every=0):
    port = free_port()
    # Inline compression: the engine's parallel compression workers hung in zw_stop at 5ec7dc4.
    env = dict(os.environ, TCP_PAIR_TIMING="1", REVIVE_LOG="0")
    pre = []
    cport = None
    if revive:
        cport = free_port()
        pre = [revive, "launch", "--port", str(cport), "--ckpt-dir", ck, "--"]
    srv = subprocess.Popen(pre + [prog, "server", str(port), str(nbytes)], stdout=subprocess.DEVNULL, env=env)
    time.sleep(0.2)
    cli = subprocess.Popen(pre + [prog, "client", str(port), str(nbytes)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, env=env)
    ckpts = []
    if ckpt_every:
        while cli.poll() is None:
            time.sleep(ckpt_every)
            t = time.time()
            r = subprocess.run([revive, "checkpoint", "--port", str(cport), "--ckpt-dir", ck],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if r.returncode == 0:
                ckpts.append(time.time() - t)
    _, err = cli.communicate()
    srv.wait()
    if cli.returncode or srv.returncode:
        sys.exit("run failed: %s" % err)
    secs = float([l for l in err.splitlines() if l.startswith("stream_seconds")][0].split()[1])
    return nbytes / secs / 1e6, ckpts

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--bytes", type=int, default=400 << 20)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ckpt-every", type=float, default=0)
    a = ap.parse_args()
    prog = os.path.join(a.build, "bench/channels/bench_chan_tcp_pair")
    revive = os.path.join(a.build, "src/cli/revive")
    os.environ["REVIVE_INJECT_LIB"] = os.path.join(a.build, "src/inject/librevive_inject.so")
    os.environ["REVIVE_RESTART_BIN"] = os.path.join(a.build, "src/restart/revive-restart")
    tmp = tempfile.mkdtemp(prefix="bench-chan-")
    native, under, pauses = [], [], []
    for i in range(a.runs):
        native.append(one(prog, a.bytes)[0])
        ck = os.path.join(tmp, "ck%d" % i)
        mbs, ck_times = one(prog, a.bytes, revive, ck, a.ckpt_every)
        under.append(mbs)
        pauses += ck_times
        shutil.rmtree(ck, ignore_errors=True)
        print("run %d: native %.0f MB/s, revive %.0f MB/s" % (i, native[-1], under[-1]), flush=True)
    n, u = statistics.median(native), statistics.median(under)
    print("TCP pair, %d MiB each way, median of %d: native %.0f MB/s, revive %.0f MB/s, ratio %.3f (loss %.1f%%)"
          % (a.bytes >> 20, a.runs, n, u, u / n, 100 * (1 - u / n)))
    if pauses:
        print("checkpoints during the revive runs: %d, median %.3f s (revive checkpoint command, both processes)"
              % (len(pauses), statistics.median(pauses)))
    shutil.rmtree(tmp, ignore_errors=True)

if __name__ == "__main__":
    main()
