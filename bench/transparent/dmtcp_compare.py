#!/usr/bin/env python3
"""revive against DMTCP, side by side on the same machine, in the same run (issue 13's figures).

restart  tick_prog fills SIZE MB (incompressible) and ticks every ms into a file. Each tool launches it,
         checkpoints it once, the program is SIGKILLed, the images are evicted from the page cache (fsync +
         POSIX_FADV_DONTNEED), and the restart command is run at wall time T0. The restart time is the
         first tick the restored program wrote after T0, minus T0: command to the program doing work again.
         The physical limit is a cold buffered read of the same tool's image files (read before the
         restart, evicted again). DMTCP runs with --no-gzip (random data; gzip would only cost time).
         revive runs twice per round: eager (`revive restart`: every page read before the program runs)
         and lazy (`revive restart --lazy`: the image is mapped, pages fault in from the file as the
         program touches them). The stop file is created before the restart command, so right after its
         first tick the restored program reads its whole heap, checks every word against the generator
         and prints "end WALL_US MISMATCHES VERIFY_US": the time to the program's end shows what lazy's
         early first tick costs later, and any mismatch fails the run (all three restarts are checked).
stall    stall_prog (longest gap between two 1 MiB reads of its heap, as the program sees it) under
         `revive launch --fork` and under DMTCP built with --enable-forked-checkpointing, one checkpoint
         from outside each; the checkpoint command's wall time too.
Runs alternate between the tools (the machine's drift hits both alike); medians printed with ratios.
DMTCP is not a dependency of revive: build it from source (github.com/dmtcp/dmtcp, `./configure
--prefix=/opt/dmtcp && make && make install`, and a second prefix with --enable-forked-checkpointing).
Usage: dmtcp_compare.py --build BUILD --dir DIR [--dmtcp /opt/dmtcp] [--dmtcp-fork /opt/dmtcp-fork]
                        [--size 1024] [--runs 5] [--what restart,stall]"""
import argparse, glob, os, random, re, shutil, signal, statistics, subprocess, sys, time


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import restart_bench  # its evict(): fsync + POSIX_FADV_DONTNEED of one file


def evict(paths):
    for p in paths:
        restart_bench.evict(p)


def files_under(d):
    return [p for p in glob.glob(os.path.join(d, "**", "*"), recursive=True)
            if os.path.isfile(p) and not os.path.islink(p)]


def cold_read(paths):
    """Buffered read of every file, after eviction: what any restart must at least do."""
    evict(paths)
    buf = bytearray(8 << 20)
    t0 = time.time()
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
    t = time.time() - t0
    evict(paths)
    return t


def wait_ready(proc):
    while True:
        line = proc.stderr.readline().decode(errors="replace")
        if not line:
            sys.exit("program ended before it was ready")
        m = re.match(r"ready (\d+)", line)
        if m:
            return int(m.group(1))


def after(path, t0_us, deadline, kind):
    """First 'tick' (kind=b"tick": its wall time in s) or the 'end' line (kind=b"end": (wall time,
    mismatches, verify s)) written after t0_us, polling the file until deadline. A tool that restores
    the file at its checkpoint-time length writes over what came after; a torn line is skipped."""
    while time.time() < deadline:
        with open(path, "rb") as f:
            for line in f.read().splitlines():
                parts = line.split()
                if len(parts) != 4 or parts[0] != kind:
                    continue
                try:
                    v = [int(x) for x in parts[1:]]
                except ValueError:
                    continue
                if kind == b"tick" and v[1] > t0_us:
                    return v[1] / 1e6
                if kind == b"end" and v[0] > t0_us:
                    return v[0] / 1e6, v[1], v[2] / 1e6
        time.sleep(0.005)
    sys.exit("no %s line after the restart in %s" % (kind.decode(), path))


def first_tick_after(path, t0_us, deadline):
    return after(path, t0_us, deadline, b"tick")


def end_after(path, t0_us, deadline, who):
    t, bad, verify = after(path, t0_us, deadline, b"end")
    if bad:
        sys.exit("%s: the restored program found %d wrong words in its heap (%s)" % (who, bad, path))
    return t, verify


def stop_and_wait(stop, procs, timeout=60):
    open(stop, "w").close()
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()


def revive_restart_once(a, work, lazy=False):
    ck, out, stop = os.path.join(work, "ck"), os.path.join(work, "out.txt"), os.path.join(work, "stop")
    for p in (ck, out, stop):
        shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else (os.path.exists(p) and os.remove(p))
    port = str(random.randint(20000, 40000))
    with open(out, "w") as o:
        launch = subprocess.Popen([a.revive, "launch", "--port", port, "--ckpt-dir", ck, "--",
                                   a.tick, str(a.size), stop], stdout=o, stderr=subprocess.PIPE)
    pid = wait_ready(launch)
    time.sleep(0.3)
    subprocess.run([a.revive, "checkpoint", "--port", port, "--ckpt-dir", ck], check=True, capture_output=True)
    os.kill(pid, signal.SIGKILL)
    launch.wait(timeout=60)
    images = [p for p in files_under(ck) if "/ckpt-" in p]
    raw = cold_read(images)
    port2 = str(random.randint(20000, 40000))
    open(stop, "w").close()  # the restored program ends right after its first tick: see the header
    t0 = time.time()
    with open(out, "a") as o, open(os.path.join(work, "restart_err.txt"), "w") as e:
        rs = subprocess.Popen([a.revive, "restart", "--port", port2] + (["--lazy"] if lazy else []) + [ck],
                              stdout=o, stderr=e)
    t1 = first_tick_after(out, int(t0 * 1e6), t0 + 120)
    t2, verify = end_after(out, int(t0 * 1e6), t0 + 120, "revive" + (" --lazy" if lazy else ""))
    stop_and_wait(stop, [rs])
    stray = [p for p in files_under(ck) if p.endswith(".tmp")]
    if stray:
        print("note: revive left %s after the restarted program ended" % stray, file=sys.stderr)
    return t1 - t0, raw, sum(os.path.getsize(p) for p in images), t2 - t0, verify


def dmtcp_restart_once(a, work):
    d, out, stop = os.path.join(work, "dm"), os.path.join(work, "dm_out.txt"), os.path.join(work, "dm_stop")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for p in (out, stop):
        if os.path.exists(p):
            os.remove(p)
    bin_ = os.path.join(a.dmtcp, "bin")
    port = str(random.randint(20000, 40000))
    with open(out, "w") as o:
        launch = subprocess.Popen([os.path.join(bin_, "dmtcp_launch"), "--new-coordinator", "-p", port,
                                   "--ckptdir", d, "--no-gzip", a.tick, str(a.size), stop],
                                  stdout=o, stderr=subprocess.PIPE)
    pid = wait_ready(launch)  # DMTCP's virtual pid: the program's own getpid()
    time.sleep(0.3)
    subprocess.run([os.path.join(bin_, "dmtcp_command"), "-p", port, "-bc"], check=True, capture_output=True)
    # SIGKILL of the real process: launch exec'd into it (the pid Popen knows), not a graceful dmtcp -k.
    os.kill(launch.pid, signal.SIGKILL)
    launch.wait(timeout=60)
    images = glob.glob(os.path.join(d, "ckpt_*.dmtcp"))
    raw = cold_read(images)
    port2 = str(random.randint(20000, 40000))
    open(stop, "w").close()
    t0 = time.time()
    # DMTCP gives the restored program the restart command's stdout (revive restores the file): both
    # append to the same file, so the first tick is found either way.
    with open(out, "a") as o, open(os.path.join(work, "dm_restart_err.txt"), "w") as e:
        rs = subprocess.Popen([os.path.join(bin_, "dmtcp_restart"), "--new-coordinator", "-p", port2] + images,
                              stdout=o, stderr=e)
    t1 = first_tick_after(out, int(t0 * 1e6), t0 + 120)
    t2, verify = end_after(out, int(t0 * 1e6), t0 + 120, "dmtcp")
    stop_and_wait(stop, [rs])
    # dmtcp_restart may return before its program: wait for the ticks to end (the stop file ends it).
    time.sleep(0.2)
    return t1 - t0, raw, sum(os.path.getsize(p) for p in images), t2 - t0, verify


def stall_revive(a):
    ck = os.path.join(a.dir, "stall_ck")
    shutil.rmtree(ck, ignore_errors=True)
    port = str(random.randint(20000, 40000))
    p = subprocess.Popen([a.revive, "launch", "--port", port, "--ckpt-dir", ck, "--fork", "--", a.stall,
                          str(a.size), str(a.seconds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while not p.stderr.readline().startswith(b"ready"):
        pass
    time.sleep(1.0)
    t0 = time.time()
    subprocess.run([a.revive, "checkpoint", "--port", port, "--ckpt-dir", ck], check=True, capture_output=True)
    ckpt = time.time() - t0
    out, _ = p.communicate(timeout=a.seconds + 120)
    shutil.rmtree(ck, ignore_errors=True)
    return float(re.search(rb"max_gap_ms ([0-9.]+)", out).group(1)) / 1e3, ckpt


def stall_dmtcp(a):
    d = os.path.join(a.dir, "stall_dm")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    bin_ = os.path.join(a.dmtcp_fork, "bin")
    port = str(random.randint(20000, 40000))
    p = subprocess.Popen([os.path.join(bin_, "dmtcp_launch"), "--new-coordinator", "-p", port, "--ckptdir", d,
                          "--no-gzip", a.stall, str(a.size), str(a.seconds)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while not p.stderr.readline().startswith(b"ready"):
        pass
    time.sleep(1.0)
    t0 = time.time()
    subprocess.run([os.path.join(bin_, "dmtcp_command"), "-p", port, "-bc"], check=True, capture_output=True)
    ckpt = time.time() - t0
    out, _ = p.communicate(timeout=a.seconds + 120)
    shutil.rmtree(d, ignore_errors=True)
    return float(re.search(rb"max_gap_ms ([0-9.]+)", out).group(1)) / 1e3, ckpt


def med(v):
    return statistics.median(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--dmtcp", default="/opt/dmtcp")
    ap.add_argument("--dmtcp-fork", default="/opt/dmtcp-fork")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--what", default="restart,stall")
    a = ap.parse_args()
    a.revive = os.path.join(a.build, "src/cli/revive")
    a.tick = os.path.join(a.build, "bench/transparent/bench_tick_prog")
    a.stall = os.path.join(a.build, "bench/transparent/bench_stall_prog")
    os.makedirs(a.dir, exist_ok=True)
    what = a.what.split(",")
    if "restart" in what:
        if not os.path.exists(os.path.join(a.dmtcp, "bin/dmtcp_restart")):
            sys.exit("DMTCP not found under %s (see this script's header)" % a.dmtcp)
        rv, lz, dm = [], [], []
        for _ in range(a.runs):
            rv.append(revive_restart_once(a, a.dir))
            lz.append(revive_restart_once(a, a.dir, lazy=True))
            dm.append(dmtcp_restart_once(a, a.dir))
            print("load %s" % open("/proc/loadavg").read().split()[0], file=sys.stderr)
        print("# cold restart of %d MB, %d runs (medians): restart command -> first tick / -> end of the "
              "restored program (which reads and checks its whole heap right after its first tick)" %
              (a.size, a.runs))
        dm_t, dm_e = med([r[0] for r in dm]), med([r[3] for r in dm])
        for name, rows in (("revive", rv), ("lazy", lz), ("dmtcp", dm)):
            t, raw, size, e = med([r[0] for r in rows]), med([r[1] for r in rows]), rows[0][2], med([r[3] for r in rows])
            print("%-7s first tick %.3f s (/read %.2f, /dmtcp %.2f)   end %.3f s (/read %.2f, /dmtcp %.2f)   "
                  "cold read of its images %.3f s (%.0f MB)   heap check %.3f s   first-tick runs %s   end runs %s" %
                  (name, t, t / raw, t / dm_t, e, e / raw, e / dm_e, raw, size / 1e6,
                   med([r[4] for r in rows]), " ".join("%.3f" % r[0] for r in rows),
                   " ".join("%.3f" % r[3] for r in rows)))
        print("revive / dmtcp first tick: %.2f eager, %.2f lazy (goal <= 0.5)" %
              (med([r[0] for r in rv]) / dm_t, med([r[0] for r in lz]) / dm_t))
    if "stall" in what:
        if not os.path.exists(os.path.join(a.dmtcp_fork, "bin/dmtcp_launch")):
            sys.exit("forked-checkpointing DMTCP not found under %s" % a.dmtcp_fork)
        rv, dm = [], []
        for _ in range(a.runs):
            rv.append(stall_revive(a))
            dm.append(stall_dmtcp(a))
        print("# forked checkpoint of %d MB, %d runs (medians): longest stall the program saw" % (a.size, a.runs))
        for name, rows in (("revive", rv), ("dmtcp", dm)):
            print("%-7s stall %.0f ms   checkpoint command %.3f s   runs %s" % (
                name, med([r[0] for r in rows]) * 1e3, med([r[1] for r in rows]),
                " ".join("%.0f" % (r[0] * 1e3) for r in rows)))
        print("revive / dmtcp stall: %.2f" % (med([r[0] for r in rv]) / med([r[0] for r in dm])))


if __name__ == "__main__":
    main()
