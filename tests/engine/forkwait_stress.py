#!/usr/bin/env python3
"""Many standalone checkpoints of a program that is half of the time between fork() and waitpid(), taken
under CPU load with compression workers and a forked writer (issue 13: engine.compress_mt_fork's cause,
run 200 times under load). Every image is restarted and must go on exactly as the program would.

The cause of the old failure ('step 80: fork/wait failed'): a standalone checkpoint restores one process,
so one taken while the program had a child came back to a waitpid() that fails with ECHILD. The engine now
defers such a checkpoint until no child exists (src/plugins/proctree/proctree_plugin.cpp).

  forkwait_stress.py --inject LIB --restart BIN --workdir DIR --prog forkwait [--count N] [--hogs H]

One run of `forkwait STEPS 5` (a 5 ms child, 5 ms alone per step) under LD_PRELOAD gets N checkpoints
(the checkpoint signal at random moments 5-40 ms apart, each waited for), then SIGKILL. Then each image
in turn: its stdout file is set to the whole reference output (so the restore sees a file that grew since
the checkpoint and truncates it back to the checkpoint's size, as after a real kill), revive-restart runs
it for a moment, SIGKILL; the process must still be running and the file must be a prefix of the
reference output (a failed waitpid prints 'step N: waitpid failed' and exits 1).
"""
import argparse, glob, os, random, shutil, signal, subprocess, sys, time

STEPS = 5000


def fail(msg, errfiles=()):
    print("FAIL: " + msg, flush=True)
    for p in errfiles:
        try:
            t = open(p, "rb").read().decode(errors="replace")
        except OSError:
            continue
        if t:
            print("--- %s:\n%s" % (p, t[-3000:]), flush=True)
    sys.exit(1)


def wait_image(ck, gen, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        imgs = glob.glob(os.path.join(ck, "ckpt-%d" % gen, "*.rimg"))
        if imgs:
            return imgs[0]
        if proc.poll() is not None:
            return None
        time.sleep(0.002)
    return None


def main():
    ap = argparse.ArgumentParser()
    for k in ("--inject", "--restart", "--workdir", "--prog"):
        ap.add_argument(k, required=True)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--hogs", type=int, default=1, help="busy loops beside the test (load)")
    ap.add_argument("--seed", type=int)
    a = ap.parse_args()
    a.prog = os.path.abspath(a.prog)
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print("seed %d" % seed, flush=True)
    wd = os.path.abspath(a.workdir)
    shutil.rmtree(wd, ignore_errors=True)
    run, ck = os.path.join(wd, "run"), os.path.join(wd, "ck")
    os.makedirs(run)
    os.makedirs(ck)
    ref = subprocess.run([a.prog, str(STEPS), "0"], stdout=subprocess.PIPE, timeout=120).stdout
    if not ref.endswith(b"\n") or b"failed" in ref:
        fail("reference run: %r" % ref[-200:])

    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(a.hogs)]
    try:
        body(a, rng, run, ck, ref)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    shutil.rmtree(wd, ignore_errors=True)


def body(a, rng, run, ck, ref):
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(a.inject), REVIVE_CKPT_DIR=ck, REVIVE_COMPRESS="1",
               REVIVE_COMPRESS_THREADS="2", REVIVE_FORK="1")
    rst_env = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    out_path, err_path = os.path.join(run, "stdout"), os.path.join(run, "stderr-run")
    sig = int(os.environ.get("REVIVE_SIGNAL", signal.SIGRTMAX - 2))
    t0 = time.time()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen([a.prog, str(STEPS), "5"], cwd=run, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, env=env)
    time.sleep(0.1)
    for g in range(1, a.count + 1):
        time.sleep(rng.uniform(0.005, 0.04))
        if proc.poll() is not None:
            fail("the program ended (rc %s) before checkpoint %d" % (proc.returncode, g), [err_path])
        os.kill(proc.pid, sig)
        if wait_image(ck, g, proc) is None:
            fail("no image for checkpoint %d" % g, [err_path])
    proc.kill()
    proc.wait()
    print("%d checkpoints in %.1fs" % (a.count, time.time() - t0), flush=True)

    t0 = time.time()
    for g in range(1, a.count + 1):
        img = glob.glob(os.path.join(ck, "ckpt-%d" % g, "*.rimg"))[0]
        with open(out_path, "wb") as f:
            f.write(ref)
        rerr = os.path.join(run, "stderr-restart")
        with open(rerr, "wb") as e:
            r = subprocess.Popen([os.path.abspath(a.restart), img], cwd=run, stdout=subprocess.DEVNULL, stderr=e,
                                 stdin=subprocess.DEVNULL, env=rst_env)
        # Until the restore has put the file back to the checkpoint's size (under load that alone can take
        # longer than the moment the program then runs), then a moment of running.
        deadline = time.time() + 20
        while r.poll() is None and time.time() < deadline and os.path.getsize(out_path) == len(ref):
            time.sleep(0.005)
        time.sleep(0.08)
        alive = r.poll() is None
        r.kill()
        r.wait()
        got = open(out_path, "rb").read()
        if not alive:
            fail("image %d: the restarted program ended (rc %s); its output ends %r"
                 % (g, r.returncode, got[-200:]), [rerr])
        if not ref.startswith(got) or len(got) == len(ref):
            fail("image %d: the restarted program's output is not the reference's start (%d of %d bytes); ends %r"
                 % (g, len(got), len(ref), got[-200:]), [rerr])
        shutil.rmtree(os.path.join(ck, "ckpt-%d" % g))
    print("%d images restarted and went on correctly in %.1fs" % (a.count, time.time() - t0), flush=True)
    print("OK")


if __name__ == "__main__":
    main()
