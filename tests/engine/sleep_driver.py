#!/usr/bin/env python3
"""Checkpoints a program every 100 ms while it runs (tests/engine, sleeps).

Runs PROG natively (reference), then under LD_PRELOAD=librevive_inject.so while the checkpoint signal is
sent every PERIOD seconds (each one a full checkpoint: every thread is interrupted by the engine's signal).
The run must end with the reference's exit code and stdout, and at least MIN_CKPTS images must have been
written (so the program really was interrupted). Old images are deleted as it goes to bound disk use.
"""
import argparse, glob, os, shutil, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cr_driver

def caught(pid, sig):
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith("SigCgt:"):
                return int(line.split()[1], 16) >> (sig - 1) & 1
    except OSError:
        pass
    return False

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inject", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--period", type=float, default=0.1)
    ap.add_argument("--min-ckpts", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=90)
    ap.add_argument("--max-threads", type=int, default=0,
                    help="the program's own thread count: the engine adds none, even during checkpoints")
    ap.add_argument("prog", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    prog = a.prog[1:] if a.prog and a.prog[0] == "--" else a.prog
    ref, run, ck, ref_rc = cr_driver.prepare(a.workdir, prog, a.timeout)
    print("reference: rc %d" % ref_rc, flush=True)
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(a.inject), REVIVE_CKPT_DIR=os.path.abspath(ck))
    sig = cr_driver.ckpt_signal()
    errpath = os.path.join(a.workdir, "stderr-run")
    with open(os.path.join(run, "stdout"), "wb") as out, open(errpath, "wb") as err:
        proc = subprocess.Popen(prog, cwd=run, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
    deadline = time.time() + a.timeout
    sent = 0
    # Not before the engine's handler is installed: the signal's default action would kill the program.
    while proc.poll() is None and time.time() < deadline and not caught(proc.pid, sig):
        time.sleep(0.01)
    most = 0
    while proc.poll() is None and time.time() < deadline:
        try:
            os.kill(proc.pid, sig)
            sent += 1
        except ProcessLookupError:
            break
        time.sleep(a.period)
        try:
            most = max(most, len(os.listdir("/proc/%d/task" % proc.pid)))
        except OSError:
            pass
        done = sorted(glob.glob(os.path.join(ck, "ckpt-*")), key=lambda p: int(p.rsplit("-", 1)[1]))
        for old in done[:-3]:
            shutil.rmtree(old, ignore_errors=True)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
        sys.exit("FAIL: program did not finish within %ss" % a.timeout)
    gens = [int(p.rsplit("-", 1)[1]) for p in glob.glob(os.path.join(ck, "ckpt-*"))]
    last = max(gens) if gens else 0
    print("%d checkpoint requests, last generation written %d, rc %d" % (sent, last, proc.returncode), flush=True)
    want = open(os.path.join(ref, "stdout"), "rb").read()
    got = open(os.path.join(run, "stdout"), "rb").read()
    problems = []
    if proc.returncode != ref_rc:
        problems.append("exit code %s under checkpoints, %s without" % (proc.returncode, ref_rc))
    if got != want:
        problems.append("stdout differs under checkpoints:\n--- expected:\n%s--- got:\n%s"
                        % (want.decode(errors="replace"), got.decode(errors="replace")))
    if a.max_threads and most > a.max_threads:
        problems.append("the program showed %d threads, it has %d of its own" % (most, a.max_threads))
    if last < a.min_ckpts:
        problems.append("only %d checkpoints were written (want >= %d)" % (last, a.min_ckpts))
    if problems:
        print("FAIL: " + "\n".join(problems))
        print("--- stderr:\n" + open(errpath, "rb").read().decode(errors="replace")[-4000:])
        sys.exit(1)
    print("OK: stdout identical (%d bytes), rc %d" % (len(want), proc.returncode))

if __name__ == "__main__":
    main()
