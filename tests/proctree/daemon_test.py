#!/usr/bin/env python3
"""A daemonizing program under `revive launch` (docs/process-trees.md "Lazy join"): the launched process
forks and _exits at once, so its child has not joined the coordinator when its parent leaves. The parent
must let it join first: a checkpoint taken the moment `revive launch` returns must find the coordinator
still there with the daemon in it (without that, the coordinator saw the computation empty and ended).
A second checkpoint later, SIGKILL of the daemon, `revive restart`: the daemon's output must equal an
uninterrupted run's, byte for byte."""
import argparse, json, os, random, shutil, signal, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from e2e_driver import coordinator_gone, free_port, run

def fail(msg, work=None):
    print("FAIL: " + msg, flush=True)
    for name in sorted(os.listdir(work)) if work else []:
        if "stderr" in name:
            print("--- %s:\n%s" % (name, open(os.path.join(work, name), "rb").read().decode(errors="replace")[-3000:]))
    sys.exit(1)

def wait_file(path, timeout, what, work):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            fail("timed out waiting for " + what, work)
        time.sleep(0.01)

def checkpoint(revive, port, ck, work, what):
    r = run([revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], timeout=60)
    if r.returncode != 0:
        fail("%s: revive checkpoint exited %d: %s" % (what, r.returncode, r.stderr.strip()), work)
    m = json.load(open(os.path.join(r.stdout.strip(), "MANIFEST.json")))
    print("%s: %s (%d processes)" % (what, r.stdout.strip(), len(m["processes"])), flush=True)
    if len(m["processes"]) != 1:
        fail("%s holds %d processes, want the daemon alone" % (what, len(m["processes"])), work)

def main():
    ap = argparse.ArgumentParser()
    for k in ("revive", "inject", "restart", "workdir", "prog"):
        ap.add_argument("--" + k, required=True)
    a = ap.parse_args()
    rng = random.Random()
    port = free_port(rng)
    shutil.rmtree(a.workdir, ignore_errors=True)
    ref, work, ck = (os.path.join(a.workdir, d) for d in ("ref", "run", "ck"))
    for d in (ref, work):
        os.makedirs(d)
    env = dict(os.environ, REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
               REVIVE_LOG="0")
    for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD"):
        env.pop(k, None)
    with open(os.path.join(ref, "stdout"), "wb") as out:
        subprocess.run([a.prog], cwd=ref, stdout=out, stdin=subprocess.DEVNULL, timeout=60)
    wait_file(os.path.join(ref, "finished"), 30, "the uninterrupted daemon", ref)

    launch = [a.revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--", a.prog]
    with open(os.path.join(work, "stdout"), "wb") as out, open(os.path.join(work, "launch-stderr"), "wb") as err:
        r = subprocess.run(launch, cwd=work, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, timeout=60)
    if r.returncode != 0:
        fail("revive launch exited %d" % r.returncode, work)
    checkpoint(a.revive, port, ck, work, "checkpoint as the parent left")
    wait_file(os.path.join(work, "daemon.pid"), 10, "daemon.pid", work)
    pid = int(open(os.path.join(work, "daemon.pid")).read())
    time.sleep(rng.uniform(0.3, 0.8))
    checkpoint(a.revive, port, ck, work, "checkpoint later")
    if os.path.exists(os.path.join(work, "finished")):
        fail("the daemon finished before the kill; make it run longer", work)
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 10
    while os.path.exists("/proc/%d" % pid) and time.time() < deadline:
        time.sleep(0.01)
    if not coordinator_gone(a.revive, port, ck):
        fail("the coordinator did not exit after the daemon died", work)
    with open(os.path.join(work, "restart-stderr"), "wb") as err:
        r = subprocess.run([a.revive, "restart", "--port", str(port), ck], cwd=work, stdout=err, stderr=err,
                           stdin=subprocess.DEVNULL, env=env, timeout=60)
    if r.returncode != 0:
        fail("revive restart exited %d" % r.returncode, work)
    wait_file(os.path.join(work, "finished"), 30, "the restored daemon", work)
    if not coordinator_gone(a.revive, port, ck):
        fail("restart's coordinator did not exit after the daemon ended", work)
    want = open(os.path.join(ref, "stdout"), "rb").read()
    got = open(os.path.join(work, "stdout"), "rb").read()
    if got != want:
        fail("stdout differs after restart (%d bytes, want %d)" % (len(got), len(want)), work)
    print("OK: the daemon's stdout identical after restart", flush=True)

if __name__ == "__main__":
    main()
