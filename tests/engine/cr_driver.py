#!/usr/bin/env python3
"""Checkpoint/kill/restart driver for the transparent engine (tests/engine).

Runs PROG once natively (reference), then under LD_PRELOAD=librevive_inject.so: after a random delay it
asks for a checkpoint (the checkpoint signal sent from outside, the engine's standalone trigger), waits
for the image to be durable, SIGKILLs the program, restarts it with revive-restart and requires the
same stdout (a regular file, restored by the fd plugin), the same extra files and the same exit code.
"""
import argparse, glob, os, random, shutil, signal, subprocess, sys, time

STDERR_FILES = []

def fail(msg):
    print("FAIL: " + msg, flush=True)
    for path in STDERR_FILES:  # what the engine and the restarter said
        try:
            text = open(path, "rb").read().decode(errors="replace")
        except OSError:
            continue
        if text:
            print("--- %s:\n%s" % (path, text[-4000:]), flush=True)
    sys.exit(1)

def wait_image(ckdir, gen, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        imgs = glob.glob(os.path.join(ckdir, "ckpt-%d" % gen, "*.rimg"))
        if imgs:
            return imgs[0]
        time.sleep(0.02)
    fail("no image for generation %d in %s after %ds" % (gen, ckdir, timeout))

def prepare(workdir, prog, timeout):
    """Empties workdir, makes its ref/, run/ and ck/ folders and runs prog once natively in ref/ (its
    stdout in ref/stdout). Returns the three paths and the reference's exit code."""
    shutil.rmtree(workdir, ignore_errors=True)
    ref, run, ck = (os.path.join(workdir, d) for d in ("ref", "run", "ck"))
    for d in (ref, run, ck):
        os.makedirs(d)
    with open(os.path.join(ref, "stdout"), "wb") as out:
        r = subprocess.run(prog, cwd=ref, stdout=out, stdin=subprocess.DEVNULL, timeout=timeout)
    return ref, run, ck, r.returncode

def ckpt_signal():
    return int(os.environ.get("REVIVE_SIGNAL", signal.SIGRTMAX - 2))

def checkpoint_and_kill(proc, ckdir, first_gen, count, dmin, dmax, rng, trigger=True):
    img = None
    for k in range(count):
        time.sleep(rng.uniform(dmin, dmax))
        if proc.poll() is not None:
            fail("program ended (rc %s) before checkpoint %d; make it run longer" % (proc.returncode, k + 1))
        if trigger:
            os.kill(proc.pid, ckpt_signal())
        img = wait_image(ckdir, first_gen + k, 60)
        print("checkpoint %d: %s (%d bytes)" % (first_gen + k, img, os.path.getsize(img)), flush=True)
    time.sleep(rng.uniform(0, dmin))
    if proc.poll() is not None:
        fail("program ended (rc %s) before it could be killed; make it run longer" % proc.returncode)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if proc.returncode != -signal.SIGKILL:
        fail("program was not killed by SIGKILL (rc %s)" % proc.returncode)
    return img

FLAGS = {"compressed": 1, "sparse": 2, "forked": 4}  # FileHeader::flags (src/image/format.h)

def check_flags(img, names):
    with open(img, "rb") as f:
        flags = int.from_bytes(f.read(24)[20:24], "little")
    for n in names:
        if not flags & FLAGS[n]:
            fail("image %s lacks the %s flag (flags %#x)" % (img, n, flags))

def check_lazy(proc, img, prog):
    # A lazy restart maps the image's page runs: the image must show up in the restored process's maps.
    # Wait until the engine dropped the restarter's own mappings (its view of the image among them), in
    # the exec'ed process (not python's child before the exec). /proc/PID/exe may name revive-restart or,
    # set again by the restarter (PR_SET_MM_EXE_FILE), the program.
    real = os.path.realpath(img)
    prog_real = os.path.realpath(shutil.which(prog) or prog)
    python = os.path.realpath(sys.executable)
    deadline = time.time() + 10
    missing = 0
    while time.time() < deadline and proc.poll() is None:
        try:
            exe = os.path.realpath("/proc/%d/exe" % proc.pid)
            maps = open("/proc/%d/maps" % proc.pid).read()
        except OSError:
            break
        # A writable private mapping of the image is a lazily restored region (the restarter's own view of
        # the image is read-only): seen as soon as the memory is restored, even if the program then ends
        # before the restarter's mappings are gone from the list (an exiting process's maps read empty).
        if any(real in l and len(l.split()) > 1 and "w" in l.split()[1] for l in maps.splitlines()):
            return
        if exe != python and "revive-restart" not in maps and maps:
            if real in maps:
                return
            # Not yet the restored program: inside an execve (python's exec of the restarter, or the
            # restarter's own re-exec after a layout collision) the new mm holds only the stack until the
            # binary is mapped, while /proc/PID/exe already names revive-restart (seen once in CI at load
            # 6 on 2 cores: "not mapped"). The restored program always maps its own executable; and only a
            # view that holds over several readings counts.
            if prog_real not in maps:
                missing = 0
                time.sleep(0.01)
                continue
            missing += 1
            if missing >= 5:
                fail("lazy restart: %s is not mapped in the restored process" % real)
        else:
            missing = 0
        time.sleep(0.01)
    fail("lazy restart: could not observe the restored process's mappings")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inject", required=True)
    ap.add_argument("--restart", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--delay", type=float, nargs=2, default=[0.3, 0.8])
    ap.add_argument("--ckpts", type=int, default=1, help="checkpoints before the kill; restart from the last")
    ap.add_argument("--chain", type=int, default=0, help="checkpoint+kill the restarted program this many times")
    ap.add_argument("--lazy", action="store_true")
    ap.add_argument("--env", action="append", default=[], help="K=V for the checkpointed run")
    ap.add_argument("--file", action="append", default=[], help="output file (in the cwd) to compare too")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--interval", action="store_true",
                    help="no trigger: the engine checkpoints by itself (REVIVE_INTERVAL in --env)")
    ap.add_argument("--save-image", help="only checkpoint once, kill, and copy the image here (fixture)")
    ap.add_argument("--stdout-anywhere", action="store_true",
                    help="stdout = the original's file + the restarts' stdout (for when fd 1 is not restored)")
    ap.add_argument("--restart-prefix", default="", help="command words to run revive-restart under")
    ap.add_argument("--expect-restart-stderr", default=None, help="text the restart must print on stderr")
    ap.add_argument("--restart-env", action="append", default=[], help="K=V for the restart only")
    ap.add_argument("--expect-flag", action="append", default=[], choices=sorted(FLAGS),
                    help="images must carry this header flag")
    ap.add_argument("prog", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    prog = a.prog[1:] if a.prog and a.prog[0] == "--" else a.prog
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print("seed %d" % seed, flush=True)
    t0 = time.time()
    ref, run, ck, ref_rc = prepare(a.workdir, prog, a.timeout)
    ref_time = time.time() - t0
    print("reference: rc %d in %.2fs" % (ref_rc, ref_time), flush=True)

    env = dict(os.environ)
    env.update(LD_PRELOAD=os.path.abspath(a.inject), REVIVE_CKPT_DIR=os.path.abspath(ck))
    for kv in a.env:
        k, v = kv.split("=", 1)
        env[k] = v
    rst_env = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    for kv in a.restart_env:
        k, v = kv.split("=", 1)
        rst_env[k] = v
    stdout_path = os.path.join(run, "stdout")
    out = open(stdout_path, "wb")
    errpath = os.path.join(a.workdir, "stderr-run")
    STDERR_FILES.append(errpath)
    err = open(errpath, "wb")
    proc = subprocess.Popen(prog, cwd=run, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
    out.close()
    err.close()
    # The random moments must fall inside the program's run whatever the machine's speed: fit every planned
    # sleep into the first half of the reference run time (a quiet machine runs the program much faster).
    dmin, dmax = a.delay
    planned = a.ckpts * dmax + dmin
    if planned > 0.5 * ref_time:
        scale = 0.5 * ref_time / planned
        dmin, dmax = dmin * scale, dmax * scale
        print("delays scaled by %.2f to fit a %.2fs run" % (scale, ref_time), flush=True)
    img = checkpoint_and_kill(proc, ck, 1, a.ckpts, dmin, dmax, rng, trigger=not a.interval)
    check_flags(img, a.expect_flag)
    if a.save_image:
        shutil.copyfile(img, a.save_image)
        print("OK: image saved to %s" % a.save_image)
        return
    gen = a.ckpts + 1
    for c in range(a.chain + 1):
        cmd = a.restart_prefix.split() + [os.path.abspath(a.restart)] + (["--lazy"] if a.lazy else []) + [img]
        print("restart: " + " ".join(cmd), flush=True)
        rout = open(os.path.join(run, "restart-stdout-%d" % c), "wb")
        errpath = os.path.join(a.workdir, "stderr-restart-%d" % c)
        STDERR_FILES.append(errpath)
        rerr = open(errpath, "wb")
        proc = subprocess.Popen(cmd, cwd=run, stdout=rout, stderr=rerr, stdin=subprocess.DEVNULL, env=rst_env)
        rout.close()
        rerr.close()
        if a.lazy:
            check_lazy(proc, img, prog[0])
        if c < a.chain:
            # Checkpoint the restored process (same upid, next generation) and kill it again.
            img = checkpoint_and_kill(proc, ck, gen, 1, dmin, dmax, rng)
            gen += 1
            continue
        try:
            proc.wait(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("restarted program did not finish within %ss" % a.timeout)
    rc = proc.returncode
    if a.expect_restart_stderr is not None:
        text = open(STDERR_FILES[-1], "rb").read().decode(errors="replace")
        if a.expect_restart_stderr not in text:
            fail("restart stderr lacks %r" % a.expect_restart_stderr)
    if rc != ref_rc:
        fail("exit code %s after restart, %s without checkpointing" % (rc, ref_rc))
    for name in ["stdout"] + a.file:
        want = open(os.path.join(ref, name), "rb").read()
        got = open(os.path.join(run, name), "rb").read()
        if name == "stdout" and a.stdout_anywhere:
            for c in range(a.chain + 1):
                got += open(os.path.join(run, "restart-stdout-%d" % c), "rb").read()
        if want != got:
            fail("%s differs after restart: %d bytes vs %d expected; first difference at byte %d"
                 % (name, len(got), len(want), next((i for i in range(min(len(got), len(want)))
                                                     if got[i] != want[i]), min(len(got), len(want)))))
    print("OK: %s identical (%d bytes), rc %d" % (", ".join(["stdout"] + a.file), len(want), rc), flush=True)

if __name__ == "__main__":
    main()
