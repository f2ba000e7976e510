#!/usr/bin/env python3
"""The verbs plugin's costs (issue 12, src/plugins/verbs), on the softverbs device (tests/rdma/softverbs).

  python3 bench/rdma/run.py BUILD_DIR [--rounds 5] [--cr-rounds 3] [--qps 1000] [--mem-mb 1024]
                            [--only pingpong|cr] [--drop-caches] [--workdir DIR] [--keep]

Needs: BUILD_DIR with revive, librevive_inject.so, revive-restart, softverbs (library + softverbsd) and
bench/rdma/verbs_many built (`cmake --build BUILD --target verbs_many revive_cmd revive_inject
revive-restart`), and Debian's ibverbs-utils (ibv_rc_pingpong) on PATH. Starts its own softverbsd (private
$SOFTVERBS_DIR, SOFTVERBS_NO_SPAWN=1), works in a private directory (default /tmp/brd_*, removed at the end).

(a) Runtime overhead on an unmodified program: Debian's ibv_rc_pingpong, server and client on this host
    (loopback TCP for the address exchange), natively and under `revive launch` (one computation: a shell
    running both sides; no checkpoint is taken). Two sizes: latency (-s 64 -n 20000: usec/iter) and
    bandwidth (-s 65536 -n 3000: Mbit/sec). The figures are the program's own timing lines (client side),
    so process start-up and the inject library's initialisation stay out. Native and revive runs alternate
    (ABBA order over the rounds); medians of --rounds, min..max, the ratio revive/native of the medians,
    the median of the per-round ratios (paired) and the ratio of the best runs.
(b) Checkpoint and restart time added by the plugin for a program with many QPs and a large registered
    region: bench/rdma/verbs_many with --qps N (1000) RC QPs in loopback pairs and --mem-mb M (1024) MiB,
    all of it one MR, against its control `verbs_many --no-verbs` (same memory, same loop, no device).
    Per round and kind (alternating): launch under `revive launch`, wait for 20 heartbeat ticks, time
    `revive checkpoint` (command start to return: the image is durable then), SIGKILL every process,
    evict the image from the page cache (fsync + POSIX_FADV_DONTNEED of each image file; with
    --drop-caches also `sync; echo 3 > /proc/sys/vm/drop_caches`, root only), then time from starting
    `revive restart` to the first tick line the restored program prints (its lines carry the wall time
    they were printed at: the files plugin puts the stdout file back as it was at the checkpoint, so
    "new" means printed after the restart started, not "past the old end of the file"). The restored
    program must go on ticking (10 more ticks) before it is killed.
    The time the engine's "revive: restored" line shows up on the program's stderr is noted too (memory and
    the plugins' restore done; the verbs plugin makes its device objects again after it).
    Physical limit, measured in each round while no job runs, with a file of the image's size (the size
    of the generation directory) next to the checkpoint directories (same file system), 8 MiB pieces:
    write() + fsync() with O_DIRECT and buffered into a new file (fresh page cache, slow on this VM, see
    docs/performance.md), cold reads (evicted the same way) into fresh memory, buffered and O_DIRECT +
    one load per page. The faster write and the faster read are the limits for the ratios.
    Prints medians: checkpoint s verbs vs no-verbs (difference = added by the plugin), restart s likewise,
    image sizes, and the ratios checkpoint/raw write and restart/raw read.
Numbers, never assertions: a failed checkpoint or restart is reported (with the coordinator's log and
the program's stderr) and that part is skipped. With the defaults it takes about 75-80 s on the
2-core VM (part a ~30 s, part b ~50 s); --rounds/--cr-rounds/--qps/--mem-mb/--lat-iters/--bw-iters shrink it.
"""
import argparse, mmap, os, random, re, shutil, signal, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "tests", "hosts"))
from harness import clean_env, coordinator_gone, descendants, free_port  # noqa: E402

A = None
ENV = None
RNG = random.Random()
DAEMON = None
T_START = time.time()


def log(msg):
    print("# [%6.1fs] %s" % (time.time() - T_START, msg), file=sys.stderr, flush=True)


def tail(path, n=3000):
    try:
        return open(path, "rb").read()[-n:].decode(errors="replace")
    except OSError:
        return "(%s: missing)" % path


def med(v):
    return statistics.median(v) if v else float("nan")


def spread(v):
    if not v:
        return "-"
    return "%.4g..%.4g (%.1f%%)" % (min(v), max(v), 100.0 * (max(v) - min(v)) / med(v))


# ---------------------------------------------------------------------------------------------- device
def start_daemon():
    global DAEMON
    sock = subprocess.run([A.daemon, "--socket-path"], env=ENV, capture_output=True, text=True).stdout.strip()
    out = open(os.path.join(A.workdir, "softverbsd.out"), "ab")
    DAEMON = subprocess.Popen([A.daemon, "--foreground", "--idle", "0"], stdout=out, stderr=out,
                              stdin=subprocess.DEVNULL, env=ENV)
    for _ in range(200):
        if subprocess.run([A.daemon, "--stats", sock], env=ENV, capture_output=True).returncode == 0:
            return
        time.sleep(0.05)
    sys.exit("softverbsd did not start:\n" + tail(os.path.join(A.workdir, "softverbsd.out")))


def stop_daemon():
    global DAEMON
    if DAEMON:
        DAEMON.terminate()
        try:
            DAEMON.wait(timeout=10)
        except subprocess.TimeoutExpired:
            DAEMON.kill()
            DAEMON.wait()
        DAEMON = None


def kill_tree(root, keep_root=False):
    """SIGSTOP then SIGKILL root's descendants (and root unless keep_root)."""
    pids = [p for p in descendants(root) if not (keep_root and p == root)]
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass


# ------------------------------------------------------------------------------------- (a) pingpong
LINE_BW = re.compile(r"^\d+ bytes in [0-9.]+ seconds = ([0-9.]+) Mbit/sec", re.M)
LINE_LAT = re.compile(r"^\d+ iters in [0-9.]+ seconds = ([0-9.]+) usec/iter", re.M)


def pingpong_once(mode, opts, n):
    d = tempfile.mkdtemp(prefix="pp-", dir=A.workdir)
    port = free_port(RNG)
    pp = "%s %s -p %d -n %d" % (A.pingpong, opts, port, n)
    hexport = "%04X" % port
    # the client connects once the server listens (a state 0A line for the port in /proc/net/tcp*)
    script = ("%s > srv.out 2> srv.err & for i in $(seq 600); do grep -qi ':%s 00000000000000000000000000000000:0000 0A\\|:%s 00000000:0000 0A' "
              "/proc/net/tcp /proc/net/tcp6 && break; sleep 0.01; done; %s 127.0.0.1 > cli.out 2> cli.err; c=$?; wait $!; s=$?; "
              "echo \"server $s client $c\" > status.out" % (pp, hexport, hexport, pp))
    cmd = ["bash", "-c", script]
    if mode == "revive":
        cmd = [A.revive, "launch", "--port", str(free_port(RNG)), "--ckpt-dir", os.path.join(d, "ck"), "--"] + cmd
    p = subprocess.run(cmd, cwd=d, env=ENV, stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    st = open(os.path.join(d, "status.out")).read().strip() if os.path.exists(os.path.join(d, "status.out")) else "?"
    cli = open(os.path.join(d, "cli.out")).read() if os.path.exists(os.path.join(d, "cli.out")) else ""
    bw, lat = LINE_BW.search(cli), LINE_LAT.search(cli)
    if p.returncode != 0 or st != "server 0 client 0" or not bw or not lat:
        print("# pingpong %s %s failed: exit %d, %s\n%s\n%s\n%s" % (mode, opts, p.returncode, st, p.stderr.decode(errors="replace")[-2000:],
              tail(os.path.join(d, "cli.err")), tail(os.path.join(d, "srv.err"))), flush=True)
        shutil.rmtree(d, ignore_errors=True)
        return None
    shutil.rmtree(d, ignore_errors=True)
    return float(lat.group(1)), float(bw.group(1))


def part_pingpong():
    tests = [("latency", "-s 64", A.lat_iters, 0, "usec/iter"), ("bandwidth", "-s 65536", A.bw_iters, 1, "Mbit/sec")]
    res = {(t[0], m): [] for t in tests for m in ("native", "revive")}
    for r in range(A.rounds):
        order = ("native", "revive") if r % 2 == 0 else ("revive", "native")
        for name, opts, n, _, _ in tests:
            for m in order:
                x = pingpong_once(m, opts, n)
                if x:
                    res[(name, m)].append((r,) + x)
        log("pingpong round %d/%d done" % (r + 1, A.rounds))
    print("(a) runtime overhead on Debian's ibv_rc_pingpong (server + client on this host, softverbs), "
          "the program's own figures (client side), medians of %d alternated rounds" % A.rounds)
    print("%-10s %-18s %9s %9s %8s %9s %8s %8s   %-26s %-26s" % ("test", "options", "native", "revive", "rev/nat",
                                                                 "overhead", "paired", "best", "native min..max (spread)",
                                                                 "revive min..max (spread)"))
    for name, opts, n, which, unit in tests:
        idx = which + 1  # res rows: (round, usec/iter, Mbit/sec)
        nat = [x[idx] for x in res[(name, "native")]]
        rev = [x[idx] for x in res[(name, "revive")]]
        byr = {x[0]: x[idx] for x in res[(name, "native")]}
        paired = med([x[idx] / byr[x[0]] for x in res[(name, "revive")] if x[0] in byr])
        if not nat or not rev:
            print("%-10s %-22s no result (native %d runs, revive %d runs)" % (name, opts, len(nat), len(rev)))
            continue
        ratio = med(rev) / med(nat)
        over = (ratio - 1) if which == 0 else (1 / ratio - 1)  # time per iteration up, or bandwidth down
        best = min(rev) / min(nat) if which == 0 else max(rev) / max(nat)  # the least disturbed run of each
        print("%-10s %-18s %9.2f %9.2f %8.4f %8.2f%% %8.4f %8.4f   %-26s %-26s [%s]" % (
            name, "%s -n %d" % (opts, n), med(nat), med(rev), ratio, 100 * over, paired, best, spread(nat), spread(rev),
            unit))
    print("  rev/nat = ratio of the medians; overhead: latency = rev/nat - 1 (usec/iter), bandwidth = nat/rev - 1 "
          "(Mbit/sec), goal <= 2 %%;\n  paired = median over rounds of that round's revive/native; best = revive/native of "
          "the best run of each (min usec/iter, max Mbit/sec);\n  usec/iter of the "
          "bandwidth runs: native %.2f, revive %.2f"
          % (med([x[1] for x in res[("bandwidth", "native")]]), med([x[1] for x in res[("bandwidth", "revive")]])),
          flush=True)


# ------------------------------------------------------------------------------------- (b) C/R time
TICK = re.compile(rb"^tick (\d+) ([0-9.]+)$", re.M)


def ticks(path):
    try:
        return [(int(k), float(t)) for k, t in TICK.findall(open(path, "rb").read())]
    except OSError:
        return []


def evict(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    if A.drop_caches:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")


def files_under(d):
    return [os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs]


def raw_write_read(size):
    """The physical limit, in a file of `size` bytes next to the checkpoint directories (same file system),
    8 MiB pieces from memory: write + fsync with O_DIRECT and buffered into a new file (fresh page cache,
    slow on this VM: docs/performance.md), then cold reads (evicted first) into fresh memory, buffered and
    O_DIRECT followed by one load per page. Returns dict(w_direct, w_buffered, r_buffered, r_direct) in s."""
    path = os.path.join(A.workdir, "raw.bin")
    piece = 8 << 20
    size = (size + 4095) // 4096 * 4096
    src = mmap.mmap(-1, piece)  # page aligned, as O_DIRECT wants
    src.write(os.urandom(piece))
    res = {}
    for name, flags in (("w_direct", os.O_DIRECT), ("w_buffered", 0)):
        if os.path.exists(path):
            os.unlink(path)
        t0 = time.time()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | flags, 0o600)
        left = size
        while left > 0:
            n = min(piece, left)
            left -= os.write(fd, src if n == piece else memoryview(src)[:n])
        os.fsync(fd)
        os.close(fd)
        res[name] = time.time() - t0
    src.close()
    for name, flags in (("r_buffered", 0), ("r_direct", os.O_DIRECT)):
        evict([path])
        buf = mmap.mmap(-1, size)  # fresh, not faulted in (the restored memory is new too)
        view = memoryview(buf)
        t0 = time.time()
        fd = os.open(path, os.O_RDONLY | flags)
        off = 0
        while off < size:
            got = os.preadv(fd, [view[off:off + min(piece, size - off)]], off)
            if got <= 0:
                break
            off += got
        if flags:
            view[::4096].tobytes()  # the CPU's first touch of pages the device wrote (a host fault here)
        os.close(fd)
        res[name] = time.time() - t0
        view.release()
        buf.close()
    os.unlink(path)
    return res


def cr_fail(kind, what, rd, ck):
    print("# %s: %s\n----- %s/coordinator.log (tail)\n%s\n----- program stderr (tail)\n%s\n----- restart log (tail)\n%s" % (
        kind, what, ck, tail(os.path.join(ck, "coordinator.log")), tail(os.path.join(rd, "stderr")),
        tail(os.path.join(os.path.dirname(rd), "restart.log"))), flush=True)


def wait_ticks(path, n, proc, t_after, timeout):
    """Until path has n tick lines printed at or after t_after (wall time); None if proc ended or timed out."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        new = [t for t in ticks(path) if t[1] >= t_after]
        if len(new) >= n:
            return new
        if proc.poll() is not None:
            return None
        time.sleep(0.005)
    return None


def cr_once(kind, r):
    """One launch, checkpoint, kill, restart of verbs_many (kind verbs or no-verbs).
    Returns dict(ckpt=s, restart=s, image=bytes) or None."""
    base = os.path.join(A.workdir, "cr-%s-%d" % (kind, r))
    rd, ck = os.path.join(base, "run"), os.path.join(base, "ck")
    os.makedirs(rd)
    out_path = os.path.join(rd, "stdout")
    port = free_port(RNG)
    argv = [A.verbs_many, "--qps", str(A.qps), "--mem-mb", str(A.mem_mb), "--seconds", "3600"]
    if kind == "no-verbs":
        argv.append("--no-verbs")
    t_launch = time.time()
    # O_APPEND: the restored process appends too (its descriptor's flags come back)
    job = subprocess.Popen([A.revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--"] + argv, cwd=rd,
                           stdout=open(out_path, "ab"), stderr=open(os.path.join(rd, "stderr"), "ab"),
                           stdin=subprocess.DEVNULL, env=ENV, start_new_session=True)
    restarted = False
    try:
        if not wait_ticks(out_path, 20, job, t_launch, 300):
            cr_fail(kind, "the launched program did not tick (exit %s)" % job.poll(), rd, ck)
            return None
        t0 = time.time()
        c = subprocess.run([A.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=ENV,
                           capture_output=True, text=True, timeout=600)
        t_ck = time.time() - t0
        if c.returncode != 0:
            cr_fail(kind, "revive checkpoint exited %d after %.2f s: %s %s" % (c.returncode, t_ck, c.stdout.strip(),
                                                                                c.stderr.strip()), rd, ck)
            return None
        gen = c.stdout.strip()
        image = sum(os.path.getsize(f) for f in files_under(gen))
        kill_tree(job.pid)
        job.wait(timeout=60)
        if not coordinator_gone(A.revive, port, ck, ENV, timeout=30):
            cr_fail(kind, "the coordinator did not exit after the kill", rd, ck)
            return None
        evict(files_under(gen))
        rlog = open(os.path.join(base, "restart.log"), "ab")
        t0 = time.time()
        job = subprocess.Popen([A.revive, "restart", "--port", str(port), ck], cwd=rd, stdout=rlog, stderr=rlog,
                               stdin=subprocess.DEVNULL, env=ENV, start_new_session=True)
        restarted = True
        # first: the engine's "revive: restored" line on the program's stderr (memory and plugins' restore
        # done; the verbs plugin makes its objects again after it), then the program's first tick
        t_restored, new, deadline = None, None, time.time() + 600
        while time.time() < deadline:
            if t_restored is None and b"revive: restored" in open(os.path.join(rd, "stderr"), "rb").read():
                t_restored = time.time() - t0
            new = [t for t in ticks(out_path) if t[1] >= t0]
            if new or job.poll() is not None:
                break
            time.sleep(0.003)
        t_seen = time.time() - t0
        if not new:
            cr_fail(kind, "the restored program printed no tick (revive restart exit %s)" % job.poll(), rd, ck)
            return None
        t_rst = new[0][1] - t0  # the program's own time of its first tick after the restart
        if t_restored is None:
            t_restored = float("nan")
        if not wait_ticks(out_path, 11, job, t0, 120):
            cr_fail(kind, "the restored program stopped ticking (revive restart exit %s)" % job.poll(), rd, ck)
            return None
        res = dict(ckpt=t_ck, restart=t_rst, seen=t_seen, restored=t_restored, image=image)
        log("%s round %d: checkpoint %.3f s, restart %.3f s (\"restored\" at %.3f s, watcher saw the tick at %.3f s), "
            "image %.1f MiB, first tick after restart: %d" % (kind, r, t_ck, t_rst, t_restored, t_seen, image / 2**20,
                                                              new[0][0]))
        return res
    finally:
        # the restored process is a child of `revive restart`, which reaps it and exits with its status
        kill_tree(job.pid, keep_root=restarted)
        try:
            job.wait(timeout=20)
        except subprocess.TimeoutExpired:
            kill_tree(job.pid)
            job.wait()
        coordinator_gone(A.revive, port, ck, ENV, timeout=30)
        if not A.keep:
            shutil.rmtree(base, ignore_errors=True)


def part_cr():
    kinds = ("verbs", "no-verbs")
    res = {k: [] for k in kinds}
    raw = []
    for r in range(A.cr_rounds):
        order = kinds if r % 2 == 0 else kinds[::-1]
        for k in order:
            x = cr_once(k, r)
            if x:
                res[k].append(x)
        last = (res["verbs"] or res["no-verbs"] or [None])[-1]
        if last:
            raw.append(raw_write_read(last["image"]))
            log("raw round %d, %.1f MiB: write+fsync O_DIRECT %.3f s, buffered new file %.3f s; cold read buffered "
                "%.3f s, O_DIRECT+touch %.3f s" % (r, last["image"] / 2**20, raw[-1]["w_direct"], raw[-1]["w_buffered"],
                                                    raw[-1]["r_buffered"], raw[-1]["r_direct"]))
    print()
    print("(b) checkpoint and restart of verbs_many: --qps %d RC QPs (loopback pairs, one CQ) and --mem-mb %d MiB "
          "registered as one MR, vs --no-verbs (same memory, same loop, no device); medians of %d rounds"
          % (A.qps, A.mem_mb, A.cr_rounds))
    print("  ckpt = `revive checkpoint` start to return (image durable); restart = `revive restart` start to the "
          "restored program's first tick (its own wall-clock stamp);\n  restored = the engine's \"revive: restored\" "
          "line seen on the program's stderr (memory and plugin restore done, before the verbs objects are made again);\n"
          "  image evicted from the page cache before each restart (fsync + POSIX_FADV_DONTNEED%s)"
          % (" + drop_caches" if A.drop_caches else ""))
    if not res["verbs"] or not res["no-verbs"]:
        print("  no result for %s: see the failure above" % " and ".join(k for k in kinds if not res[k]), flush=True)
    fields = ("ckpt", "restart", "restored", "seen", "image")
    g = {k: {f: [x[f] for x in res[k]] for f in fields} for k in kinds}
    m = {k: {f: med(v) for f, v in g[k].items()} for k in kinds}
    print("%-9s %4s %8s %-24s %9s %-24s %9s %10s %9s" % ("kind", "runs", "ckpt s", "  min..max (spread)", "restart s",
                                                         "  min..max (spread)", "restored", "image MiB", "ckpt MB/s"))
    for k in kinds:
        if not res[k]:
            print("%-9s %4d  (failed)" % (k, 0))
            continue
        print("%-9s %4d %8.3f %-24s %9.3f %-24s %9.3f %10.1f %9.0f" % (
            k, len(res[k]), m[k]["ckpt"], "  " + spread(g[k]["ckpt"]), m[k]["restart"], "  " + spread(g[k]["restart"]),
            m[k]["restored"], m[k]["image"] / 2**20, m[k]["image"] / 1e6 / m[k]["ckpt"]))
    if res["verbs"] and res["no-verbs"]:
        v, n = m["verbs"], m["no-verbs"]
        print("added by the plugin (verbs - no-verbs): checkpoint %+.3f s (x%.3f), restart %+.3f s (x%.3f), "
              "of which after \"restored\" %+.3f s; image %+.2f MiB"
              % (v["ckpt"] - n["ckpt"], v["ckpt"] / n["ckpt"], v["restart"] - n["restart"], v["restart"] / n["restart"],
                 (v["restart"] - v["restored"]) - (n["restart"] - n["restored"]), (v["image"] - n["image"]) / 2**20))
    if raw:
        rm = {f: med([x[f] for x in raw]) for f in raw[0]}
        sz = med(g["verbs"]["image"] or g["no-verbs"]["image"])
        print("raw limit, %d rounds, a file of the image's size (%.1f MiB) on the same file system, 8 MiB pieces:" % (len(raw), sz / 2**20))
        for f, what in (("w_direct", "write+fsync, O_DIRECT          "), ("w_buffered", "write+fsync, buffered, new file"),
                        ("r_buffered", "cold read, buffered            "), ("r_direct", "cold read, O_DIRECT + touch    ")):
            print("  %s %8.3f s  %6.0f MB/s   %s" % (what, rm[f], sz / 1e6 / rm[f], spread([x[f] for x in raw])))
        rw, rr = min(rm["w_direct"], rm["w_buffered"]), min(rm["r_buffered"], rm["r_direct"])
        print("ratios to the limit (the faster raw write %.3f s, the faster raw read %.3f s):" % (rw, rr))
        for k in kinds:
            if res[k]:
                print("  %-9s ckpt/raw_write %.3f   restart/raw_read %.3f   restored/raw_read %.3f"
                      % (k, m[k]["ckpt"] / rw, m[k]["restart"] / rr, m[k]["restored"] / rr))
    sys.stdout.flush()


def main():
    global A, ENV
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=5, help="(a): alternated native/revive rounds")
    ap.add_argument("--cr-rounds", type=int, default=3, help="(b): rounds of verbs/no-verbs checkpoint+restart")
    ap.add_argument("--lat-iters", type=int, default=20000)
    ap.add_argument("--bw-iters", type=int, default=3000)
    ap.add_argument("--qps", type=int, default=1000)
    ap.add_argument("--mem-mb", type=int, default=1024)
    ap.add_argument("--only", choices=["pingpong", "cr"])
    ap.add_argument("--drop-caches", action="store_true", help="also echo 3 > /proc/sys/vm/drop_caches (root) "
                    "before each restart and raw read")
    ap.add_argument("--workdir", help="default: a new /tmp/brd_* (removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (and each round's images)")
    ap.add_argument("--seed", type=int)
    A = ap.parse_args()
    b = os.path.abspath(A.build)
    A.revive = os.path.join(b, "src/cli/revive")
    A.inject = os.path.join(b, "src/inject/librevive_inject.so")
    A.restart = os.path.join(b, "src/restart/revive-restart")
    A.svlib = os.path.join(b, "tests/rdma/softverbs/lib")
    A.daemon = os.path.join(A.svlib, "softverbsd")
    A.verbs_many = os.path.join(b, "bench/rdma/verbs_many")
    A.pingpong = shutil.which("ibv_rc_pingpong") or "/usr/bin/ibv_rc_pingpong"
    for p in (A.revive, A.inject, A.restart, A.daemon, os.path.join(A.svlib, "libibverbs.so.1"), A.pingpong) + \
            ((A.verbs_many,) if A.only != "pingpong" else ()):
        if not os.path.exists(p):
            sys.exit("missing %s (build it first; see the header of %s)" % (p, __file__))
    if A.drop_caches and os.geteuid() != 0:
        sys.exit("--drop-caches needs root")
    RNG.seed(A.seed)
    made = not A.workdir
    A.workdir = os.path.abspath(A.workdir) if A.workdir else tempfile.mkdtemp(prefix="brd_", dir="/tmp")
    os.makedirs(os.path.join(A.workdir, "reg"), exist_ok=True)
    ENV = clean_env(dict(REVIVE_INJECT_LIB=A.inject, REVIVE_RESTART_BIN=A.restart))
    ENV["LD_LIBRARY_PATH"] = A.svlib + (":" + ENV["LD_LIBRARY_PATH"] if ENV.get("LD_LIBRARY_PATH") else "")
    ENV["SOFTVERBS_DIR"] = os.path.join(A.workdir, "reg")  # private daemon socket and LID registry
    ENV["SOFTVERBS_NO_SPAWN"] = "1"  # the device is our daemon, never a child of a job
    print("# bench/rdma: %s, %d CPUs, work directory %s (%s)" % (b, os.cpu_count(), A.workdir,
          subprocess.run(["df", "-h", "--output=source,fstype,avail", A.workdir], capture_output=True, text=True)
          .stdout.splitlines()[-1].strip()), flush=True)
    try:
        start_daemon()
        if A.only != "cr":
            part_pingpong()
        if A.only != "pingpong":
            part_cr()
    finally:
        stop_daemon()
        if made and not A.keep:
            shutil.rmtree(A.workdir, ignore_errors=True)
    print("# total %.1f s" % (time.time() - T_START), flush=True)


if __name__ == "__main__":
    main()
