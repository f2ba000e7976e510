#!/usr/bin/env python3
"""Crash consistency of transparent multi-level storage (docs/storage-levels.md, "Transparent images"):
a 3-host computation with REVIVE_LEVELS=L1+L2 (every other run: L1+L3, XOR over the three hosts) is
killed (SIGKILL of every process of it: the programs, the host parts, the sub-coordinators and the root)
--kills times, each at a random moment 20-120 ms after a checkpoint was asked for (so before, during or
after the images are written and exchanged between the hosts), and restarted with `revive restart --hosts` each time from whatever the killed run left: every
restart must come back from the newest generation complete at a level; the last run finishes and its
outputs and exit status must equal an uninterrupted run's. With --fork the computation is launched
with `revive launch --fork` (a kill may land while the programs run again and their writers, the exchange
and the manifest are still under way) and restarted with `revive restart --fork`: a checkpoint of the last
restored run must be written by every process's forked writer (the engine's line for it, REVIVE_LOG=2)."""
import os, shutil, signal, subprocess, sys, threading, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *
from tlv import N, Setup


def main():
    ap = hosts_parser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--fork", action="store_true")
    a = ap.parse_args()
    with_namespaces(a, "rvk", "10.86", N, lambda rng, seed, prefix, net: test(a, rng, seed, prefix, net))

def ours(ck):
    """Every process of the computation: they all carry REVIVE_CKPT_DIR=ck (the test itself does not)."""
    tag = b"REVIVE_CKPT_DIR=" + ck.encode()
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                if tag in open("/proc/%s/environ" % d, "rb").read().split(b"\0"):
                    out.append(int(d))
            except OSError:
                pass
    return out

def kill_all(ck):
    for _ in range(100):
        pids = ours(ck)
        if not pids:
            return
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)
    fail("processes of the computation survive SIGKILL: %s" % ours(ck))

def forked_after_restart(a, revive, port, ck, env, cli_env, run_, rund):
    """The restored computation (`revive restart --fork`) checkpoints with forked writers: every one of its
    processes' engines says its image of that generation was written by the forked writer."""
    wait_procs(revive, port, ck, env, N, procs=[run_])
    r = run([revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=cli_env, timeout=60)
    if r.returncode != 0:
        fail("checkpoint after revive restart --fork: exit %d: %s" % (r.returncode, r.stderr.strip()))
    gen_dir = "/" + os.path.basename(r.stdout.strip()) + "/"
    deadline = time.time() + 20
    while True:  # the writers' lines come once each image is durable, around the manifest
        lines = [l for i in range(N) for l in open(os.path.join(rund, "err-%d" % i), errors="replace").read().splitlines()
                 if "image written by the forked writer: " in l and gen_dir in l]
        if len(lines) >= N:
            break
        if time.time() > deadline:
            fail("after revive restart --fork, %s: %d of %d processes say a forked writer wrote their image" %
                 (gen_dir.strip("/"), len(lines), N))
        time.sleep(0.1)
    print("checkpoint %s after revive restart --fork: %d forked writers" % (gen_dir.strip("/"), len(lines)), flush=True)

def test(a, rng, seed, prefix, net):
    print("seed %d" % seed, flush=True)
    t = Setup(a, rng, prefix, net, "L1+L2", "kills %d" % a.kills, REVIVE_CKPT_DIR=os.path.join(a.workdir, "ck"),
              REVIVE_GROUP_SIZE="3")
    hosts, port, ck, ref, rund, revive, env = t.hosts, t.port, t.ck, t.ref, t.rund, t.revive, t.env
    script = 'exec "$0" $((900 + 13 * REVIVE_LAUNCH_INDEX)) 2 > out-$REVIVE_LAUNCH_INDEX'
    if a.fork:  # each program's own stderr (appended: a shared one is written at each restored offset)
        script += ' 2>> err-$REVIVE_LAUNCH_INDEX'
    cli_env = {k: v for k, v in env.items() if k != "REVIVE_CKPT_DIR"}  # not killed with the computation
    refs = [subprocess.Popen(["bash", "-c", script, os.path.abspath(a.worker)], cwd=ref,
                             env=dict(os.environ, REVIVE_LAUNCH_INDEX=str(i))) for i in range(N)]
    common = t.placement
    launch = [revive, "launch"] + common + (["--fork"] if a.fork else []) + ["--ckpt-dir", ck, "-n", str(N), "--", "bash", "-c", script,
                                            os.path.abspath(a.worker)]
    restart = [revive, "restart"] + common + (["--fork"] if a.fork else []) + [ck]  # restored processes follow its WELCOME
    if a.fork:  # the processes' level (the restored ones keep their launch's): their forked writers say so
        env["REVIVE_LOG"] = "2"
    errlog = open(os.path.join(a.workdir, "stderr"), "wb")
    t0 = time.time()
    kills, gens, run_ = 0, 0, None
    while True:
        cmd = launch if run_ is None else restart
        # The policy is the root's, read when it starts: every other run writes XOR parity instead of
        # partner copies, so restarts also come back from the other kind than the run writes.
        env["REVIVE_LEVELS"] = ("L1+L2", "L1+L3")[kills % 2]
        run_ = subprocess.Popen(cmd, cwd=rund, stdout=subprocess.DEVNULL, stderr=errlog, stdin=subprocess.DEVNULL, env=env)
        if kills == a.kills:
            if a.fork:
                forked_after_restart(a, revive, port, ck, env, cli_env, run_, rund)
            break
        c0 = time.time()
        wait_procs(revive, port, ck, env, N, procs=[run_])
        up = time.time() - c0
        if gens == 0:  # something to come back to before the first kill
            m, _ = checkpoint(revive, port, ck, env, 1, N)
            index = {q["upid"]: int(environ(q["pid"]).get(b"REVIVE_LAUNCH_INDEX", b"-1")) for q in m["processes"]}
            gens = 1
        res = {}
        def ask():
            t = time.time()
            r = run([revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=cli_env, timeout=60)
            res["t"], res["rc"], res["err"] = time.time() - t, r.returncode, r.stderr.strip()[-200:]
        asked = threading.Thread(target=ask)
        asked.start()
        time.sleep(rng.uniform(0.02, 0.12))
        kill_all(ck)
        asked.join()
        run_.wait()
        kills += 1
        print("kill %d: up in %.2f s, cycle %.2f s, checkpoint %s" % (kills, up, time.time() - c0, res), flush=True)
    try:
        run_.wait(timeout=120)
    except subprocess.TimeoutExpired:
        run_.kill()
        fail("the last restart did not finish")
    for p in refs:
        p.wait()
    complete = sorted(int(d[5:]) for d in os.listdir(ck) if d.startswith("ckpt-") and
                      os.path.exists(os.path.join(ck, d, "MANIFEST.json")))
    print("%d kills in %.1f s; complete generations %s" % (kills, time.time() - t0, complete), flush=True)
    err = open(os.path.join(a.workdir, "stderr")).read()
    if "cannot be restored" in err or "no intact copy" in err:
        fail("a restart did not find the newest complete generation intact:\n" + err[-3000:])
    # The first non-zero status in manifest order (upid), as `revive restart --hosts` reports it.
    want = next((refs[index[u]].returncode for u in sorted(index) if refs[index[u]].returncode != 0), 0)
    if run_.returncode != want:
        fail("the last run exited %d, want %d; stderr:\n%s" % (run_.returncode, want, err[-3000:]))
    for i in range(N):
        if open(os.path.join(ref, "out-%d" % i), "rb").read() != open(os.path.join(rund, "out-%d" % i), "rb").read():
            fail("copy %d: output differs from the uninterrupted run" % i)
    kill_all(ck)
    shutil.rmtree(a.workdir, ignore_errors=True)
    print("OK: %d kills, outputs identical, exit %d" % (kills, run_.returncode), flush=True)

if __name__ == "__main__":
    main()
