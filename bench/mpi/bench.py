#!/usr/bin/env python3
"""MPI checkpoint/restart benchmark (issue 7), for Open MPI and MPICH, whole jobs under `revive launch --
mpiexec ...`. Every figure is printed with its physical limit measured in the same run; medians of --reps.
  overhead:   8-byte ping-pong latency, 1 MiB bandwidth, 8-byte allreduce and a stencil's time per step,
              under revive against the same binary run natively (goal <= 5 %, stencil <= 1 %);
  latency:    `revive checkpoint` of a 2-rank ring (goal <= 0.3 s) and --tight checkpoints back to back
              while it communicates (goal: 0 failures);
  bulk:       --ranks ranks x --mb MiB each: checkpoint time against raw write+fsync of the same bytes
              (goal <= 1.2x), image bytes per rank beyond the data (goal <= 2 MB), restart time from the
              command to the program ticking again against a cold read of the images (goal <= 1.2x)."""
import argparse, glob, importlib.util, os, re, shutil, signal, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("distbench", os.path.join(HERE, "..", "distributed", "bench.py"))
distbench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(distbench)
raw_write = distbench.raw_write  # the disk's limit, streamed like the engine writes images
descendants = distbench.descendants  # tests/hosts/harness.py, through distbench's import

MPIS = {"openmpi": ("mpicc", "mpiexec"), "mpich": ("mpicc.mpich", "mpiexec.mpich")}

def med(xs):
    return statistics.median(xs) if xs else float("nan")

def value(out, key):
    m = re.search(r"^%s (\S+)" % key, out, re.M)
    if not m:
        raise RuntimeError("no %s in output: %s" % (key, out[-500:]))
    return float(m.group(1))

class Job:
    def __init__(self, a, mpi, tag):
        self.a, self.mpi = a, mpi
        self.wd = os.path.join(a.workdir, mpi, tag)
        shutil.rmtree(self.wd, ignore_errors=True)
        os.makedirs(self.wd)
        self.ck = os.path.join(self.wd, "ck")
        self.port = str(a.port)
        self.env = dict(os.environ, REVIVE_LOG="0", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                        OMPI_MCA_rmaps_base_oversubscribe="1")

    def revive(self, *args, **kw):
        return subprocess.run([self.a.revive, *args], env=self.env, capture_output=True, text=True, **kw)

    def launch(self, argv, out):
        return subprocess.Popen([self.a.revive, "launch", "--port", self.port, "--ckpt-dir", self.ck, "--", *argv],
                                cwd=self.wd, env=self.env, stdout=open(out, "w"), stderr=subprocess.STDOUT,
                                start_new_session=True)

    def checkpoint(self):
        t0 = time.time()
        r = self.revive("checkpoint", "--port", self.port, "--ckpt-dir", self.ck, timeout=600)
        return time.time() - t0, r

    def kill_all(self, p):
        pids = descendants(p.pid)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait()
        time.sleep(0.3)
        # The killed processes' pids are free once init reaps them; the restart recreates them. This
        # sandbox's init (process_api) reaps orphans only every ~1.7 s (a real init does it at once), and a
        # restart started before would measure that wait: it does not start before the pids are free.
        deadline = time.time() + 10
        while time.time() < deadline and any(os.path.exists("/proc/%d" % q) for q in pids):
            time.sleep(0.005)

def one_line(text):
    """A failure's text inside one table row (a row cut by a newline was lost to `tail` once)."""
    return " / ".join(l for l in text.splitlines() if l.strip())

def wait_for(path, pattern, timeout, after=0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            text = open(path).read()[after:]
            if re.search(pattern, text, re.M):
                return True
        except OSError:
            pass
        time.sleep(0.01)
    return False

def overhead(a, mpi, exe, mpx):
    kernels = [("pingpong", ["pingpong", "20000"], "pingpong_us", "latency 8 B (us)"),
               ("bw", ["bw", "300"], "bw_mbs", "bandwidth 1 MiB (MB/s)"),
               ("allreduce", ["allreduce", "20000"], "allreduce_us", "allreduce 8 B (us)"),
               ("stencil", ["stencil", "400", "200000"], "step_us", "stencil step (us)")]
    for name, args, key, label in kernels:
        nat, rev = [], []
        for rep in range(a.reps):
            argv = [mpx, "-n", "2", exe, *args]
            r = subprocess.run(argv, capture_output=True, text=True, env=Job(a, mpi, "nat").env, timeout=300)
            nat.append(value(r.stdout, key))
            j = Job(a, mpi, "ovh-%s-%d" % (name, rep))
            out = os.path.join(j.wd, "out")
            p = j.launch(argv, out)
            if p.wait(timeout=300) != 0:
                print("| %s | %s | under revive failed: %s |" % (mpi, label, open(out).read()[-300:]))
                break
            rev.append(value(open(out).read(), key))
        if rev:
            ratio = med(rev) / med(nat) if key != "bw_mbs" else med(nat) / med(rev)
            print("| %s | %s | native %.3f | revive %.3f | cost x%.3f |" % (mpi, label, med(nat), med(rev), ratio),
                  flush=True)

def latency(a, mpi, exe, mpx):
    j = Job(a, mpi, "latency")
    out = os.path.join(j.wd, "out")
    p = j.launch([mpx, "-n", "2", exe, "mem", "1", "3600"], out)
    if not wait_for(out, r"^tick 5$", 120):
        print("| %s | ring did not start: %s |" % (mpi, one_line(open(out).read()[-300:])))
        j.kill_all(p)
        return
    times, fails, errors = [], 0, []
    for i in range(a.reps + a.tight):
        t, r = j.checkpoint()
        if r.returncode != 0:
            fails += 1
            errors.append(r.stderr.strip()[-200:])
        elif i < a.reps:
            times.append(t)
    alive = p.poll() is None
    j.kill_all(p)
    print("| %s | 2-rank ring: checkpoint %.3f s (median of %d) | %d back-to-back: %d failed%s | job %s |" %
          (mpi, med(times), len(times), a.reps + a.tight, fails, ("; " + errors[0]) if errors else "",
           "alive" if alive else "DIED"), flush=True)

def bulk(a, mpi, exe, mpx):
    j = Job(a, mpi, "bulk")
    out = os.path.join(j.wd, "out")
    p = j.launch([mpx, "-n", str(a.ranks), exe, "mem", str(a.mb), "3600"], out)
    if not wait_for(out, r"^tick 3$", 600):
        print("| %s | bulk job did not start: %s |" % (mpi, one_line(open(out).read()[-300:])))
        j.kill_all(p)
        return
    ck_t, raw_t, restart_t, read_t = [], [], [], []
    per_rank_extra = []
    for rep in range(a.reps):
        t, r = j.checkpoint()
        if r.returncode != 0:
            print("| %s | bulk checkpoint failed: %s |" % (mpi, one_line(r.stderr.strip()[-300:])))
            j.kill_all(p)
            return
        gen = r.stdout.strip()
        images = glob.glob(os.path.join(gen, "*.rimg"))
        nbytes = sum(os.path.getsize(f) for f in images)
        ranks = [f for f in images if os.path.basename(f).startswith(os.path.basename(exe))]
        per_rank_extra += [os.path.getsize(f) - (a.mb << 20) for f in ranks]
        ck_t.append(t)
        raw_t.append(raw_write(os.path.join(j.wd, "raw.bin"), nbytes))
    # Restart: from the command to the program ticking again, images cold; the limit: a cold read of them.
    for rep in range(a.reps):
        j.kill_all(p)
        subprocess.run(["sync"])
        open("/proc/sys/vm/drop_caches", "w").write("3\n")
        t0 = time.time()
        for f in images:
            with open(f, "rb", buffering=0) as fh:
                while fh.read(8 << 20):
                    pass
        read_t.append(time.time() - t0)
        subprocess.run(["sync"])
        open("/proc/sys/vm/drop_caches", "w").write("3\n")
        size = os.path.getsize(out)
        t0 = time.time()
        p = subprocess.Popen([a.revive, "restart", "--port", j.port, j.ck], cwd=j.wd, env=j.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        # mpiexec's stdout is the launch's file again (reopened at its checkpoint offset, contents and mtime
        # put back by the files plugin): the job works again when it writes its next tick there.
        if not wait_until_grows(out, t0, 300):
            print("| %s | restart did not resume |" % mpi)
            break
        restart_t.append(time.time() - t0)
    j.kill_all(p)
    total = nbytes
    print("| %s | %d ranks x %d MiB | checkpoint %.2f s | raw write+fsync %.2f s | x%.2f | image beyond data "
          "%.2f MB/rank | restart %.2f s | cold read %.2f s | x%.2f | %.0f MB |" %
          (mpi, a.ranks, a.mb, med(ck_t), med(raw_t), med(ck_t) / med(raw_t), med(per_rank_extra) / 1e6,
           med(restart_t), med(read_t), med(restart_t) / med(read_t), total / 1e6), flush=True)

def wait_until_grows(path, since, timeout):
    """True once path was modified after `since` (the restored job writes its next tick)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.getmtime(path) > since:
            return True
        time.sleep(0.005)
    return False

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--revive", required=True)
    ap.add_argument("--workdir", default="/tmp/revive-bench-mpi")
    ap.add_argument("--mpi", default="openmpi,mpich")
    ap.add_argument("--port", type=int, default=7941)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tight", type=int, default=100, help="back-to-back checkpoints of the ring")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--only", default="overhead,latency,bulk")
    ap.add_argument("--keep", action="store_true", help="leave the work directory (images: GBs) in place")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    try:
        run_all(a)
    finally:
        if not a.keep:  # the bulk images and raw files are several GB of /tmp
            shutil.rmtree(a.workdir, ignore_errors=True)

def run_all(a):
    for mpi in a.mpi.split(","):
        cc, mpx = MPIS[mpi]
        exe = os.path.join(a.workdir, "mpibench_" + mpi)
        subprocess.run([cc, "-O2", "-o", exe, os.path.join(HERE, "mpibench.c")], check=True)
        for what in a.only.split(","):
            try:
                {"overhead": overhead, "latency": latency, "bulk": bulk}[what](a, mpi, exe, mpx)
            except Exception as e:  # a figure that cannot be measured says why; the others still run
                print("| %s | %s: %s |" % (mpi, what, e), flush=True)

if __name__ == "__main__":
    main()
