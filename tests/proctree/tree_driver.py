#!/usr/bin/env python3
"""Process-tree checkpoint/restart test (docs/process-trees.md).

Runs PROG natively (reference; beside the launched run with --ref-beside), then `revive launch PROG`:
after a random delay `revive checkpoint` (--ckpts times), SIGKILL of the whole tree (every descendant of
the launched process), `revive restart`; --chain N checkpoints and kills the restored tree again N times.
The output file (stdout, opened in append mode since parent and children write to it; with --stdout-trunc
without O_APPEND, so they must share its one offset) and the exit code must equal the reference run's.
The programs check themselves that getpid()/getppid() stay what they were (pids are recreated)."""
import argparse, json, os, random, shlex, shutil, signal, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from e2e_driver import coordinator_gone, free_port, run  # the CLI tests' helpers (ports, coordinator)

def fail(msg, work=None):
    print("FAIL: " + msg, flush=True)
    if work:
        for name in sorted(os.listdir(work)):
            if "stderr" in name:
                text = open(os.path.join(work, name), "rb").read().decode(errors="replace")
                if text:
                    print("--- %s:\n%s" % (name, text[-3000:]), flush=True)
    sys.exit(1)

def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for t in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, t)) as f:
                    kids = [int(k) for k in f.read().split()]
                out += kids
                todo += kids
        except OSError:
            pass
    return out

def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(k) for k in f.read().split()]
    except OSError:
        return []

def kill_tree(roots, reap=None):
    """SIGKILL the roots and every descendant (stopped first, so none can react or fork meanwhile).
    reap: waits for our own child among them (its zombie would hold its pid until we do)."""
    def everyone():
        return sorted(set(roots + [d for r in roots for d in descendants(r)]))
    for p in everyone():
        try:
            os.kill(p, signal.SIGSTOP)
        except OSError:
            pass
    pids = everyone()
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    if reap:
        reap()
    # Orphans are reaped by init: wait until every pid is free again (restart recreates them).
    deadline = time.time() + 10
    while time.time() < deadline and any(os.path.exists("/proc/%d" % p) for p in pids):
        time.sleep(0.01)
    print("killed %d process(es)" % len(pids), flush=True)
    return pids

def squat_and_refuse(squat, pid, cmd, work, env):
    """With `pid` held by another process and no pid namespace allowed (REVIVE_PIDNS=0; with one, the
    restart makes room there: proctree.ids_side_by_side), restart must exit 2 naming the pid, and start nothing."""
    env = dict(env, REVIVE_PIDNS="0")
    holder = subprocess.Popen([squat, str(pid)], stdout=subprocess.PIPE, start_new_session=True)
    if holder.stdout.readline().strip() != b"ready":
        fail("the squatter could not take pid %d" % pid, work)
    try:
        r = run(cmd, env=env, timeout=60)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    deadline = time.time() + 10
    while time.time() < deadline and os.path.exists("/proc/%d" % pid):
        time.sleep(0.01)
    want = "pid %d " % pid
    if r.returncode != 2 or want not in r.stderr or "taken" not in r.stderr:
        fail("restart with pid %d taken: exit %d, stderr %r; want exit 2 naming the pid" % (pid, r.returncode, r.stderr),
             work)
    print("restart refused while pid %d was taken: %s" % (pid, r.stderr.strip()), flush=True)

def take_ids(squat, ids, work):
    """Each id held by a process of its own (squat: clone3 set_tid, as root), until release_ids."""
    holders = []
    for i in ids:
        h = subprocess.Popen([squat, str(i)], stdout=subprocess.PIPE, start_new_session=True)
        holders.append(h)
        if h.stdout.readline().strip() != b"ready":
            release_ids(holders)
            fail("the squatter could not take id %d" % i, work)
    return holders

def release_ids(holders):
    for h in holders:
        os.killpg(h.pid, signal.SIGKILL)
        h.wait()

def checkpoint(revive, port, ck, work):
    """revive checkpoint; a generation refused because a fork was in flight is retried (documented), and
    so is "not now" (exit 75): a coordinator not listening yet, with no process yet, or a restart still in
    progress (a launch or restart still starting on a loaded machine: the random delay before a checkpoint
    can be shorter than its start-up)."""
    deadline = time.time() + 60
    attempt = 0
    while attempt < 30:
        r = run([revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], timeout=120)
        # Exit 75 is revive checkpoint's "not now, ask again" (src/cli/common.h kCheckpointNotNow).
        if r.returncode == 75 and time.time() < deadline:
            time.sleep(0.1)
            continue
        attempt += 1
        if r.returncode == 0:
            d = r.stdout.strip()
            m = json.load(open(os.path.join(d, "MANIFEST.json")))
            zombies = 0  # exited, unreaped children recorded: proctree section = 24 bytes + 8 per zombie
            for p in m["processes"]:
                r = run([revive, "inspect", "--json", os.path.join(d, p["image"])])
                if r.returncode != 0:
                    fail("revive inspect %s: %s" % (p["image"], r.stderr.strip()), work)
                sec = [x for x in json.loads(r.stdout)["sections"] if x["name"] == "proctree"]
                if len(sec) != 1:
                    fail("%s has no proctree section" % p["image"], work)
                zombies += (sec[0]["bytes"] - 24) // 8
            print("checkpoint: %s (%d processes, %d zombies)" % (d, len(m["processes"]), zombies), flush=True)
            return len(m["processes"]), zombies
        if "proctree" not in r.stderr:
            fail("revive checkpoint exited %d: %s" % (r.returncode, r.stderr.strip()), work)
        print("checkpoint refused during a fork, retrying", flush=True)
        time.sleep(0.01)
    fail("every checkpoint was refused", work)

def wait_for(cond, proc, work, what, timeout=60):
    deadline = time.time() + timeout
    while not cond():
        if proc.poll() is not None:
            fail("program ended (rc %s) while waiting for %s" % (proc.returncode, what), work)
        if time.time() > deadline:
            fail("timed out waiting for %s" % what, work)
        time.sleep(0.02)

def compare_files(a, ref, work, when):
    for name in ["stdout"] + a.file:
        want = open(os.path.join(ref, name), "rb").read()
        if name == "stdout" and a.expect_missing:
            line = a.expect_missing.encode() + b"\n"
            if want.count(line) != 1:
                fail("the uninterrupted run printed %r %d times, want once" % (line, want.count(line)), work)
            want = want.replace(line, b"")
        got = open(os.path.join(work, name), "rb").read()
        if want != got:
            i = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
            fail("%s differs %s: %d bytes vs %d expected; first difference at byte %d: %r vs %r"
                 % (name, when, len(got), len(want), i, got[max(0, i - 40):i + 40], want[max(0, i - 40):i + 40]), work)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--revive", required=True)
    ap.add_argument("--inject", required=True)
    ap.add_argument("--restart", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--delay", type=float, nargs=2, default=[0.3, 1.0])
    ap.add_argument("--ckpts", type=int, default=1)
    ap.add_argument("--chain", type=int, default=0)
    ap.add_argument("--min-procs", type=int, default=2, help="a checkpoint must hold at least this many")
    ap.add_argument("--min-zombies", type=int, default=0, help="... and record at least this many zombies")
    ap.add_argument("--each-min", type=int, default=0,
                    help="every checkpoint must hold at least this many processes and zombies together...")
    ap.add_argument("--each-min-slack", type=int, default=0,
                    help="... but for this many (a child that leaves during the suspend phase is reaped by its "
                         "parent before the parent's own suspend: a correct generation without it)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--file", action="append", default=[], help="another output file (in the cwd) to compare")
    ap.add_argument("--squat", help="program holding a pid: before the first restart, hold a killed child's pid "
                                    "and require revive restart to refuse, naming it")
    ap.add_argument("--take-tids", help="program holding a pid (squat): from the kill to the end of the first "
                                        "restart, hold the tids of the root's other threads, so only a pid "
                                        "namespace gives them back (the program checks its gettid())")
    ap.add_argument("--stdout-trunc", action="store_true",
                    help="open stdout without O_APPEND: processes sharing it must share its one offset")
    ap.add_argument("--during", help="a file (in the cwd) that exists while a program outside the computation "
                                     "runs: the first checkpoint is taken while it exists (and must end before "
                                     "it is gone), the later ones once it is gone")
    ap.add_argument("--expect-missing", help="a stdout line of the uninterrupted run that the restarted run must "
                                             "not have (printed by a program outside the computation that the "
                                             "restart cannot bring back)")
    ap.add_argument("--again", type=int, default=0,
                    help="then restart the last checkpoint this many more times, one after the other, each to the end")
    ap.add_argument("--ref-beside", action="store_true",
                    help="run the reference beside the launched run, not before it (it sleeps most of the time): "
                         "only for programs that name nothing machine-wide (ports, keys, paths outside the cwd)")
    ap.add_argument("--side-by-side", action="store_true",
                    help="then restart two copies of the checkpoint directory at once (each its own port): "
                         "both must end with the uninterrupted run's exit code (they share output files)")
    ap.add_argument("--side-virtual-first", type=float, default=None, metavar="SECONDS",
                    help="with --side-by-side: restart ck-b first with REVIVE_VPID=1 (new pids, its ids virtual), "
                         "then ck-a this many seconds later, with the pids and tids ck-b left free: ck-a's threads "
                         "must get their own tids back (ck-b's restorer must not take them)")
    ap.add_argument("--restart-prefix", default="", help="command (shell words) that runs every revive restart, "
                    "e.g. setpriv dropping capabilities")
    ap.add_argument("--restart-env", action="append", default=[], help="KEY=VALUE for every revive restart")
    ap.add_argument("--launch-arg", action="append", default=[], help="another option for revive launch (--fork...)")
    ap.add_argument("--pid-digits", action="store_true",
                    help="as root: launch with 5-digit kernel pids, restart with 3-digit ones (ns_last_pid), so "
                         "every virtual pid has another number of digits than the kernel's")
    ap.add_argument("prog", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    prog = a.prog[1:] if a.prog and a.prog[0] == "--" else a.prog
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    port = free_port(rng)
    print("seed %d port %d" % (seed, port), flush=True)
    shutil.rmtree(a.workdir, ignore_errors=True)
    ref, work, ck = (os.path.join(a.workdir, d) for d in ("ref", "run", "ck"))
    for d in (ref, work):
        os.makedirs(d)
    env = dict(os.environ, REVIVE_INJECT_LIB=os.path.abspath(a.inject),
               REVIVE_RESTART_BIN=os.path.abspath(a.restart), REVIVE_LOG="0")
    for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD"):
        env.pop(k, None)

    renv = dict(env)  # revive restart's
    for kv in a.restart_env:
        k, _, v = kv.partition("=")
        renv[k] = v
    pre = shlex.split(a.restart_prefix)
    mode = "wb" if a.stdout_trunc else "ab"
    if a.ref_beside and a.pid_digits:
        fail("--ref-beside with --pid-digits: the reference would take the pids the test steers")
    with open(os.path.join(ref, "stdout"), mode) as out:
        ref_proc = subprocess.Popen(prog, cwd=ref, stdout=out, stdin=subprocess.DEVNULL)
    def wait_reference():
        try:
            rc = ref_proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            ref_proc.kill()
            fail("the reference run did not end within 120 s", work)
        print("reference: rc %d" % rc, flush=True)
        return rc
    ref_rc = None if a.ref_beside else wait_reference()

    def next_pids(at):
        # The next pid the kernel gives is at+1 (unless taken). Without root (ns_last_pid is not writable)
        # the test cannot force the digits: it says so and fails rather than pass without the check.
        try:
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(at))
        except OSError as e:
            fail("--pid-digits needs a writable /proc/sys/kernel/ns_last_pid: %s" % e, work)
    if a.pid_digits:
        with open("/proc/sys/kernel/pid_max") as f:
            pid_max = int(f.read())
        if pid_max < 20000:
            fail("--pid-digits needs pid_max >= 20000 (is %d)" % pid_max, work)
        next_pids(min(pid_max, 99999) - 6000)
    launch = [os.path.abspath(a.revive), "launch", "--port", str(port), "--ckpt-dir", ck] + a.launch_arg + ["--"] + prog
    with open(os.path.join(work, "stdout"), mode) as out, open(os.path.join(work, "launch-stderr"), "wb") as err:
        proc = subprocess.Popen(launch, cwd=work, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
    holders = []  # --take-tids
    restored = False  # proc is `revive launch` (= the program) or `revive restart` (the tree's parent)
    most = most_z = few = 0
    for c in range(a.chain + 1):
        for k in range(a.ckpts if c == 0 else 1):
            marker = os.path.join(work, a.during) if a.during and c == 0 else None
            if marker:
                wait_for(lambda: os.path.exists(marker) == (k == 0), proc, work,
                         "%s to %s" % (a.during, "appear" if k == 0 else "go away"))
            time.sleep(rng.uniform(*a.delay))
            if proc.poll() is not None:
                fail("program ended (rc %s) before checkpoint; make it run longer" % proc.returncode, work)
            n, z = checkpoint(a.revive, port, ck, work)
            if marker and k == 0:
                if not os.path.exists(marker):
                    fail("the checkpoint did not end while %s existed (the outside program ran); make it "
                         "run longer" % a.during, work)
                print("checkpoint taken while %s existed" % a.during, flush=True)
            most, most_z = max(most, n), max(most_z, z)
            if n + z < a.each_min:
                few += 1
                print("checkpoint with %d process(es) and %d zombie(s)" % (n, z), flush=True)
                if few > a.each_min_slack:
                    fail("%d checkpoints held fewer than %d processes and zombies together, want <= %d" %
                         (few, a.each_min, a.each_min_slack), work)
        time.sleep(rng.uniform(0, a.delay[0]))
        if proc.poll() is not None:
            fail("program ended (rc %s) before the kill; make it run longer" % proc.returncode, work)
        roots = children(proc.pid) if restored else [proc.pid]
        # The root's threads but its leader (the program's, and the engine's checkpoint thread).
        tids = [int(t) for t in os.listdir("/proc/%d/task" % roots[0]) if int(t) != roots[0]] if a.take_tids else []
        killed = kill_tree(roots, proc.wait)
        if not coordinator_gone(a.revive, port, ck):
            fail("the coordinator did not exit after the tree died", work)
        cmd = pre + [os.path.abspath(a.revive), "restart", "--port", str(port), ck]
        if a.squat and c == 0:
            squat_and_refuse(a.squat, killed[-1], cmd, work, env)
        if a.pid_digits:
            next_pids(300)
        if a.take_tids and c == 0:
            if not tids:
                fail("--take-tids: the root had no thread but its leader", work)
            holders = take_ids(a.take_tids, tids, work)
            print("holding the root's thread ids %s during the restart" % tids, flush=True)
        print("restart %d: %s" % (c, " ".join(cmd)), flush=True)
        with open(os.path.join(work, "restart-stderr-%d" % c), "wb") as err:
            proc = subprocess.Popen(cmd, cwd=work, stdout=err, stderr=err, stdin=subprocess.DEVNULL, env=renv)
        restored = True
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        kill_tree([proc.pid])
        release_ids(holders)
        fail("restored tree did not finish", work)
    release_ids(holders)
    if ref_rc is None:
        ref_rc = wait_reference()
    if most < a.min_procs:
        fail("the checkpoints held at most %d process(es), want >= %d" % (most, a.min_procs), work)
    if most_z < a.min_zombies:
        fail("the checkpoints recorded at most %d zombie(s), want >= %d" % (most_z, a.min_zombies), work)
    if proc.returncode != ref_rc:
        fail("revive restart exited %s, the uninterrupted run %s" % (proc.returncode, ref_rc), work)
    compare_files(a, ref, work, "after restart")
    if not coordinator_gone(a.revive, port, ck):
        fail("restart's coordinator did not exit after the tree ended", work)
    # The same checkpoint again: the files plugin rolls the output files back, the pids come back again.
    for k in range(a.again):
        cmd = pre + [os.path.abspath(a.revive), "restart", "--port", str(port), ck]
        with open(os.path.join(work, "again-stderr-%d" % k), "wb") as err:
            r = subprocess.run(cmd, cwd=work, stdout=err, stderr=err, stdin=subprocess.DEVNULL, env=renv, timeout=120)
        if r.returncode != ref_rc:
            fail("restart %d more of the same checkpoint exited %s, the uninterrupted run %s" % (k + 1, r.returncode, ref_rc),
                 work)
        compare_files(a, ref, work, "restart %d more of the same checkpoint" % (k + 1))
        if not coordinator_gone(a.revive, port, ck):
            fail("the coordinator did not exit after restart %d more" % (k + 1), work)
        print("restart %d more of the same checkpoint: identical, rc %d" % (k + 1, ref_rc), flush=True)
    if a.side_by_side:
        procs = []
        order = ("ck-b", "ck-a") if a.side_virtual_first is not None else ("ck-a", "ck-b")
        ports = {port}
        for name in order:
            copy = os.path.join(a.workdir, name)
            shutil.copytree(ck, copy, symlinks=True)
            p2 = free_port(rng)
            while p2 in ports:
                p2 = free_port(rng)
            ports.add(p2)
            cmd = pre + [os.path.abspath(a.revive), "restart", "--port", str(p2), copy]
            env2 = dict(renv)
            if a.side_virtual_first is not None and name == "ck-b":
                env2["REVIVE_VPID"] = "1"
                env2["REVIVE_LOG"] = "1"
            err = open(os.path.join(work, "side-stderr-" + name), "wb")
            procs.append((name, subprocess.Popen(cmd, cwd=work, stdout=err, stderr=err, stdin=subprocess.DEVNULL, env=env2)))
            if a.side_virtual_first is not None and name == "ck-b":
                time.sleep(a.side_virtual_first)
        for name, p in procs:
            try:
                p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                kill_tree([p.pid])
                fail("the side-by-side restart of %s did not finish" % name, work)
            if p.returncode != ref_rc:
                fail("the side-by-side restart of %s exited %s, the uninterrupted run %s" % (name, p.returncode, ref_rc),
                     work)
        print("two restarts of copies side by side: both rc %d" % ref_rc, flush=True)
    print("OK: %s identical%s, rc %d, up to %d processes per checkpoint" %
          (", ".join(["stdout"] + a.file), " (but for %r)" % a.expect_missing if a.expect_missing else "", ref_rc,
           most), flush=True)

if __name__ == "__main__":
    main()
