#!/usr/bin/env python3
"""Distributed checkpoint/restart benchmark. For each N: launch N memhog processes of MB each under one
coordinator (launch time = until the coordinator lists all N), checkpoint REPS times (wall time of
`revive checkpoint`, coordinator CPU time during it from /proc/PID/stat), then REPS times: SIGKILL all,
`revive restart`, time until all N are reconnected and idle. Each is compared with the same total bytes
written by one process (checkpoint and restart of a single memhog of N*MB) and with the physical limit
measured in the same run: raw write+fsync of the same bytes to the same file system. Medians."""
import argparse, ctypes, json, os, shutil, signal, statistics, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "hosts"))
from harness import *
import random

HZ = os.sysconf("SC_CLK_TCK")

def cpu_seconds(pid):
    f = open("/proc/%d/stat" % pid).read()
    w = f[f.rfind(")") + 2:].split()
    return (int(w[11]) + int(w[12])) / HZ

_libc = ctypes.CDLL(None, use_errno=True)
_libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
SFR_WAIT_BEFORE, SFR_WRITE, SFR_WAIT_AFTER = 1, 2, 4

def raw_write(path, nbytes):
    """The disk's limit for these bytes: a new file written in 1 MiB pieces, streamed like the engine writes
    images (writeback started every 8 MiB, the window before waited for and dropped from the page cache), then
    fsync of the file and its directory. Streaming matters on this VM: a fresh page-cache page costs a host
    fault, so filling GBs of new page cache runs at a third of the disk's speed (src/inject/writer.cpp)."""
    buf = os.urandom(1 << 20)
    win = 8 << 20
    t0 = time.time()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    off = started = dropped = 0
    while off < nbytes:
        off += os.write(fd, buf[:min(nbytes - off, len(buf))])
        if off - started >= win:
            _libc.sync_file_range(fd, started, off - started, SFR_WRITE)
            if started > dropped:
                _libc.sync_file_range(fd, dropped, started - dropped, SFR_WAIT_BEFORE | SFR_WRITE | SFR_WAIT_AFTER)
                os.posix_fadvise(fd, dropped, started - dropped, os.POSIX_FADV_DONTNEED)
                dropped = started
            started = off
    os.fsync(fd)
    os.close(fd)
    dfd = os.open(os.path.dirname(path), os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
    t = time.time() - t0
    os.unlink(path)
    return t

def coord_pid(revive, port, ck, env):
    out = status(revive, port, ck, env).stdout
    for line in out.splitlines():
        if line.startswith("coordinator: pid "):
            return int(line.split()[2].rstrip(","))
    fail("no coordinator pid in status: " + out)

def computation(a, revive, env, n, mb, tag, rng):
    """Returns dict of medians for n processes of mb each."""
    port = free_port(rng)
    wd = os.path.join(a.workdir, tag)
    shutil.rmtree(wd, ignore_errors=True)
    ck = os.path.join(wd, "ck")
    os.makedirs(wd)
    t0 = time.time()
    outs = [os.path.join(wd, "out-%d" % i) for i in range(n)]
    procs = [subprocess.Popen([revive, "launch", "--no-compress", "--port", str(port), "--ckpt-dir", ck, "--",
                               a.memhog, str(mb), "3600"], cwd=wd, stdout=open(outs[i], "wb"),
                              stdin=subprocess.DEVNULL, env=env) for i in range(n)]
    wait_procs(revive, port, ck, env, n, timeout=300, procs=procs)
    launch_s = time.time() - t0
    # The library connects before main runs: wait until every process has filled its memory.
    deadline = time.time() + 300
    while not all(open(o, "rb").read().startswith(b"ready") for o in outs):
        if time.time() > deadline:
            fail("memhog processes did not all print ready")
        time.sleep(0.05)
    cpid = coord_pid(revive, port, ck, env)
    ck_s, ck_cpu = [], []
    for g in range(1, a.reps + 1):
        c0 = cpu_seconds(cpid)
        _, s = checkpoint(revive, port, ck, env, g, n)
        ck_cpu.append(cpu_seconds(cpid) - c0)
        ck_s.append(s)
        shutil.rmtree(os.path.join(ck, "ckpt-%d" % (g - 1)), ignore_errors=True)  # keep disk use bounded
    rs_s = []
    run([revive, "kill", "--port", str(port), "--ckpt-dir", ck], env=env)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for r in range(a.reps):
        coordinator_gone(revive, port, ck, env)
        t0 = time.time()
        rp = subprocess.Popen([revive, "restart", "--port", str(port), ck], cwd=wd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
        wait_procs(revive, port, ck, env, n, timeout=300, procs=[rp])
        rs_s.append(time.time() - t0)
        run([revive, "kill", "--port", str(port), "--ckpt-dir", ck], env=env)
        try:
            rp.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rp.kill()
            rp.wait()
    coordinator_gone(revive, port, ck, env)
    shutil.rmtree(wd, ignore_errors=True)
    return dict(launch=launch_s, ckpt=statistics.median(ck_s), coord_cpu=statistics.median(ck_cpu),
                restart=statistics.median(rs_s))

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--revive", required=True)
    ap.add_argument("--inject", required=True)
    ap.add_argument("--restart", required=True)
    ap.add_argument("--memhog", required=True)
    ap.add_argument("--workdir", default="/tmp/revive-bench-distributed")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sizes", default="2:64,16:64,64:16,128:8", help="N:MB per process, comma-separated")
    a = ap.parse_args()
    revive = os.path.abspath(a.revive)
    a.memhog = os.path.abspath(a.memhog)
    env = clean_env(dict(REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
                         REVIVE_LOG="0"))
    rng = random.Random()
    os.makedirs(a.workdir, exist_ok=True)
    print("| N | MB/proc | total MB | launch s | ckpt s | 1-proc ckpt s | raw write+fsync s | ckpt/raw | "
          "coord CPU s | restart s | 1-proc restart s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for spec in a.sizes.split(","):
        n, mb = (int(x) for x in spec.split(":"))
        multi = computation(a, revive, env, n, mb, "n%d" % n, rng)
        single = computation(a, revive, env, 1, n * mb, "single%d" % n, rng)
        raw = statistics.median(raw_write(os.path.join(a.workdir, "raw"), n * mb << 20) for _ in range(a.reps))
        print("| %d | %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.3f | %.2f | %.2f |" % (
            n, mb, n * mb, multi["launch"], multi["ckpt"], single["ckpt"], raw, multi["ckpt"] / raw,
            multi["coord_cpu"], multi["restart"], single["restart"]), flush=True)

if __name__ == "__main__":
    main()
