#!/usr/bin/env python3
"""Transparent checkpoint/restart of an unmodified MPICH job (issue 7): the ring (progs/ring.c) is built
with mpicc.mpich, run natively (the reference), then `revive launch --port P -- mpiexec.mpich -n N ./ring
STEPS`; one checkpoint at a random moment, SIGKILL of every process (launcher, mpiexec.mpich,
hydra_pmi_proxy, ranks), `revive restart`; the job's stdout (a regular file: the restored mpiexec writes
on into it, the files plugin having cut it back to its checkpoint size) and exit status must equal the
reference's byte for byte. Every step has a timeout; a hang is a failure with the processes' states.

  mpich_cr.py --revive R --workdir W [--ranks N] [--steps S] [--env K=V ...] [--seed X]"""
import argparse, os, random, shutil, signal, socket, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
from harness import descendants, free_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

def fail(msg, work=None):
    print("FAIL: " + msg, flush=True)
    if work:
        for f in ("launch.err", "restart.err", "ckpt/coordinator.log"):
            p = os.path.join(work, f)
            if os.path.exists(p):
                print(f"--- {f} (last 40 lines)")
                print("".join(open(p, errors="replace").readlines()[-40:]), flush=True)
    sys.exit(1)

def kill_tree(root):
    """SIGSTOP then SIGKILL the whole tree (stopped first, so nobody reacts to a peer's death)."""
    pids = descendants(root)
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
    return pids

def states(root):
    lines = []
    for p in descendants(root):
        try:
            comm = open(f"/proc/{p}/comm").read().strip()
            wchan = open(f"/proc/{p}/wchan").read().strip()
            lines.append(f"  {p} {comm} {wchan}")
        except OSError:
            pass
    return "\n".join(lines)

def wait(proc, timeout, what, work):
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        st = states(proc.pid)
        kill_tree(proc.pid)
        proc.wait()
        fail(f"{what} did not finish in {timeout} s; its processes were:\n{st}", work)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--revive", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--env", action="append", default=[], help="K=V for the job (natively and under revive)")
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"seed {seed}", flush=True)
    work = os.path.abspath(a.workdir)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ)
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    env.setdefault("REVIVE_COMPRESS_THREADS", "0")  # as the channels tests (docs/channels.md)
    # The suite's network-namespace tests add and remove veths and a bridge in this namespace; UCX's init
    # queries every interface it lists, and one removed meanwhile failed MPI_Init ("init_worker ... No such
    # device") or stranded a restarted rank's tcp interface. On one host the ranks need only loopback.
    env.setdefault("UCX_NET_DEVICES", "lo")
    ring = os.path.join(work, "ring")
    r = subprocess.run(["mpicc.mpich", "-O1", "-o", ring, os.path.join(HERE, "progs", "ring.c")],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("mpicc.mpich: " + r.stderr)
    job = ["mpiexec.mpich", "-n", str(a.ranks), ring, str(a.steps)]

    # Reference: the same job, uninterrupted.
    t0 = time.time()
    with open(os.path.join(work, "ref.out"), "wb") as out:
        ref = subprocess.Popen(job, cwd=work, stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                               env=env, start_new_session=True)
        ref_rc = wait(ref, 120, "the reference run", work)
    native = time.time() - t0
    ref_out = open(os.path.join(work, "ref.out"), "rb").read()
    if ref_rc != 0 or not ref_out:
        fail(f"the reference run failed (status {ref_rc})")

    port = free_port(rng)
    ckpt = os.path.join(work, "ckpt")
    rv = [a.revive]
    with open(os.path.join(work, "job.out"), "wb") as out, open(os.path.join(work, "launch.err"), "wb") as err:
        launch = subprocess.Popen(rv + ["launch", "--port", str(port), "--ckpt-dir", ckpt, "--"] + job, cwd=work,
                                  stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                  start_new_session=True)
    # A random moment after MPI_Init (the first line) and well before the end.
    deadline = time.time() + 60
    while not open(os.path.join(work, "job.out"), "rb").read() and time.time() < deadline:
        if launch.poll() is not None:
            fail(f"the job under revive ended early (status {launch.returncode})", work)
        time.sleep(0.05)
    time.sleep(rng.uniform(0.1, max(0.2, native * 0.5)))
    if launch.poll() is not None:
        fail("the job ended before the checkpoint; give it more --steps", work)
    c = subprocess.run(rv + ["checkpoint", "--port", str(port), "--ckpt-dir", ckpt], capture_output=True,
                       text=True, timeout=120, env=env)
    if c.returncode != 0:
        kill_tree(launch.pid)
        launch.wait()
        fail(f"checkpoint failed ({c.returncode}): {c.stdout}{c.stderr}", work)
    print("checkpoint: " + c.stdout.strip(), flush=True)
    time.sleep(rng.uniform(0, 0.5))  # the job goes on for a while: what it writes now must be taken back
    if launch.poll() is not None:
        fail("the job ended before the kill; give it more --steps", work)
    killed = kill_tree(launch.pid)
    launch.wait()
    print(f"killed {len(killed)} processes", flush=True)

    port2 = free_port(rng)
    with open(os.path.join(work, "restart.out"), "wb") as out, open(os.path.join(work, "restart.err"), "wb") as err:
        rs = subprocess.Popen(rv + ["restart", "--port", str(port2), ckpt], cwd=work, stdout=out, stderr=err,
                              stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        rc = wait(rs, 150, "revive restart", work)
    got = open(os.path.join(work, "job.out"), "rb").read() + open(os.path.join(work, "restart.out"), "rb").read()
    if rc != ref_rc:
        fail(f"restart exit status {rc}, reference {ref_rc}", work)
    if got != ref_out:
        fail(f"output differs from the reference ({len(got)} bytes vs {len(ref_out)}; see {work})", work)
    print("PASS: output identical to the uninterrupted run", flush=True)

if __name__ == "__main__":
    main()
