#!/usr/bin/env python3
"""Time from failure to resumed computation under `revive run` (issue 10), against the restore alone.

  failover_bench.py --build BUILD [--procs 4] [--mb 256] [--reps 3] [--workdir DIR]

Job: PROCS copies of bench_run_ticker, each holding MB MiB of random data and appending the wall-clock time
to its tick file every 10 ms (transparent: under `revive launch -n PROCS`, supervised by `revive run`).
Per repetition:
  1. one checkpoint (`revive checkpoint`), then one copy SIGKILLed at T;
  2. failover = (the latest, over the copies, of the first tick after T) - T: detection, teardown, relaunch,
     restore, until every copy works again; the supervisor's log gives the detection+teardown part;
  3. restore alone (the physical limit of a relaunch) = `revive restart` of the same generation on an
     idle machine, from the command to every copy's first tick.
Both read the images the same way (written by the same run moments before: page cache state alike).
Prints medians and the ratio (goal: failover <= 1.5x restore alone).
"""
import argparse, os, re, shutil, signal, statistics, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "hosts"))
from harness import descendants  # the tests' /proc walk (every thread's children)

ap = argparse.ArgumentParser()
ap.add_argument("--build", required=True)
ap.add_argument("--procs", type=int, default=4)
ap.add_argument("--mb", type=int, default=256)
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--workdir", default="/tmp/revive-failover-bench")
ap.add_argument("--app", action="store_true",
                help="application-level: heat2d (examples/) under `revive run --app -- mpiexec -n PROCS`")
a = ap.parse_args()
B = os.path.abspath(a.build)
revive = B + "/src/cli/revive"
ticker = B + "/bench/run/bench_run_ticker"
env = dict(os.environ, REVIVE_INJECT_LIB=B + "/src/inject/librevive_inject.so",
           REVIVE_RESTART_BIN=B + "/src/restart/revive-restart", REVIVE_LOG="0", REVIVE_LOCAL_DIRS="")
for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "LD_PRELOAD"):
    env.pop(k, None)

def ticks(path):
    try:
        return [int(l.split()[0]) for l in open(path).read().splitlines() if l.strip()]
    except (OSError, ValueError, IndexError):
        return []

def first_after(paths, t_ns, timeout):
    """Seconds from t_ns until every file has a tick after it."""
    end = time.time() + timeout
    while time.time() < end:
        firsts = []
        for p in paths:
            after = [t for t in ticks(p) if t > t_ns]
            if not after:
                break
            firsts.append(after[0])
        else:
            return (max(firsts) - t_ns) / 1e9
        time.sleep(0.01)
    sys.exit("no tick after the failure within %d s" % timeout)

def kill_tree(pid):
    for q in descendants(pid):
        try:
            os.kill(q, signal.SIGKILL)
        except ProcessLookupError:
            pass

def one(rep):
    work = os.path.join(a.workdir, "rep%d" % rep)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ck = os.path.join(work, "ck")
    port = 27000 + rep * 10 + (os.getpid() % 7) * 100
    files = [os.path.join(work, "tick-%d" % i) for i in range(a.procs)]
    log = open(os.path.join(work, "run.err"), "wb")
    sup = subprocess.Popen([revive, "run", "--port", str(port), "--ckpt-dir", ck, "--restarts", "1", "-n", str(a.procs),
                            "--", "sh", "-c", 'exec "$0" %d tick-$REVIVE_LAUNCH_INDEX' % a.mb, ticker],
                           cwd=work, stdout=log, stderr=log, env=env)
    t = time.time()
    while not all(ticks(f) for f in files):
        if time.time() - t > 120:
            sys.exit("the job did not start")
        time.sleep(0.05)
    t0 = time.time()
    r = subprocess.run([revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ckpt_s = time.time() - t0
    if r.returncode != 0:
        sys.exit("checkpoint failed: " + r.stderr)
    gen_dir = r.stdout.strip()
    time.sleep(1.0)
    pids = subprocess.run(["pgrep", "-x", "bench_run_ticke"], stdout=subprocess.PIPE, text=True).stdout.split()
    victim = int(pids[rep % len(pids)])
    t_kill = time.time_ns()
    os.kill(victim, signal.SIGKILL)
    failover = first_after(files, t_kill, 120)
    runlog = open(os.path.join(ck, "run.log")).read()
    m1 = re.search(r"\[([0-9.]+) s\] failure 1", runlog)
    m2 = re.search(r"\[([0-9.]+) s\] attempt 2", runlog)
    m0 = re.search(r"\[([0-9.]+) s\] attempt 1", runlog)
    sup.send_signal(signal.SIGTERM)
    sup.wait(timeout=60)
    # Restore alone, same generation, nothing else running.
    t_start = time.time_ns()
    rp = subprocess.Popen([revive, "restart", "--port", str(port + 1), gen_dir], cwd=work, stdout=log, stderr=log, env=env)
    restore = first_after(files, t_start, 120)
    subprocess.run([revive, "kill", "--port", str(port + 1), "--ckpt-dir", ck], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    try:
        rp.wait(timeout=20)
    except subprocess.TimeoutExpired:
        kill_tree(rp.pid)
        rp.wait()
    size = sum(os.path.getsize(os.path.join(gen_dir, f)) for f in os.listdir(gen_dir))
    shutil.rmtree(work, ignore_errors=True)
    return failover, restore, ckpt_s, size, runlog

def versions_read(hb, n, t_ns, timeout):
    """Seconds from t_ns until all n ranks' heartbeat files (rewritten when a version is read) name a version
    read after t_ns: restart_if_needed has returned on every rank, the computation goes on."""
    end = time.time() + timeout
    while time.time() < end:
        done = 0
        for r in range(n):
            p = os.path.join(hb, "rank.%d" % r)
            try:
                st = os.stat(p)
                txt = open(p).read()
            except OSError:
                break
            m = re.search(r"^version (\d+)", txt, re.M)
            if st.st_mtime_ns > t_ns and m and int(m.group(1)) > 0:
                done += 1
        if done == n:
            return max(os.stat(os.path.join(hb, "rank.%d" % r)).st_mtime_ns for r in range(n)) / 1e9 - t_ns / 1e9
        time.sleep(0.005)
    sys.exit("the ranks did not read a version within %d s" % timeout)

def one_app(rep):
    """heat2d, PROCS ranks x MB MiB of grid, a checkpoint every 2 steps; a rank SIGKILLed after the first one."""
    work = os.path.join(a.workdir, "app%d" % rep)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ck, appck = os.path.join(work, "ck"), os.path.join(work, "appck")
    cells = a.procs * a.mb * 2**20 // 8
    nx = 4096
    heat = B + "/examples/heat2d/heat2d"
    mpi = ["mpiexec", "-n", str(a.procs), "--oversubscribe", "--mca", "btl", "self,vader"]
    cmd = mpi + [heat, "--nx", str(nx), "--ny", str(cells // nx), "--steps", "40", "--every", "2", "--quiet",
                 "--dir", appck]
    log = open(os.path.join(work, "run.err"), "wb")
    sup = subprocess.Popen([revive, "run", "--app", "--ckpt-dir", ck, "--restarts", "1", "--"] + cmd, cwd=work,
                           stdout=log, stderr=log, env=env)
    hb = os.path.join(ck, ".revive-heartbeat")
    t = time.time()
    while True:  # the first version written on every rank
        try:
            if all(re.search(r"^version [1-9]", open(os.path.join(hb, "rank.%d" % r)).read(), re.M) for r in range(a.procs)):
                break
        except OSError:
            pass
        if time.time() - t > 300:
            sys.exit("no checkpoint within 300 s")
        time.sleep(0.05)
    time.sleep(0.5)
    pids = subprocess.run(["pgrep", "-x", "heat2d"], stdout=subprocess.PIPE, text=True).stdout.split()
    t_kill = time.time_ns()
    os.kill(int(pids[rep % len(pids)]), signal.SIGKILL)
    failover = versions_read(hb, a.procs, t_kill, 300)
    sup.send_signal(signal.SIGTERM)
    sup.wait(timeout=60)
    # Restore alone: the same command, the same checkpoints, nothing else running.
    hb2 = os.path.join(work, "hb2")
    os.makedirs(hb2)
    t_start = time.time_ns()
    rp = subprocess.Popen(cmd, cwd=work, stdout=log, stderr=log, env=dict(env, REVIVE_HEARTBEAT_DIR=hb2),
                          start_new_session=True)
    restore = versions_read(hb2, a.procs, t_start, 300)
    os.killpg(rp.pid, signal.SIGTERM)
    try:
        rp.wait(timeout=20)
    except subprocess.TimeoutExpired:
        kill_tree(rp.pid)
        rp.wait()
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(appck) for f in fs)
    shutil.rmtree(work, ignore_errors=True)
    return failover, restore, 0.0, size, ""

fo, ro = [], []
for rep in range(a.reps):
    f, r, c, size, runlog = (one_app if a.app else one)(rep)
    fo.append(f)
    ro.append(r)
    print("rep %d: checkpoint %.2f s (%.0f MiB); failover %.3f s; restore alone %.3f s; ratio %.2f" %
          (rep, c, size / 2**20, f, r, f / r), flush=True)
print("%s: %d x %d MiB, median of %d: failover %.3f s, restore alone %.3f s, ratio of medians %.2f, "
      "median of the runs' ratios %.2f (goal <= 1.5)" %
      ("application-level (heat2d)" if a.app else "transparent", a.procs, a.mb, a.reps, statistics.median(fo), statistics.median(ro), statistics.median(fo) / statistics.median(ro),
       statistics.median(f / r for f, r in zip(fo, ro))))
