#!/usr/bin/env python3
"""`revive run` end to end: the supervisor keeps a job going through failures and its final output equals an
uninterrupted run's, byte for byte.

Scenarios (one per CTest test):
  kills      transparent job of 2 copies, a random copy SIGKILLed at a random moment, KILLS times in a row
  hang       a process SIGSTOPped: found by the next checkpoint within --hang-timeout, torn down, restarted
  giveup     a job that always fails: exit 70 after --restarts relaunches, with the reason
  corrupt    every checkpoint damaged: each generation tried once, then exit 70 with the reason
  signal     the checkpoint signal: checkpoint, exit 75; `revive run` again continues from that checkpoint
  hostloss   4 network-namespace hosts, two spares: a process SIGSTOPped (its host's sub-coordinator times it
             out), then twice every process of a host in use SIGKILLed and the host deleted; the job comes
             back each time, on a spare after a loss
  sharedlog  `revive run ... >job.log 2>&1` as a batch script writes it: the job (a shell and the counter,
             both holding the log) and the supervisor write one file through one description; a process
             SIGKILLed KILLS times. The job's lines must equal an uninterrupted run's, the supervisor's
             last line must follow them, and no NUL byte may appear (before 2026-11-28 the restored job
             had a description of its own: the supervisor's next line landed past the end the restore
             cut the log back to, leaving a hole of NULs, and the job overwrote the supervisor's lines)
  mpi        `revive run -- mpiexec -n 2 ring`: a random rank SIGKILLed KILLS times
  app        --app: an MPI program of the application-level library, a random rank SIGKILLed KILLS times;
             then a rank SIGSTOPped (its heartbeat stops): hung, restarted
"""
import argparse, os, random, re, shutil, signal, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
import harness
from harness import fail, skip, run, free_port, clean_env, with_namespaces, descendants

ap = argparse.ArgumentParser()
ap.add_argument("scenario")
for opt in ("--revive", "--inject", "--restart", "--workdir", "--counter"):
    ap.add_argument(opt, required=True)
ap.add_argument("--netns")
ap.add_argument("--nmapp", help="tests/mpi's nm_app")
ap.add_argument("--ring", help="tests/mpi_transparent's ring program (Open MPI build)")
ap.add_argument("--kills", type=int, default=5)
ap.add_argument("--seed", type=int, default=None)
a = ap.parse_args()
seed = a.seed if a.seed is not None else random.randrange(1 << 30)
rng = random.Random(seed)
print("seed %d" % seed, flush=True)
revive = os.path.abspath(a.revive)
counter = os.path.abspath(a.counter)
shutil.rmtree(a.workdir, ignore_errors=True)
os.makedirs(a.workdir)
ck = os.path.join(a.workdir, "ck")
# Steps of the job (30 ms each): long enough for every kill of the scenario (each costs about a second).
STEPS, SLEEP_MS = (300 if a.scenario in ("kills", "hostloss") else 150), 30
# REVIVE_LOCAL_DIRS empty: the files plugin's walk of /tmp would save into every image each file that other
# tests running alongside create there (same user, born since the launch); with a checkpoint every 0.4 s for
# 20 s, run.kills's images grew to 1.8 GB each in a CI clone under /tmp. The jobs' own files are open, so
# they are saved anyway.
env = clean_env(dict(REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
                     REVIVE_LOG="0", REVIVE_LOCAL_DIRS=""))

class Reference:
    """The uninterrupted runs, all copies at once and beside the run under test (they sleep most of the time:
    run one after the other they added ~9 s to each scenario). compare() waits for them."""
    def __init__(self, ncopies):
        self.dir = os.path.join(a.workdir, "ref")
        os.makedirs(self.dir, exist_ok=True)
        self.procs = [subprocess.Popen([counter, str(STEPS + 7 * i), str(SLEEP_MS)],
                                       stdout=open(os.path.join(self.dir, "out-%d" % i), "wb")) for i in range(ncopies)]

    def wait(self):
        for p in self.procs:
            if p.wait(timeout=60) != 0:
                fail("reference run failed")
        return self.dir


def copies_cmd(ncopies):
    # Copy i prints STEPS + 7i steps (so a mix-up of copies shows) into out-i of the job's directory.
    return (["-n", str(ncopies)] if ncopies > 1 else []) + [
        "--", "sh", "-c", 'exec "$0" $((%d + 7 * ${REVIVE_LAUNCH_INDEX:-0})) %d > out-${REVIVE_LAUNCH_INDEX:-0}'
        % (STEPS, SLEEP_MS), counter]

def compare(ref, rund, ncopies):
    ref = ref.wait()
    for i in range(ncopies):
        want = open(os.path.join(ref, "out-%d" % i), "rb").read()
        got = open(os.path.join(rund, "out-%d" % i), "rb").read()
        if got != want:
            fail("copy %d: output differs from the uninterrupted run (%d vs %d bytes); see %s" %
                 (i, len(got), len(want), rund))

def log():
    return harness.run_log(ck)

def failures():
    return harness.run_failures(ck)

def job_pids(sup, name):
    """Processes of the job below the supervisor whose command name is `name`."""
    out = []
    for p in descendants(sup.pid)[1:]:
        try:
            if open("/proc/%d/comm" % p).read().strip() == name:
                out.append(p)
        except OSError:
            pass
    return out

def wait_for(pred, timeout, what):
    return harness.wait_for(pred, timeout, what, lambda: "\n--- run.log:\n" + log())

def start(args, rund, extra_env=None):
    os.makedirs(rund, exist_ok=True)
    err = open(os.path.join(rund, "supervisor-stderr"), "ab")
    e = dict(env, **(extra_env or {}))
    return subprocess.Popen([revive, "run"] + args, cwd=rund, stdout=err, stderr=err, stdin=subprocess.DEVNULL, env=e)

def finish(sup, want_rc, timeout=120):
    try:
        rc = sup.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        for p in reversed(descendants(sup.pid)):
            os.kill(p, signal.SIGKILL)
        fail("revive run did not end within %d s\n--- run.log:\n%s" % (timeout, log()))
    if rc != want_rc:
        fail("revive run exited %d, want %d\n--- run.log:\n%s" % (rc, want_rc, log()))

def kill_after_progress(sup, name, sig, min_gen_lines):
    """Waits until the job runs (a process named `name`) and has taken a checkpoint in this attempt, sleeps a
    random moment, then sends sig to one random process of the job."""
    wait_for(lambda: log().count("checkpoint: generation") >= min_gen_lines, 60, "a checkpoint")
    pids = wait_for(lambda: job_pids(sup, name), 30, "the job's processes")
    time.sleep(rng.uniform(0.0, 0.8))
    pids = job_pids(sup, name) or pids
    victim = rng.choice(pids)
    try:
        os.kill(victim, sig)
    except ProcessLookupError:
        pass
    return victim

def scenario_kills():
    n = 2
    ref = Reference(n)
    rund = os.path.join(a.workdir, "run")
    port = free_port(rng)
    sup = start(["--port", str(port), "--ckpt-dir", ck, "--interval", "0.4", "--restarts", str(a.kills + 1)]
                + copies_cmd(n), rund)
    for k in range(a.kills):
        before = failures()
        v = kill_after_progress(sup, "counter", signal.SIGKILL, log().count("checkpoint: generation") + 1)
        wait_for(lambda: failures() > before, 30, "the supervisor to see kill %d (pid %d)" % (k + 1, v))
        print("kill %d: pid %d seen" % (k + 1, v), flush=True)
    finish(sup, 0)
    compare(ref, rund, n)
    restarts = log().count("restarting from generation")
    if failures() != a.kills or restarts < 1:
        fail("want %d failures and restarts from checkpoints, got:\n%s" % (a.kills, log()))
    print("PASS: %d kills in a row, %d relaunches from checkpoints, output identical" % (a.kills, restarts))

def scenario_hang():
    ref = Reference(1)
    rund = os.path.join(a.workdir, "run")
    port = free_port(rng)
    sup = start(["--port", str(port), "--ckpt-dir", ck, "--interval", "0.4", "--hang-timeout", "2"] + copies_cmd(1), rund)
    v = kill_after_progress(sup, "counter", signal.SIGSTOP, 1)
    t = time.time()
    wait_for(lambda: "hung" in log(), 20, "the stopped process (pid %d) to be found hung" % v)
    took = time.time() - t
    finish(sup, 0)
    compare(ref, rund, 1)
    print("PASS: stopped process found hung after %.1f s (timeout 2 s + interval 0.4 s), output identical" % took)

def scenario_giveup():
    rund = os.path.join(a.workdir, "run")
    port = free_port(rng)
    sup = start(["--port", str(port), "--ckpt-dir", ck, "--restarts", "2", "--", "sh", "-c", "exit 3"], rund)
    finish(sup, 70, timeout=60)
    if "giving up after 3 failures" not in log() or "exit status 3" not in log():
        fail("the give-up message does not say why:\n" + log())
    r = run([revive, "run", "--interval", "soon", "--", "true"], env=env, timeout=30)
    if r.returncode != 2 or "--interval soon" not in r.stderr:
        fail("bad --interval: rc %d %r" % (r.returncode, r.stderr))
    r = run([revive, "run", "--interval", "auto", "--", "true"], env=env, timeout=30)
    if r.returncode != 2 or "--mtbf" not in r.stderr:
        fail("--interval auto without --mtbf: rc %d %r" % (r.returncode, r.stderr))
    r = run([revive, "run", "--spares", "1", "--", "true"], env=env, timeout=30)
    if r.returncode != 2 or "--spares needs --hosts" not in r.stderr:
        fail("--spares without hosts: rc %d %r" % (r.returncode, r.stderr))
    print("PASS: gave up with exit 70 after 2 restarts; bad options refused")

def scenario_signal():
    ref = Reference(1)
    rund = os.path.join(a.workdir, "run")
    port = free_port(rng)
    args = ["--port", str(port), "--ckpt-dir", ck, "--checkpoint-signal", "USR1"] + copies_cmd(1)
    sup = start(args, rund)
    wait_for(lambda: job_pids(sup, "counter"), 30, "the job")
    time.sleep(rng.uniform(0.5, 1.5))
    sup.send_signal(signal.SIGUSR1)
    finish(sup, 75, timeout=60)
    if job_pids(sup, "counter"):
        fail("the job still runs after exit 75")
    lines = len(open(os.path.join(rund, "out-0")).read().splitlines())
    sup = start(args, rund)  # the requeued job, or a new allocation
    finish(sup, 0)
    compare(ref, rund, 1)
    if "restarting from generation" not in log():
        fail("the second run did not restart from the checkpoint:\n" + log())
    print("PASS: stopped at step %d with exit 75, continued by a second revive run, output identical" % lines)

def scenario_corrupt():
    """Every checkpoint damaged: each relaunch fails at once, each generation is passed over once, and the
    supervisor gives up with exit 70 naming them, instead of looping."""
    rund = os.path.join(a.workdir, "run")
    port = free_port(rng)
    args = ["--port", str(port), "--ckpt-dir", ck, "--interval", "0.3", "--checkpoint-signal", "USR1"] + copies_cmd(1)
    sup = start(args, rund)
    wait_for(lambda: log().count("checkpoint: generation") >= 3, 60, "three checkpoints")
    sup.send_signal(signal.SIGUSR1)
    finish(sup, 75, timeout=60)
    gens = sorted(d for d in os.listdir(ck) if d.startswith("ckpt-"))
    for g in gens:  # damage every image: truncated to half
        for f in os.listdir(os.path.join(ck, g)):
            if f.endswith(".rimg"):
                path = os.path.join(ck, g, f)
                os.truncate(path, os.path.getsize(path) // 2)
    sup = start(args, rund)
    finish(sup, 70, timeout=120)
    if "giving up: no checkpoint brings the job back" not in log():
        fail("no clear give-up message:\n" + log())
    passed = log().count("passing that generation over")
    if passed != len(gens):
        fail("want each of the %d generations passed over once, got %d:\n%s" % (len(gens), passed, log()))
    print("PASS: %d damaged generations each tried once, then exit 70 with the reason" % len(gens))

def scenario_hostloss():
    """Four hosts, two of them spares; a host in use is lost twice in a row (every process in it SIGKILLed and
    the namespace deleted); each time a spare takes its place."""
    if not a.netns:
        fail("--netns is needed")
    def body(rng2, seed2, prefix, net):
        n = 2
        ref = Reference(n)
        rund = os.path.join(a.workdir, "run")
        hosts = [prefix + str(i) for i in range(1, 5)]
        coord_ip = net + ".1"
        port = free_port(rng, coord_ip)
        sub = free_port(rng)
        sup = start(["--port", str(port), "--ckpt-dir", ck, "--interval", "0.5", "--hang-timeout", "3", "--hosts",
                     ",".join(hosts), "--spares", "2", "--launcher", "netns", "--sub-port", str(sub)] + copies_cmd(n),
                    rund, dict(REVIVE_COORD_HOST=coord_ip))
        # First a hung process behind a host's sub-coordinator: its timeout must reach the supervisor as a hang.
        v = kill_after_progress(sup, "counter", signal.SIGSTOP, 1)
        wait_for(lambda: "is hung" in log(), 30, "the stopped process (pid %d) behind a sub-coordinator to be found hung" % v)
        # Its host's sub-coordinator timed it out and named it (the root waits a little longer for a sub).
        if not re.search(r"is hung: .*process upid \d+ \(\S+, pid %d on " % v, log()):
            fail("the hang behind a sub-coordinator is not reported naming the process (pid %d):\n%s" % (v, log()))
        print("stopped process %d found hung through its host's sub-coordinator" % v, flush=True)
        lost = []
        for k in range(2):
            want = log().count("checkpoint: generation") + 2
            wait_for(lambda: log().count("checkpoint: generation") >= want, 60, "two checkpoints")
            in_use = re.findall(r"attempt \d+: (?:launched the job|restarting from generation \d+) on (\S+)", log())[-1].split(",")
            time.sleep(rng.uniform(0.0, 0.5))
            h = rng.choice(in_use)
            pids = [int(p) for p in run(["ip", "netns", "pids", h]).stdout.split()]
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            run(["ip", "netns", "del", h])
            lost.append(h)
            print("host %s lost (%d processes killed, namespace deleted)" % (h, len(pids)), flush=True)
            wait_for(lambda: log().count("replaced by spare") > k, 60, "the spare to replace %s" % h)
        finish(sup, 0)
        compare(ref, rund, n)
        for h in lost:
            if "host %s does not answer; replaced by spare" % h not in log():
                fail("no spare replaced %s:\n%s" % (h, log()))
        print("PASS: a hang behind a sub-coordinator, then hosts %s lost in a row; the job finished on the spares, "
              "output identical" % ", ".join(lost))
    with_namespaces(argparse.Namespace(seed=seed, netns=a.netns), "rvr", "10.85", 4, body)

def scenario_app():
    """--app: tests/mpi's nm_app (application-level library, MPI; 20 ms per step, so the run's length does not
    depend on the machine's load) with 2 ranks; a random rank SIGKILLed, KILLS-1 times, then one SIGSTOPped,
    which only its heartbeat can tell."""
    if not a.nmapp:
        fail("--nmapp is needed")
    mpi = ["mpiexec", "-n", "2", "--oversubscribe", "--mca", "btl", "self,vader"]
    steps = "600"
    ref_out = os.path.join(a.workdir, "ref-array")
    # The uninterrupted run beside the supervised one (12 s of 20 ms steps, shared memory only: it takes no
    # port a restart needs); waited for before the comparison.
    ref = subprocess.Popen(mpi + [os.path.abspath(a.nmapp), ref_out, steps, "0"], stdout=subprocess.PIPE,
                           env=dict(env, REVIVE_CP_PATH=os.path.join(a.workdir, "refck")))
    rund = os.path.join(a.workdir, "run")
    out = os.path.join(a.workdir, "array")
    sup = start(["--app", "--ckpt-dir", ck, "--hang-timeout", "4", "--restarts", str(a.kills + 2), "--"] + mpi
                + [os.path.abspath(a.nmapp), out, steps, "25"], rund, dict(REVIVE_CP_PATH=os.path.join(a.workdir, "appck")))
    hb = os.path.join(ck, ".revive-heartbeat")
    for k in range(a.kills):
        before = failures()
        wait_for(lambda: os.path.isdir(hb) and len(os.listdir(hb)) >= 2, 30, "heartbeats")
        pids = wait_for(lambda: job_pids(sup, "nm_app"), 30, "the ranks")
        time.sleep(rng.uniform(0.5, 1.5))
        sig = signal.SIGSTOP if k == a.kills - 1 else signal.SIGKILL
        try:
            os.kill(rng.choice(job_pids(sup, "nm_app") or pids), sig)
        except ProcessLookupError:
            pass
        wait_for(lambda: failures() > before, 40, "the supervisor to see event %d" % (k + 1))
        print("event %d (%s) seen" % (k + 1, "stop" if sig == signal.SIGSTOP else "kill"), flush=True)
    finish(sup, 0, timeout=240)
    try:
        ref_stdout = ref.communicate(timeout=120)[0]
    except subprocess.TimeoutExpired:
        ref.kill()
        fail("reference run did not end within 120 s")
    if ref.returncode != 0 or not ref_stdout:
        fail("reference run failed (status %d)" % ref.returncode)
    text = open(os.path.join(rund, "supervisor-stderr"), "rb").read()
    if ref_stdout not in text or open(out, "rb").read() != open(ref_out, "rb").read():
        fail("the final result differs from the uninterrupted run's:\nwant %r\nlog:\n%s" % (ref_stdout, log()))
    if "hung" not in log():
        fail("the stopped rank was not found hung:\n" + log())
    print("PASS: %d events (kills, then a stopped rank found by its heartbeat), result identical" % a.kills)

def scenario_mpi():
    """An unmodified Open MPI job under the supervisor: a random rank SIGKILLed at random moments."""
    if not a.ring:
        fail("--ring is needed")
    mpi = ["mpiexec", "-n", "2", "--oversubscribe"]
    args = [os.path.abspath(a.ring), "80", "100000"]
    r = subprocess.run(mpi + args, stdout=subprocess.PIPE, timeout=120)
    if r.returncode != 0 or not r.stdout:
        fail("reference run failed")
    rund = os.path.join(a.workdir, "run")
    port = free_port(rng)
    sup = start(["--port", str(port), "--ckpt-dir", ck, "--interval", "1", "--restarts", str(a.kills), "--", "sh", "-c",
                 'exec "$@" > out', "sh"] + mpi + args, rund)
    for k in range(a.kills):
        before = failures()
        v = kill_after_progress(sup, "ring", signal.SIGKILL, log().count("checkpoint: generation") + 1)
        wait_for(lambda: failures() > before, 40, "the supervisor to see kill %d (pid %d)" % (k + 1, v))
        print("kill %d: rank pid %d seen" % (k + 1, v), flush=True)
    finish(sup, 0, timeout=180)
    if open(os.path.join(rund, "out"), "rb").read() != r.stdout:
        fail("the MPI job's output differs from the uninterrupted run's; see %s\n%s" % (rund, log()))
    print("PASS: %d ranks killed, the MPI job finished with identical output" % a.kills)

def scenario_sharedlog():
    steps = 150
    ref = subprocess.run(["sh", "-c", '"$0" %d %d; echo end-of-job' % (steps, SLEEP_MS), counter],
                         stdout=subprocess.PIPE, timeout=60).stdout
    rund = os.path.join(a.workdir, "run")
    os.makedirs(rund)
    path = os.path.join(rund, "job.log")
    out = open(path, "wb")  # the shell's `>job.log 2>&1`: one description, no O_APPEND
    # sh -e: a SIGKILLed counter ends the job with its status (without -e sh would go on and finish).
    port = free_port(rng)
    sup = subprocess.Popen([revive, "run", "--port", str(port), "--ckpt-dir", ck, "--interval", "0.4", "--restarts",
                            str(a.kills + 1), "--", "sh", "-ec", '"$0" %d %d; echo end-of-job' % (steps, SLEEP_MS),
                            counter], cwd=rund, stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=env)
    out.close()
    for k in range(a.kills):
        before = failures()
        v = kill_after_progress(sup, rng.choice(["counter", "sh"]), signal.SIGKILL,
                                log().count("checkpoint: generation") + 1)
        wait_for(lambda: failures() > before, 30, "the supervisor to see kill %d (pid %d)" % (k + 1, v))
        print("kill %d: pid %d seen" % (k + 1, v), flush=True)
    finish(sup, 0)
    text = open(path, "rb").read()
    if b"\0" in text:
        fail("job.log holds %d NUL bytes (first at %d): a hole between the supervisor's and the job's writes\n%r"
             % (text.count(b"\0"), text.index(b"\0"), text[-1500:]))
    job = b"".join(l for l in text.splitlines(True) if not l.startswith(b"revive"))
    if job != ref:
        fail("the job's lines in job.log differ from the uninterrupted run's (%d vs %d bytes)\n%r"
             % (len(job), len(ref), text[-1500:]))
    last = text.splitlines()[-1]
    if b"the job finished (%d restart" % a.kills not in last:
        fail("job.log does not end with the supervisor's last line: %r" % text[-600:])
    print("PASS: %d kills, job.log holds the job's lines as an uninterrupted run's and the supervisor's last "
          "line, no NUL byte" % a.kills)

{"sharedlog": scenario_sharedlog, "kills": scenario_kills, "mpi": scenario_mpi, "corrupt": scenario_corrupt, "hang": scenario_hang, "giveup": scenario_giveup, "signal": scenario_signal,
 "hostloss": scenario_hostloss, "app": scenario_app}[a.scenario]()
