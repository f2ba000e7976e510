#!/usr/bin/env python3
"""Transparent checkpoint/restart of an unmodified MPI job (issue 7).

  mpi_cr.py --revive R --inject I --restart S --mpi openmpi|mpich [-n N] --workdir W [options] -- PROG ARGS...

(a) runs `mpiexec -n N PROG ARGS` natively in W/ref for the reference output (Open MPI's mpiexec, or
    MPICH's mpiexec.mpich; --launcher mpirun for mpirun); with --ref-nosleep the reference runs with its
    second argument (every program's SLEEP_US) 0: the programs print only what they compute, so their
    output does not depend on it, and the 6-8 s run the checkpoints need is paid once, under revive (a
    program whose output did depend on it would make the comparison fail, never pass wrongly);
(b) runs `revive launch --ckpt-dir W/ck -- mpiexec -n N PROG ARGS` in W/run; once the job has printed its
    first line, takes --ckpts checkpoints at random moments (`revive checkpoint`; with --signal the first
    one of each run is asked for by SIGUSR1 to the process `revive launch` became; with --interval S they
    are the coordinator's own), then SIGKILLs the launcher and every rank (the launched process's
    descendants, plus every pid `revive status` lists), and checks the coordinator went away;
(c) `revive restart W/ck`; --chain C checkpoints and kills the restored job again C times;
(d) the restored job's exit status and stdout (W/run/stdout, which the restored mpiexec appends to) must
    equal the reference byte for byte, and so must every --file.
Every failure is one line `FAIL [phase]: what`, the phase saying where it happened (native, launch,
checkpoint K, signal K, kill C, restart C, compare), followed by a diff and the logs (stderr of the
launch and restarts, which carry the ranks' stderr, and the coordinator's log). Every step has a
timeout, and the whole run --timeout seconds (the test never hangs: a stuck job is killed and reported).

--at pre-init|in-init|post-finalize: the first checkpoint is taken while every rank is before MPI_Init
(sleeping 3 s there: MPI_CR_PRE_INIT_MS, progs/common.h), while rank 0 sleeps 3 s before MPI_Init and the
others wait for it inside MPI_Init (MPI_CR_IN_INIT_MS), or after MPI_Finalize (MPI_CR_POST_FINALIZE_MS),
as the ranks say on stderr; before and inside MPI_Init, no rank may be past it when the checkpoint has
completed. Then the kill and
the restart as usual: the restored ranks go through MPI_Init, or end, under the restored mpiexec.

--native-only: only (a), --native-runs times, each run's stdout identical; --cross PROG also runs PROG
(the same program built for the other MPI) under the other MPI's mpiexec and wants the same stdout.
"""
import argparse, difflib, json, os, random, re, shutil, signal, socket, subprocess, sys, time

_tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_tests, "cli"))
sys.path.insert(0, os.path.join(_tests, "proctree"))
from e2e_driver import coordinator_gone, free_port  # the CLI tests' helpers (ports, coordinator)
from tree_driver import children, descendants       # the process-tree tests' /proc walkers

T0 = time.time()
DEADLINE = None  # set from --timeout


def left(cap=None):
    """Seconds left before the overall deadline (at most cap)."""
    t = max(1.0, DEADLINE - time.time())
    return min(t, cap) if cap else t


def say(msg):
    print("[%6.2f] %s" % (time.time() - T0, msg), flush=True)


class Job:
    """What is printed on failure: the work directories and their logs."""
    work = None
    ck = None
    ref = None
    port = None
    revive = None


def tail(path, n=4000):
    try:
        data = open(path, "rb").read()
    except OSError:
        return None
    return data[-n:].decode(errors="replace")


def dump_logs():
    if not Job.work:
        return
    names = sorted(x for x in os.listdir(Job.work) if "stderr" in x or x.startswith("restart-stdout"))
    for name in names:
        t = tail(os.path.join(Job.work, name))
        if t:
            print("--- %s (last 4000 bytes):\n%s" % (name, t), flush=True)
    if Job.ck and os.path.isdir(Job.ck):
        t = tail(os.path.join(Job.ck, "coordinator.log"), 6000)
        if t:
            print("--- coordinator.log (last 6000 bytes):\n%s" % t, flush=True)
        gens = sorted(x for x in os.listdir(Job.ck) if x.startswith("ckpt-"))
        print("--- %s: %s" % (Job.ck, " ".join(
            g + ("" if os.path.exists(os.path.join(Job.ck, g, "MANIFEST.json")) else "(incomplete)") for g in gens)),
            flush=True)


def job_state():
    """What is running when a job is stuck: `revive status`, and the process tree of our job."""
    if Job.port and Job.revive:
        r = run([Job.revive, "status", "--port", str(Job.port), "--ckpt-dir", Job.ck], 15)
        print("--- revive status (exit %s):\n%s%s" % (r.returncode, r.stdout, r.stderr), flush=True)
    for o in OWNED:
        if o.poll() is None:
            tree = [o.pid] + descendants(o.pid)
            print("--- still running: %s" % ", ".join("%d %s" % (p, comm(p)) for p in tree), flush=True)


def misdirected():
    """The job's lines that a restored rank printed to `revive restart`'s own stdout instead of the job's
    (its stdout not reconnected to the launcher)."""
    if not (Job.work and Job.ref):
        return ""
    want = set(open(os.path.join(Job.ref, "stdout"), "rb").read().splitlines())
    notes = []
    for name in sorted(x for x in os.listdir(Job.work) if x.startswith("restart-std")):
        lines = open(os.path.join(Job.work, name), "rb").read().splitlines()
        ours = [x for x in lines if x in want]
        if ours:
            notes.append("%d of the job's stdout lines went to revive restart's %s (%s) instead of the job's stdout, "
                         "from %r" % (len(ours), name.split("-")[1], name, ours[0].decode(errors="replace")))
    return "; ".join(notes)


def fail(phase, msg, diff=None, stuck=False):
    m = misdirected()
    print("FAIL [%s]: %s%s" % (phase, msg, " (" + m + ")" if m else ""), flush=True)
    if diff:
        print(diff, flush=True)
    if stuck:
        job_state()
    dump_logs()
    cleanup()
    sys.exit(1)


def run(cmd, timeout, **kw):
    """A short command: its result, or a CompletedProcess with returncode None on timeout."""
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, **kw)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, None, e.stdout or "", "timed out after %.0f s" % timeout)


# ---- processes ----
def comm(pid):
    try:
        return open("/proc/%d/comm" % pid).read().strip()
    except OSError:
        return "?"


def alive(pid):
    """Exists and is not a zombie."""
    try:
        st = open("/proc/%d/stat" % pid).read()
        return st[st.rindex(")") + 2] != "Z"
    except (OSError, ValueError):
        return False


def session_members(sids):
    """Every live process whose session id is one of sids (the sessions our jobs were started in: orphans
    of a dead mpiexec are found here)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                st = open("/proc/%s/stat" % d).read()
                f = st[st.rindex(")") + 2:].split()
                if int(f[3]) in sids and f[0] != "Z":
                    out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def status_pids(a, port, ck):
    """(pid, prog) of every process `revive status` lists, and the coordinator's pid (None when nothing
    answers). After a restart in a pid namespace these pids are the namespace's: see kill_all's use."""
    r = run([a.revive, "status", "--port", str(port), "--ckpt-dir", ck], 15)
    if r.returncode != 0:
        return [], None
    m = re.search(r"coordinator: pid (\d+)", r.stdout)
    procs = []
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 5 and f[0].isdigit() and f[1].isdigit():
            procs.append((int(f[1]), os.path.basename(f[4])))
    return procs, int(m.group(1)) if m else None


def same_prog(pid, prog):
    """pid runs prog (comm is the first 15 bytes of its name): a pid from revive status is only killed then."""
    return comm(pid) == prog[:15]


OWNED = []  # Popen objects of ours, killed with their trees by cleanup()
SIDS = set()  # the sessions they started (each Popen is a session leader); restored processes keep theirs


def kill_all(roots, extra=(), spare=()):
    """SIGSTOP then SIGKILL the roots, their descendants, `extra` (pids revive status listed) and whatever
    else is left in our jobs' sessions, but for `spare` (a `revive restart` whose job this is, the
    coordinator: they must end by themselves); wait until all are gone. Returns the pids killed (with
    their names) and those still there after 10 s."""
    def everyone():
        s = set(p for p in roots if p) | set(extra) | set(session_members(SIDS))
        for r in list(s):
            s |= set(descendants(r))
        s.discard(os.getpid())
        return sorted(s - set(spare))
    def send(pids, sig):
        for p in pids:
            try:
                os.kill(p, sig)
            except OSError:
                pass
    send(everyone(), signal.SIGSTOP)  # none can react or fork meanwhile
    pids = everyone()
    names = {p: comm(p) for p in pids}
    send(pids, signal.SIGKILL)
    for o in OWNED:  # our own children among them: reap (a zombie holds its pid)
        if o.pid in pids:
            try:
                o.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    deadline = time.time() + 10
    while time.time() < deadline and any(alive(p) for p in pids):
        time.sleep(0.02)
    return names, [p for p in pids if alive(p)]


def our_coordinators():
    """Coordinators serving our checkpoint directory (daemons, outside our trees; their comm is `exe`)."""
    out = []
    if not Job.ck:
        return out
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                argv = open("/proc/%s/cmdline" % d, "rb").read().split(b"\0")
            except OSError:
                continue
            if b"coordinator" in argv and any(x.startswith(Job.ck.encode()) for x in argv) and int(d) != os.getpid():
                out.append(int(d))
    return out


SEEN = {}  # pid -> start time of every process seen in our jobs' trees: orphans that left the tree and
          # our sessions (MPICH's ranks, in sessions of their own once mpiexec.mpich has died) are still ours


NOTED = [0.0]


def starttime(pid):
    try:
        st = open("/proc/%d/stat" % pid).read()
        return int(st[st.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def note_tree(every=0.5):
    """Remembers every process now in our trees and sessions (at most every `every` seconds)."""
    if time.time() - NOTED[0] < every:
        return
    NOTED[0] = time.time()
    for r in [o.pid for o in OWNED if o.poll() is None] + session_members(SIDS):
        for p in [r] + descendants(r):
            if p not in SEEN:
                SEEN[p] = starttime(p)


HELD = []  # (family, port, socket) held by --hold-listeners


def cleanup():
    note_tree(0)
    kill_all([o.pid for o in OWNED if o.poll() is None],
             [p for p, t in SEEN.items() if t is not None and starttime(p) == t])
    left_behind = our_coordinators()
    if left_behind:
        print("--- killing coordinator(s) still running for %s: %s" % (Job.ck, left_behind), flush=True)
    for p in left_behind:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


# ---- listeners held by another program (--hold-listeners) ----
def listening_ports(pids):
    """The TCP ports these processes listen on: (family, port) from /proc/net/tcp{,6} by socket inode."""
    inodes = set()
    for p in pids:
        try:
            for fd in os.listdir("/proc/%d/fd" % p):
                try:
                    t = os.readlink("/proc/%d/fd/%s" % (p, fd))
                except OSError:
                    continue
                if t.startswith("socket:["):
                    inodes.add(t[8:-1])
        except OSError:
            continue
    ports = set()
    for fam, name in ((socket.AF_INET, "/proc/net/tcp"), (socket.AF_INET6, "/proc/net/tcp6")):
        try:
            lines = open(name).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and f[9] in inodes:
                ports.add((fam, int(f[1].rsplit(":", 1)[1], 16)))
    return sorted(ports)


def hold(ports):
    """Another program takes each port (this process binds and listens on it; it never accepts)."""
    held = []
    for fam, port in ports:
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if fam == socket.AF_INET6:  # beside the IPv4 holder of the same port, as the job's own were
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            s.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", port))
            s.listen(16)
            s.setblocking(False)
            held.append((fam, port, s))
        except OSError as e:
            say("hold: port %d (%s): %s" % (port, "v6" if fam == socket.AF_INET6 else "v4", e))
            s.close()
    return held


def held_connections(held):
    """How many connections reached the holders (each should have gone to the restored listener)."""
    n = 0
    for _, _, s in held:
        while True:
            try:
                c, _ = s.accept()
                c.close()
                n += 1
            except OSError:
                break
    return n


# ---- MPI ----
def mpiexec(a, flavor=None):
    flavor = flavor or a.mpi
    names = {("openmpi", "mpiexec"): ["mpiexec.openmpi", "mpiexec"], ("openmpi", "mpirun"): ["mpirun.openmpi", "mpirun"],
             ("mpich", "mpiexec"): ["mpiexec.mpich"], ("mpich", "mpirun"): ["mpirun.mpich"]}[(flavor, a.launcher)]
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    fail("setup", "no %s for %s" % (" or ".join(names), flavor))


def mpi_env(a, flavor=None):
    flavor = flavor or a.mpi
    env = dict(os.environ)
    for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD"):
        env.pop(k, None)
    if flavor == "openmpi":
        # As root, more ranks than cores; the one-sided component that does not crash in compare-and-swap
        # (docs: platform notes).
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
                   OMPI_MCA_osc="ucx")
    if flavor == "mpich":
        # The suite's network-namespace tests add and remove veths and a bridge in this namespace; UCX's
        # init queries every interface it lists, and one removed meanwhile failed MPI_Init ("init_worker
        # ... No such device") or stranded a restarted rank's tcp interface (seen under ctest -j3 beside
        # other agents' netns tests). On one host the ranks need no interface but loopback.
        env.setdefault("UCX_NET_DEVICES", "lo")
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    return env


def job_cmd(a, prog, flavor=None):
    return [mpiexec(a, flavor), "-n", str(a.n)] + a.mpiexec_arg + [os.path.abspath(prog[0])] + prog[1:]


def native(a, prog, d, flavor=None, what="native"):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    cmd = job_cmd(a, prog, flavor)
    t = time.time()
    with open(os.path.join(d, "stdout"), "wb") as out, open(os.path.join(d, "stderr"), "wb") as err:
        env = mpi_env(a, flavor)
        if a.hooks_events:  # beside the run's directory: no run may see, save or roll back another's
            env["HOOKS_EVENTS"] = d + ".ev"
            if os.path.exists(d + ".ev"):
                os.unlink(d + ".ev")
        p = subprocess.Popen(cmd, cwd=d, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                             start_new_session=True)
        OWNED.append(p)
        SIDS.add(p.pid)
        try:
            p.wait(timeout=left(a.native_timeout))
        except subprocess.TimeoutExpired:
            kill_all([p.pid])
            Job.work = d
            fail(what, "%s did not finish within %.0f s" % (" ".join(cmd), a.native_timeout))
    dt = time.time() - t
    if p.returncode != 0:
        Job.work = d
        fail(what, "%s exited %s" % (" ".join(cmd), p.returncode))
    return p.returncode, dt


def diff_text(want, got, wname, gname):
    d = list(difflib.unified_diff(want.decode(errors="replace").splitlines(), got.decode(errors="replace").splitlines(),
                                  wname, gname, lineterm="", n=2))
    if len(d) > 80:
        d = d[:80] + ["... (%d more diff lines)" % (len(d) - 80)]
    return "\n".join(d)


def compare(a, ref, work, phase):
    for name in ["stdout"] + a.file:
        want = open(os.path.join(ref, name), "rb").read()
        try:
            got = open(os.path.join(work, name), "rb").read()
        except OSError as e:
            fail(phase, "%s: %s" % (name, e))
        if want != got:
            i = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
            fail(phase, "%s differs: %d bytes, the reference %d; first difference at byte %d (line %d)"
                 % (name, len(got), len(want), i, want[:i].count(b"\n") + 1),
                 diff_text(want, got, "reference/" + name, "restored/" + name) if name == "stdout" else None)


# ---- checkpoints ----
def generations(ck):
    """Complete generation numbers in ck."""
    out = []
    try:
        for x in os.listdir(ck):
            m = re.fullmatch(r"ckpt-(\d+)", x)
            if m and os.path.exists(os.path.join(ck, x, "MANIFEST.json")):
                out.append(int(m.group(1)))
    except OSError:
        pass
    return sorted(out)


def describe_generation(a, gdir, phase, prog):
    """The manifest's processes; every rank of the job must be in it."""
    try:
        m = json.load(open(os.path.join(gdir, "MANIFEST.json")))
    except (OSError, ValueError) as e:
        fail(phase, "%s/MANIFEST.json: %s" % (gdir, e))
    procs = m.get("processes", [])
    names = [os.path.basename(p.get("prog", "?")) for p in procs]
    ranks = sum(1 for n in names if n == os.path.basename(prog))
    if ranks != a.n:
        fail(phase, "%s holds %d process(es) of %s, want %d ranks; it holds: %s"
             % (gdir, ranks, os.path.basename(prog), a.n, ", ".join(names)))
    return "%d processes (%s)" % (len(procs), ", ".join(sorted(set(names))))


def checkpoint_cmd(a, port, ck, phase, prog):
    """`revive checkpoint`: retried only while no coordinator listens yet (a restart still starting)."""
    note_tree(0)
    t = time.time()
    while True:
        r = run([a.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], left(a.ckpt_timeout))
        if r.returncode is None:
            fail(phase, "revive checkpoint did not return within %.0f s" % a.ckpt_timeout, stuck=True)
        if r.returncode != 0 and "no coordinator is listening" in r.stderr and time.time() - t < 30:
            time.sleep(0.1)
            continue
        break
    if r.returncode != 0:
        fail(phase, "revive checkpoint exited %d after %.2f s: %s" % (r.returncode, time.time() - t, r.stderr.strip()))
    g = r.stdout.strip()
    say("%s: %s in %.2f s, %s" % (phase, g, time.time() - t, describe_generation(a, g, phase, prog)))


def wait_generation(a, ck, after, proc, phase, prog, timeout, what):
    """Until a complete generation newer than `after` appears (asked for by a signal or --interval)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        g = [x for x in generations(ck) if x > after]
        if g:
            gdir = os.path.join(ck, "ckpt-%d" % g[0])
            say("%s: %s, %s" % (phase, gdir, describe_generation(a, gdir, phase, prog)))
            return g[0]
        if proc.poll() is not None:
            fail(phase, "the job ended (exit %s) while waiting for a checkpoint %s" % (proc.returncode, what))
        note_tree()
        time.sleep(0.05)
    fail(phase, "no new complete generation in %s within %.0f s after %s" % (ck, timeout, what), stuck=True)


def wait_lines(path, n, proc, phase, timeout):
    """Until the file has at least n lines (the job is past MPI_Init and running)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if open(path, "rb").read().count(b"\n") >= n:
                return
        except OSError:
            pass
        if proc.poll() is not None:
            fail(phase, "the job ended (exit %s) before printing %d line(s)" % (proc.returncode, n))
        note_tree()
        time.sleep(0.02)
    fail(phase, "the job printed fewer than %d line(s) within %.0f s" % (n, timeout), stuck=True)


def check_hooks(a, ref_ev, run_ev):
    """The hooks' events (tests/hooks/progs/hooks_mpi.c: "rank R active=A", "rank R checkpoint n=K",
    "rank R continue n=K", "rank R restart n=K checkpoints=C", counters kept in the ranks' memory). Natively
    each rank says active=0 and no callback runs. Under revive every rank says active=1 once (a restored
    rank does not start again), then its callbacks in order: a checkpoint callback before each checkpoint
    (the image holds its count), a continue callback after it in the same run (the last one before a kill
    may not have run yet), and in each restored run first a restart callback whose counts are those of the
    image it came from (its continue callback never ran there). The events file lies outside the job's
    directory and is opened per line, so no restart rolls it back."""
    def by_rank(path):
        out = {}
        for line in open(path).read().splitlines():
            m = re.match(r"rank (\d+) (.*)$", line)
            if not m:
                fail("hooks", "%s: a line that is no event: %r" % (path, line))
            out.setdefault(int(m.group(1)), []).append(m.group(2))
        return out
    ref = by_rank(ref_ev) if os.path.exists(ref_ev) else {}
    if ref != {r: ["active=0"] for r in range(a.n)}:
        fail("hooks", "natively every rank must say active=0 and nothing else: %s" % ref)
    got = by_rank(run_ev) if os.path.exists(run_ev) else {}
    runs = [a.ckpts] + [1] * a.chain
    for r in range(a.n):
        ev = got.get(r, [])
        ck = co = re_ = 0
        want = ["active=1"]
        optional = set()
        for c, nck in enumerate(runs):
            image = None
            for k in range(nck):
                ck += 1
                want.append("checkpoint n=%d" % ck)
                image = (ck, co, re_)
                co += 1
                want.append("continue n=%d" % co)
                if k == nck - 1:
                    optional.add(len(want) - 1)  # the kill may come before it
            ck, co, re_ = image
            re_ += 1
            want.append("restart n=%d checkpoints=%d" % (re_, ck))
        # Match, skipping optional lines that are absent.
        i = j = 0
        while i < len(want) and j <= len(ev):
            if j < len(ev) and ev[j] == want[i]:
                i += 1
                j += 1
            elif i in optional:
                i += 1
            else:
                break
        if i != len(want) or j != len(ev):
            fail("hooks", "rank %d's callbacks: want %s (a continue before a kill may be missing), got %s"
                 % (r, want, ev))
    say("hooks: every rank's callbacks ran as expected (%d checkpoint(s), %d restart(s))" % (sum(runs), len(runs)))


def checkpoints(a, rng, port, ck, work, proc, prog, c, restored, run_name, last_gen):
    """Run c's checkpoints (--ckpts of them in the launch, one after each restart); the newest generation."""
    # Past MPI_Init: the first line (after a restart: one more line than the checkpoint had).
    have = open(os.path.join(work, "stdout"), "rb").read().count(b"\n")
    wait_lines(os.path.join(work, "stdout"), max(1, have + 1 if restored else 1), proc, run_name, left(60))
    nck = a.ckpts if c == 0 else 1
    for k in range(nck):
        phase = "checkpoint %d%s" % (k + 1, "" if c == 0 else " after restart %d" % (c - 1))
        if a.interval:
            last_gen = wait_generation(a, ck, last_gen, proc, phase, prog[0], left(a.interval * 3 + a.ckpt_timeout),
                                       "launch --interval %s" % a.interval)
            continue
        time.sleep(rng.uniform(*a.delay))
        if proc.poll() is not None:
            fail(phase, "the job ended (exit %s) before the checkpoint; make it run longer" % proc.returncode)
        if a.signal and k == 0:
            # `revive launch` / `revive restart` with --checkpoint-signal USR1 take it themselves.
            target = proc.pid
            say("signal: SIGUSR1 to pid %d (%s)" % (target, comm(target)))
            os.kill(target, signal.SIGUSR1)
            last_gen = wait_generation(a, ck, max(generations(ck) or [0]), proc, "signal " + phase, prog[0],
                                       left(a.ckpt_timeout), "SIGUSR1 to pid %d" % target)
        else:
            checkpoint_cmd(a, port, ck, phase, prog[0])
            last_gen = max(generations(ck) or [0])
    return last_gen


def checkpoint_at(a, rng, port, ck, work, proc, prog0):
    """--at: the first checkpoint while every rank is before MPI_Init or after MPI_Finalize, or while rank 0
    holds back and the others wait inside MPI_Init."""
    key = {"pre-init": b"before MPI_Init", "post-finalize": b"after MPI_Finalize", "in-init": b"entering MPI_Init"}[a.at]
    want = a.n - 1 if a.at == "in-init" else a.n
    errf = os.path.join(work, "launch-stderr")
    deadline = time.time() + left(60)
    while open(errf, "rb").read().count(key) < want or (
            a.at == "in-init" and b"holding MPI_Init back" not in open(errf, "rb").read()):
        if proc.poll() is not None:
            fail("checkpoint " + a.at, "the job ended (exit %s) before %d rank(s) said %r" % (proc.returncode, a.n, key))
        if time.time() > deadline:
            fail("checkpoint " + a.at, "%d rank(s) did not say %r within 60 s" % (a.n, key), stuck=True)
        time.sleep(0.02)
    time.sleep(rng.uniform(0, 1.0))  # inside the ranks' 3 s there
    checkpoint_cmd(a, port, ck, "checkpoint " + a.at, prog0)
    if a.at in ("pre-init", "in-init") and b"past MPI_Init" in open(errf, "rb").read():
        fail("checkpoint " + a.at, "a rank was past MPI_Init when the checkpoint completed (a loaded machine?): "
             "the test did not test a checkpoint before or inside MPI_Init")
    say("checkpoint %s: generation %d, every rank %s" % (a.at, max(generations(ck) or [0]), key.decode()))


def main():
    global DEADLINE
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--revive")
    ap.add_argument("--inject")
    ap.add_argument("--restart")
    ap.add_argument("--mpi", choices=["openmpi", "mpich"], required=True)
    ap.add_argument("--launcher", choices=["mpiexec", "mpirun"], default="mpiexec")
    ap.add_argument("-n", type=int, default=2, help="ranks")
    ap.add_argument("--mpiexec-arg", action="append", default=[], help="one more argument to mpiexec (before PROG)")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for every run (native too)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--ckpts", type=int, default=2, help="checkpoints before the first kill")
    ap.add_argument("--chain", type=int, default=0, help="checkpoint and kill the restored job this many times more")
    ap.add_argument("--delay", type=float, nargs=2, default=[0.3, 1.2],
                    help="seconds between checkpoints (uniform), the first counted from the job's first line")
    ap.add_argument("--signal", action="store_true",
                    help="ask for the first checkpoint of each run by SIGUSR1 to the launched process")
    ap.add_argument("--interval", type=float, help="revive launch --interval S: wait for --ckpts of its checkpoints")
    ap.add_argument("--file", action="append", default=[], help="a file (in the job's cwd) to compare too")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--log", default="1", help="REVIVE_LOG for launch and restart")
    ap.add_argument("--timeout", type=float, default=280, help="the whole run, seconds")
    ap.add_argument("--native-timeout", type=float, default=60)
    ap.add_argument("--ckpt-timeout", type=float, default=90,
                    help="for revive checkpoint (longer than the coordinator's phase timeout, to see its message)")
    ap.add_argument("--restart-timeout", type=float, default=120, help="for the restored job to finish")
    ap.add_argument("--native-only", action="store_true")
    ap.add_argument("--at", choices=["pre-init", "in-init", "post-finalize"], help="the first checkpoint there (see above)")
    ap.add_argument("--ref-nosleep", action="store_true", help="the reference run with PROG's SLEEP_US (2nd argument) 0")
    ap.add_argument("--native-runs", type=int, default=2)
    ap.add_argument("--hooks-events", action="store_true",
                    help="PROG uses the application hooks (tests/hooks/progs/hooks_mpi.c): every rank's callbacks "
                         "must have run in the right runs with the right counts (check_hooks)")
    ap.add_argument("--cross", help="with --native-only: the program built for the other MPI, same output wanted")
    ap.add_argument("--hold-listeners", action="store_true",
                    help="after each kill, another program takes every TCP port the job listened on, until the end")
    ap.add_argument("prog", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    DEADLINE = T0 + a.timeout
    if a.hooks_events and (a.interval or a.at):
        ap.error("--hooks-events counts the checkpoints it asks for: not with --interval or --at")
    prog = a.prog[1:] if a.prog and a.prog[0] == "--" else a.prog
    if not prog:
        ap.error("no program")
    os.makedirs(a.workdir, exist_ok=True)
    a.workdir = os.path.abspath(a.workdir)
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)

    ref = os.path.join(a.workdir, "ref")
    Job.ref = ref
    ref_prog = prog[:2] + ["0"] + prog[3:] if a.ref_nosleep and len(prog) >= 3 else prog
    rc, dt = native(a, ref_prog, ref)
    ref_out = open(os.path.join(ref, "stdout"), "rb").read()
    nlines = ref_out.count(b"\n")
    say("native (%s, %d ranks): exit %d, %d lines, %.2f s: %s" % (a.mpi, a.n, rc, nlines, dt, " ".join(job_cmd(a, ref_prog))))
    if nlines < 2:
        fail("native", "the reference printed %d line(s); the programs print one per iteration" % nlines)

    if a.native_only:
        runs = [(a.mpi, prog)] * (a.native_runs - 1)
        if a.cross:
            runs.append(("mpich" if a.mpi == "openmpi" else "openmpi", [a.cross] + prog[1:]))
        for k, (flavor, p) in enumerate(runs):
            d = os.path.join(a.workdir, "native-%d" % (k + 1))
            rc2, dt2 = native(a, p, d, flavor, "native %d (%s)" % (k + 1, flavor))
            got = open(os.path.join(d, "stdout"), "rb").read()
            if got != ref_out:
                Job.work = d
                fail("native %d (%s)" % (k + 1, flavor), "stdout differs from the first run's",
                     diff_text(ref_out, got, "first/stdout", "%s/stdout" % os.path.basename(d)))
            for name in a.file:
                if open(os.path.join(d, name), "rb").read() != open(os.path.join(ref, name), "rb").read():
                    fail("native %d (%s)" % (k + 1, flavor), "%s differs from the first run's" % name)
            say("native %d (%s): identical, %.2f s" % (k + 1, flavor, dt2))
        print("OK: %d native run(s) identical" % (len(runs) + 1), flush=True)
        return

    for k, v in (("revive", a.revive), ("inject", a.inject), ("restart", a.restart)):
        if not v or not os.path.exists(v):
            ap.error("--%s: %r does not exist" % (k, v))
    port = free_port(rng)
    say("seed %d port %d" % (seed, port))
    work, ck = os.path.join(a.workdir, "run"), os.path.join(a.workdir, "ck")
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(ck, ignore_errors=True)
    os.makedirs(work)
    Job.work, Job.ck, Job.port, Job.revive = work, ck, port, a.revive
    env = mpi_env(a)
    env.update(REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
               REVIVE_LOG=a.log)
    if a.hooks_events:
        env["HOOKS_EVENTS"] = work + ".ev"
        if os.path.exists(work + ".ev"):
            os.unlink(work + ".ev")
    if a.at:
        env[{"pre-init": "MPI_CR_PRE_INIT_MS", "in-init": "MPI_CR_IN_INIT_MS",
             "post-finalize": "MPI_CR_POST_FINALIZE_MS"}[a.at]] = "3000"
    launch = [os.path.abspath(a.revive), "launch", "--port", str(port), "--ckpt-dir", ck]
    if a.interval:
        launch += ["--interval", str(a.interval)]
    if a.signal:  # revive stays as the job's parent and takes SIGUSR1 itself (docs/cli.md)
        launch += ["--checkpoint-signal", "USR1"]
    launch += ["--"] + job_cmd(a, prog)
    say("launch: " + " ".join(launch))
    out = open(os.path.join(work, "stdout"), "ab")
    with open(os.path.join(work, "launch-stderr"), "wb") as err:
        proc = subprocess.Popen(launch, cwd=work, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    OWNED.append(proc)
    SIDS.add(proc.pid)
    restored = False  # proc: `revive launch` (became mpiexec), then `revive restart` (the job's parent)
    last_gen = 0
    for c in range(a.chain + 1):
        run_name = "launch" if c == 0 else "restart %d" % (c - 1)
        if a.at and c == 0:
            checkpoint_at(a, rng, port, ck, work, proc, prog[0])
            last_gen = max(generations(ck) or [0])
        else:
            last_gen = checkpoints(a, rng, port, ck, work, proc, prog, c, restored, run_name, last_gen)
        # Kill: the launcher and every rank, whoever `revive status` knows too.
        phase = "kill %d" % c
        time.sleep(rng.uniform(0, a.delay[0]))
        if proc.poll() is not None:
            fail(phase, "the job ended (exit %s) before the kill; make it run longer" % proc.returncode)
        note_tree(0)
        listed, coord_pid = status_pids(a, port, ck)
        roots = children(proc.pid) if restored else [proc.pid]
        tree = set(roots) | set(d for r in roots for d in descendants(r))
        outside = [(p, n) for p, n in listed if p not in tree and p != coord_pid]
        if outside:
            say("%s: revive status lists process(es) outside the launched tree: %s"
                % (phase, ", ".join("%d %s (%s)" % (p, n, comm(p)) for p, n in outside)))
        ports = listening_ports(tree) if a.hold_listeners else []
        names, left_over = kill_all(roots, [p for p, n in outside if same_prog(p, n)],
                                    [proc.pid, coord_pid] if restored else [coord_pid])
        say("%s: SIGKILL to %d process(es): %s" % (phase, len(names), ", ".join("%d %s" % kv for kv in names.items())))
        if not (set(roots) & set(names)):  # it ended between the check above and the kill
            fail(phase, "the job ended before the kill (revive %s exited %s); make it run longer"
                 % ("restart" if restored else "launch", proc.poll()))
        if left_over:
            fail(phase, "still there 10 s after SIGKILL: %s" % left_over)
        if restored:
            try:
                proc.wait(timeout=left(30))
            except subprocess.TimeoutExpired:
                fail(phase, "revive restart (pid %d) did not exit within 30 s of its job's death" % proc.pid)
            say("%s: revive restart exited %s" % (phase, proc.returncode))
        if not coordinator_gone(a.revive, port, ck, 15):
            pids, cp = status_pids(a, port, ck)
            fail(phase, "the coordinator (pid %s) still answers 15 s after every process died; it lists %s" % (cp, pids))
        if a.hold_listeners:
            for _, _, h in HELD:
                h.close()
            HELD[:] = hold(ports)
            say("%s: another program holds the job's listening port(s) %s" % (phase, " ".join(str(p) for _, p, _ in HELD)))
            if not HELD:
                fail(phase, "--hold-listeners: no listening port of the job could be held (%s)" % (ports,))
        # Restart.
        phase = "restart %d" % c
        cmd = [os.path.abspath(a.revive), "restart", "--port", str(port)] + \
            (["--checkpoint-signal", "USR1"] if a.signal else []) + [ck]
        say("%s: %s (newest generation ckpt-%d)" % (phase, " ".join(cmd), max(generations(ck) or [0])))
        with open(os.path.join(work, "restart-stdout-%d" % c), "wb") as o, \
                open(os.path.join(work, "restart-stderr-%d" % c), "wb") as err:
            proc = subprocess.Popen(cmd, cwd=work, stdout=o, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
        OWNED.append(proc)
        SIDS.add(proc.pid)
        restored = True
    phase = "restart %d" % a.chain
    try:
        until = time.time() + left(a.restart_timeout)
        while proc.poll() is None and time.time() < until:
            note_tree()
            time.sleep(0.1)
        proc.wait(timeout=0.1)
    except subprocess.TimeoutExpired:
        got = open(os.path.join(work, "stdout"), "rb").read().count(b"\n")
        fail(phase, "the restored job did not finish within %.0f s: stdout has %d of the reference's %d lines"
             % (min(a.restart_timeout, left()), got, nlines), stuck=True)
    say("%s: revive restart exited %s" % (phase, proc.returncode))
    if proc.returncode != rc:
        got = open(os.path.join(work, "stdout"), "rb").read()
        fail(phase, "revive restart exited %s, the native run %s; stdout has %d of the reference's %d lines"
             % (proc.returncode, rc, got.count(b"\n"), nlines), diff_text(ref_out, got, "reference/stdout", "restored/stdout"))
    compare(a, ref, work, "compare")
    if a.hold_listeners:
        n = held_connections(HELD)
        if n:
            fail("compare", "%d connection(s) of the restored job reached the programs holding its old ports" % n)
    if a.hooks_events:
        check_hooks(a, ref + ".ev", work + ".ev")
    if not coordinator_gone(a.revive, port, ck, 15):
        fail("end", "the restart's coordinator did not exit after the job ended")
    print("OK: %s %s -n %d: stdout%s identical after %d checkpoint(s) and %d restart(s) (seed %d)"
          % (a.mpi, os.path.basename(prog[0]), a.n, "".join(", " + f for f in a.file), a.ckpts + a.chain,
             a.chain + 1, seed), flush=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        cleanup()
        raise
