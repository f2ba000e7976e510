#!/usr/bin/env python3
"""A lazily joining fork child that lives on (docs/process-trees.md "Lazy join") must become a process
of the computation on its own, without a checkpoint, a fork or an exec of its own: `revive status` must
list it a moment after the fork. `wait`: the parent waits in waitpid (its join timer pokes the child at
30 ms). `kill`: the parent is SIGKILLed right after the fork, under a shell that stays in the computation
(the parent's death pokes the child). Either way the child is listed within LIMIT seconds."""
import argparse, os, random, shutil, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from e2e_driver import coordinator_gone, free_port, run

LIMIT = 1.0  # the child lives 2.5 s; 30 ms (timer) or ~0 (parent's death) plus a loaded machine's HELLO

def main():
    ap = argparse.ArgumentParser()
    for k in ("revive", "inject", "restart", "workdir", "prog"):
        ap.add_argument("--" + k, required=True)
    a = ap.parse_args()
    env = dict(os.environ, REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
               REVIVE_LOG="0")
    for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD"):
        env.pop(k, None)
    rng = random.Random()
    failed = False
    for mode in ("wait", "kill"):
        work = os.path.join(a.workdir, mode)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        ck = os.path.join(work, "ck")
        port = free_port(rng)
        cmd = "%s %s 2500; sleep 0.5" % (a.prog, mode)
        launch = subprocess.Popen([a.revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--", "/bin/sh", "-c", cmd],
                                  cwd=work, stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "stderr"), "wb"),
                                  stdin=subprocess.DEVNULL, env=env)
        pidfile = os.path.join(work, "child.pid")
        deadline = time.time() + 20
        while not os.path.exists(pidfile) and time.time() < deadline:
            time.sleep(0.005)
        if not os.path.exists(pidfile):
            print("FAIL %s: the child never wrote child.pid" % mode, flush=True)
            failed = True
        else:
            child = open(pidfile).read().strip()
            seen_at = None
            start = time.time()
            while time.time() - start < LIMIT:
                r = run([a.revive, "status", "--port", str(port), "--ckpt-dir", ck])
                if any(line.split()[1:2] == [child] for line in r.stdout.splitlines()):
                    seen_at = time.time() - start
                    break
                time.sleep(0.02)
            if seen_at is None:
                print("FAIL %s: child %s not in the computation %.1f s after it started:\n%s" % (mode, child, LIMIT, r.stdout),
                      flush=True)
                failed = True
            else:
                print("%s: child %s listed %.3f s after its pid file" % (mode, child, seen_at), flush=True)
        try:
            launch.wait(timeout=30)
        except subprocess.TimeoutExpired:
            launch.kill()
            launch.wait()
        coordinator_gone(a.revive, port, ck)
    if not failed:
        shutil.rmtree(a.workdir, ignore_errors=True)
    sys.exit(1 if failed else 0)

if __name__ == "__main__":
    main()
