#!/usr/bin/env python3
"""The fallback of issue 11 (docs/rma.md "When a rank dies"): an RMA program linked with librevive_rma
runs as a whole Open MPI job under `revive run` (transparent checkpoints at an interval); one rank, chosen
at random, is SIGKILLed at a random moment after a checkpoint; the job must be relaunched from its last
transparent generation and its final output must equal an uninterrupted run's, byte for byte.

  run_kill.py --revive R --inject I --restart S --lib BUILD/src/rma --app fft_transpose.c --workdir W
              --mode recovery|default [--kills K] [--seed N] [--times FILE]

--mode recovery: mpirun --enable-recovery --mca orte_abort_on_non_zero_status 0 (mpirun lets the survivors
live: without the library's watcher they hang in the fence for good, and mpirun exits 0 when they end, so
revive run learns of the failure from the coordinator, which saw ranks end without exit()).
--mode default: mpirun kills the job itself.
--times FILE: appends one line per kill, "seconds from the kill to the job printing a new iteration",
for bench/rma/failover.py. Figures are printed, never asserted."""
import argparse, os, random, re, shutil, signal, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
import harness
from harness import fail, free_port, clean_env, descendants

ap = argparse.ArgumentParser()
for opt in ("--revive", "--inject", "--restart", "--lib", "--app", "--workdir"):
    ap.add_argument(opt, required=True)
ap.add_argument("--mode", choices=("recovery", "default"), required=True)
ap.add_argument("--kills", type=int, default=1)
ap.add_argument("--iters", type=int, default=300)
ap.add_argument("--seed", type=int, default=None)
ap.add_argument("--times")
a = ap.parse_args()
seed = a.seed if a.seed is not None else random.randrange(1 << 30)
rng = random.Random(seed)
print("seed %d, mode %s" % (seed, a.mode), flush=True)
revive = os.path.abspath(a.revive)
shutil.rmtree(a.workdir, ignore_errors=True)
os.makedirs(a.workdir)
ck = os.path.join(a.workdir, "ck")
prog = os.path.join(a.workdir, "fft_linked")
subprocess.run(["mpicc", "-O2", "-o", prog, a.app, "-L" + os.path.abspath(a.lib), "-lrevive_rma", "-Wl,-rpath," + os.path.abspath(a.lib)], check=True)

NP = 4
app_args = ["--n", "16", "--iters", str(a.iters), "--sleep-ms", "20"]
rma_env = {"REVIVE_RMA_INTERVAL": "0.2", "REVIVE_RMA_GROUP": "2"}
if "REVIVE_RMA_WATCH" in os.environ:  # 0: no watcher (the survivors hang; revive run's dead-rank rule ends them)
    rma_env["REVIVE_RMA_WATCH"] = os.environ["REVIVE_RMA_WATCH"]
mpi = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", str(NP), "--mca", "osc", "ucx"]
if a.mode == "recovery":
    mpi += ["--enable-recovery", "--mca", "orte_abort_on_non_zero_status", "0"]
for k in rma_env:
    mpi += ["-x", k]
env = clean_env(dict(REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
                     REVIVE_LOG="0", REVIVE_LOCAL_DIRS="", **rma_env))

ref = subprocess.run(mpi + [prog] + app_args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=120)
if ref.returncode != 0 or not ref.stdout.endswith(b"\n") or b"done digest" not in ref.stdout:
    fail("reference run failed (%d): %s" % (ref.returncode, ref.stderr[-1500:].decode(errors="replace")))

rund = os.path.join(a.workdir, "run")
os.makedirs(rund)
out = os.path.join(rund, "out")

def log():
    return harness.run_log(ck)

def failures():
    return harness.run_failures(ck)

def context():
    # What the user would look at: the supervisor's own messages, the log, the processes still there.
    try:
        sup_err = open(os.path.join(rund, "supervisor-stderr"), errors="replace").read()[-3000:]
    except OSError:
        sup_err = ""
    procs = []
    for p in descendants(sup.pid):
        try:
            procs.append("%d %s %s %s" % (p, open("/proc/%d/stat" % p).read().split()[2],
                                          open("/proc/%d/wchan" % p).read(),
                                          open("/proc/%d/cmdline" % p).read().replace("\0", " ")[:120]))
        except OSError:
            pass
    try:  # a coordinator that does not answer must not hide the failure being reported
        st = subprocess.run([revive, "status", "--port", str(port), "--ckpt-dir", ck], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, timeout=20).stdout.decode(errors="replace")
    except subprocess.TimeoutExpired:
        st = "(no answer within 20 s)"
    return ("\n--- run.log:\n" + log() + "\n--- supervisor stderr:\n" + sup_err + "\n--- revive status:\n" + st +
            "\n--- processes:\n" + "\n".join(procs))

def wait_for(pred, timeout, what):
    return harness.wait_for(pred, timeout, what, context, step=0.01)

def ranks(sup):
    pids = []
    for p in descendants(sup.pid)[1:]:
        try:
            if open("/proc/%d/comm" % p).read().strip() == "fft_linked":
                pids.append(p)
        except OSError:
            pass
    return pids if len(pids) == NP else []

def size():
    try:
        return os.path.getsize(out)
    except OSError:
        return 0

port = free_port(rng)
err = open(os.path.join(rund, "supervisor-stderr"), "ab")
sup = subprocess.Popen([revive, "run", "--port", str(port), "--ckpt-dir", ck, "--interval", "0.5", "--restarts",
                        str(a.kills + 1), "--", "sh", "-c", 'exec "$@" > out', "sh"] + mpi + [prog] + app_args,
                       cwd=rund, stdout=err, stderr=err, stdin=subprocess.DEVNULL, env=env)
try:
    for k in range(a.kills):
        before = failures()
        gens = log().count("checkpoint: generation")
        wait_for(lambda: log().count("checkpoint: generation") > gens, 60, "a checkpoint")
        pids = wait_for(lambda: ranks(sup), 30, "the job's %d ranks" % NP)
        # A moment of the computation: a rank killed inside MPI_Init, before the library's watcher is up,
        # leaves survivors only revive run's dead-rank rule ends (after kDeadRankGrace, cmd_run.cpp).
        wait_for(lambda: size() > 0, 30, "the job's first iteration")
        time.sleep(rng.uniform(0.0, 0.4))
        victim = rng.choice(ranks(sup) or pids)
        s_kill = size()
        t_kill = time.time()
        os.kill(victim, signal.SIGKILL)
        # Working again: the restore puts `out` back to its checkpoint-time size, then the job appends.
        low, back = s_kill, None
        while time.time() - t_kill < 60 and sup.poll() is None:
            s = size()
            if s < low:
                low = s
            elif s > low and (low < s_kill or s > s_kill) and failures() > before:
                back = time.time() - t_kill
                break
            time.sleep(0.005)
        wait_for(lambda: failures() > before, 30, "the supervisor to see kill %d (pid %d)" % (k + 1, victim))
        print("kill %d: pid %d; job working again %s s after the kill" %
              (k + 1, victim, "%.2f" % back if back is not None else "(not seen)"), flush=True)
        if a.times and back is not None:
            with open(a.times, "a") as f:
                f.write("%s %.3f\n" % (a.mode, back))
    rc = sup.wait(timeout=120)
except BaseException:
    for p in reversed(descendants(sup.pid)):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    raise
if rc != 0:
    fail("revive run exited %d\n--- run.log:\n%s" % (rc, log()))
got = open(out, "rb").read()
if got != ref.stdout:
    fail("the job's output differs from the uninterrupted run's (%d vs %d bytes); see %s\n%s" %
         (len(got), len(ref.stdout), rund, log()))
restarts = log().count("restarting from generation")
if failures() != a.kills or restarts < a.kills:
    fail("want %d failures, each restarted from a generation; run.log:\n%s" % (a.kills, log()))
for line in log().splitlines():
    if re.search(r"\] failure \d+:", line):
        print(line)
print("PASS: %d rank kill(s) (%s mpirun), relaunched from transparent checkpoints, output identical" % (a.kills, a.mode))
shutil.rmtree(a.workdir, ignore_errors=True)
