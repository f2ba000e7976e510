#!/usr/bin/env python3
"""End-to-end test of the channels plugin: several programs talking to each other (TCP, ...) are run once
natively (the reference, beside the rest: a port and a directory of its own), then each under `revive
launch` into one computation; while they talk, K
checkpoints are taken (each manifest must list every process), then all are SIGKILLed and brought back
with `revive restart`; with --chain N the restored computation is checkpointed and killed again N times.
Every program's stdout (a regular file) and exit status must equal the reference run's.

  chan_driver.py --revive R --inject I --restart S --workdir W [--checkpoints K] [--chain N]
                 --proc 'PROG ARGS {port}' --proc ...      ({port}: a free TCP port chosen here,
                                                          {dir}: a directory of this run, e.g. for sockets)"""
import argparse, json, os, random, re, shlex, shutil, signal, socket, struct, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
from harness import descendants  # noqa: E402

def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)

def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)

def free_port(rng, avoid=()):
    for _ in range(200):
        port = 20000 + rng.randrange(12000)  # below the ephemeral range (32768-60999): no outgoing
                                             # connection of another test can take it meanwhile
        # Programs use {port} and {port}+1 (a UDP pair: tests/channels/progs): two runs' pairs must not
        # overlap, and a UDP port someone holds is as taken as a TCP one.
        if any(abs(port - p) <= 1 for p in avoid):
            continue
        try:
            for k in (0, 1):
                for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                    with socket.socket(socket.AF_INET, kind) as s:
                        s.bind(("127.0.0.1", port + k))
            return port
        except OSError:
            continue
    fail("no free port")

def port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False

def start(cmds, dirs, prefix, env, stagger, shared):
    os.makedirs(shared)
    procs = []
    for cmd, d in zip(cmds, dirs):
        cmd = [w.replace("{dir}", shared) for w in cmd]
        with open(os.path.join(d, "stdout"), "wb") as out, open(os.path.join(d, "stderr"), "wb") as err:
            procs.append(subprocess.Popen(prefix + cmd, cwd=d, stdout=out, stderr=err,
                                          stdin=subprocess.DEVNULL, env=env, start_new_session=True))
        time.sleep(stagger)
    return procs

def wait_all(procs, what, timeout=120):
    deadline = time.time() + timeout
    rcs = []
    for p in procs:
        try:
            rcs.append(p.wait(max(1, deadline - time.time())))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            fail("%s did not finish in %ds" % (what, timeout))
    return rcs

def checkpoint(a, port, ck, gen, n):
    r = run([a.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], timeout=120)
    if r.returncode != 0:
        fail("revive checkpoint (generation %d) exited %d: %s" % (gen, r.returncode, r.stderr.strip()))
    got = r.stdout.strip()
    if got != os.path.join(ck, "ckpt-%d" % gen):
        fail("revive checkpoint printed %r, want generation %d" % (got, gen))
    m = json.load(open(os.path.join(got, "MANIFEST.json")))
    if len(m["processes"]) != n:
        fail("%s lists %d processes, want %d" % (got, len(m["processes"]), n))
    print("checkpoint %s (%d processes)" % (got, n), flush=True)
    if a.expect_kept:
        kept = kept_bytes(got)
        if not any(sum(v) for v in kept.values()):
            fail("%s: no socket had data kept (chan section: %s); the test did not test what it should" % (got, kept))
        print("  kept by the chan plugin: %s" % kept, flush=True)

def kept_bytes(ckdir):
    """{image: [bytes kept per socket]} from each image's chan section (tag RVCH, count, then per socket u32
    fd, u32 kind, i64 bytes kept: src/plugins/chan/chan_plugin.cpp), found in the image's uncompressed
    tables."""
    out = {}
    for f in sorted(os.listdir(ckdir)):
        if not f.endswith(".rimg"):
            continue
        b = open(os.path.join(ckdir, f), "rb").read()
        i = b.rfind(b"RVCH")
        if i < 0:
            continue
        n = struct.unpack_from("<I", b, i + 4)[0]
        out[f] = [struct.unpack_from("<IIq", b, i + 8 + 16 * k)[2] for k in range(min(n, 64))]
    return out

def alive(procs):
    for i, p in enumerate(procs):
        if p.poll() is not None:
            fail("process %d ended (rc %s) before the checkpoints were done; make it run longer" % (i, p.returncode))

def restored_roots(pid):
    """The programs `revive restart` (pid) brought back: its nearest descendants that are not revive's
    own processes (a restart as an ordinary user runs them under its pid namespace's init and a stand-in
    parent: tests/rootless)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = [int(k) for k in open("/proc/%d/task/%d/children" % (p, p)).read().split()]
        except OSError:
            continue
        for k in kids:
            try:
                comm = open("/proc/%d/comm" % k).read().strip()
            except OSError:
                continue
            (todo if comm == "revive" else out).append(k)
    return out

def main():
    ap = argparse.ArgumentParser()
    for k in ("revive", "inject", "restart", "workdir"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--proc", action="append", required=True)
    ap.add_argument("--checkpoints", type=int, default=3)
    ap.add_argument("--chain", type=int, default=0)
    ap.add_argument("--first", type=float, default=0.5, help="seconds before the first checkpoint")
    ap.add_argument("--gap", type=float, default=0.3, help="seconds between checkpoints")
    ap.add_argument("--stagger", type=float, default=0.2, help="seconds between starting the programs")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--expect-kept", action="store_true", help="every checkpoint must keep data of some "
                    "socket (chan section): the programs make sure something waits in a queue")
    ap.add_argument("--procs", type=int, help="processes in each manifest (default: one per --proc; more "
                    "when the programs fork)")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    coord_port = free_port(rng)
    app_port = free_port(rng, (coord_port,))
    print("seed %d coordinator port %d program port %d" % (seed, coord_port, app_port), flush=True)
    cmds = [shlex.split(p.replace("{port}", str(app_port))) for p in a.proc]
    # The reference runs beside the launched programs (it took a third of each test's time before them): a
    # port and a directory of its own, so the two never meet; the programs' output does not name either.
    ref_port = free_port(rng, (coord_port, app_port))
    ref_cmds = [shlex.split(p.replace("{port}", str(ref_port))) for p in a.proc]
    shutil.rmtree(a.workdir, ignore_errors=True)
    ref = [os.path.join(a.workdir, "ref", str(i)) for i in range(len(cmds))]
    run_dirs = [os.path.join(a.workdir, "run", str(i)) for i in range(len(cmds))]
    ck = os.path.join(a.workdir, "ck")
    for d in ref + run_dirs:
        os.makedirs(d)
    env = dict(os.environ, REVIVE_INJECT_LIB=os.path.abspath(a.inject),
               REVIVE_RESTART_BIN=os.path.abspath(a.restart), REVIVE_LOG="0")
    for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD"):
        env.pop(k, None)

    t0 = time.time()
    ref_procs = start(ref_cmds, ref, [], env, a.stagger, os.path.join(a.workdir, "ref-dir"))
    launch = [a.revive, "launch", "--port", str(coord_port), "--ckpt-dir", ck, "--"]
    procs = start(cmds, run_dirs, launch, env, a.stagger, os.path.join(a.workdir, "run-dir"))
    gen = 0
    # On a loaded machine the coordinator may take a while to listen: wait for it (not for a fixed time).
    deadline = time.time() + 30
    while run([a.revive, "status", "--port", str(coord_port), "--ckpt-dir", ck]).returncode != 0:
        alive(procs)
        if time.time() > deadline:
            fail("the coordinator did not come up within 30 s")
        time.sleep(0.05)
    time.sleep(a.first)
    for _ in range(a.checkpoints):
        alive(procs)
        gen += 1
        checkpoint(a, coord_port, ck, gen, a.procs or len(cmds))
        time.sleep(a.gap)
    alive(procs)
    for p in procs:  # the whole session: a program's forked children too
        os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        p.wait()
    print("killed the launched programs", flush=True)
    for round in range(a.chain + 1):
        # The coordinator of the killed run leaves once its last process is gone (--exit-on-last); until its
        # listening socket is closed too, a restart on its port could reach it while it shuts down.
        deadline = time.time() + 10
        while (run([a.revive, "status", "--port", str(coord_port), "--ckpt-dir", ck]).returncode == 0 or
               not port_free(coord_port)):
            if time.time() > deadline:
                fail("the coordinator of the killed run is still there")
            time.sleep(0.1)
        rs = subprocess.Popen([a.revive, "restart", "--port", str(coord_port), ck], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
        if round == a.chain:
            try:
                out, err = rs.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                rs.kill()
                fail("restarted computation did not finish")
            rcs = rs.returncode
            break
        # Every restored process is back with the coordinator before the checkpoint (on a loaded machine a
        # restore takes more than a fixed pause), then the program runs a while.
        n = a.procs or len(cmds)
        deadline = time.time() + 60
        while True:
            if rs.poll() is not None:
                fail("restarted computation ended before its checkpoint: %s" % rs.communicate()[1])
            st = run([a.revive, "status", "--port", str(coord_port), "--ckpt-dir", ck])
            back = re.search(r"^processes:\s+(\d+)", st.stdout, re.M) if st.returncode == 0 else None
            if back and int(back.group(1)) >= n and re.search(r"^state:\s+idle", st.stdout, re.M):
                break
            if time.time() > deadline:
                fail("the restored processes did not all come back within 60 s: %s" % st.stdout)
            time.sleep(0.05)
        time.sleep(a.first)
        if rs.poll() is not None:
            fail("restarted computation ended before its checkpoint: %s" % rs.communicate()[1])
        gen += 1
        checkpoint(a, coord_port, ck, gen, n)
        kids = restored_roots(rs.pid)
        if len(kids) != len(cmds):
            fail("revive restart has %d children, want %d" % (len(kids), len(cmds)))
        for k in [q for r in kids for q in descendants(int(r))]:  # children the programs forked too
            try:
                os.kill(int(k), signal.SIGKILL)
            except ProcessLookupError:  # it finished on its own meanwhile (a loaded machine): the
                pass                    # next round restarts from the checkpoint just taken anyway
        rs.communicate()
        print("killed restored round %d" % round, flush=True)
    if rcs != 0:
        fail("revive restart exited %d: %s" % (rcs, err.strip()))
    ref_rcs = wait_all(ref_procs, "reference run")
    print("reference: rcs %s, done %.2fs after it started" % (ref_rcs, time.time() - t0), flush=True)
    if any(ref_rcs):
        fail("reference run failed: " + open(os.path.join(ref[ref_rcs.index(next(r for r in ref_rcs if r))],
                                                            "stderr")).read())
    for i in range(len(cmds)):
        want = open(os.path.join(ref[i], "stdout"), "rb").read()
        got = open(os.path.join(run_dirs[i], "stdout"), "rb").read()
        if want != got:
            fail("program %d (%s): output differs from the reference (%d vs %d bytes); stderr: %s\nrestart: %s" %
                 (i, a.proc[i], len(got), len(want), open(os.path.join(run_dirs[i], "stderr")).read()[-2000:],
                  err[-2000:]))
    print("PASS: %d programs, %d checkpoints, outputs identical to the reference" % (len(cmds), gen), flush=True)

if __name__ == "__main__":
    main()
