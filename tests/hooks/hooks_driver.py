#!/usr/bin/env python3
"""Application hooks end to end (docs/hooks.md). PROG (tests/hooks/progs: the C, C++ or Fortran program)
runs once without revive (reference, beside the rest: stdout, and no callback may run), and under
`revive launch`: `revive checkpoint`, SIGKILL of everything, `revive restart`; stdout must equal the
reference byte for byte and the events file must show the callbacks in the right run with the right counts.
--mode plain: a checkpoint at a random moment: checkpoint + continue in the first run, restart (and
  neither of the others) in the restored one, whose memory has checkpoint=1 continue=0.
--mode long: the checkpoint is requested while a long critical section is open (PROG STEPS K MS holds one
  at step K): the checkpoint callbacks run at once, `revive checkpoint` returns only after the section's
  end, and the image is the state right after it (the restored run does not redo the section, and does
  redo the first step after it).
--mode timeout: REVIVE_CRITICAL_TIMEOUT=1 and a longer section: that checkpoint fails with a message
  naming the process and the time; the next one, after the section, succeeds; restart from it.
--mode phase: the same with the default timeout (30 s) under a coordinator started with --phase-timeout 2:
  the process cuts its wait at 90 % of it and says so, instead of being dropped by the coordinator (it
  stays connected: the next checkpoint includes it).
--mode slowcb: the same coordinator, and the first checkpoint callback takes 3 s (HOOKS_CKPT_SLEEP_MS):
  that checkpoint fails at 1.8 s saying the callbacks did not return, the callback still completes and
  the continue callbacks follow it; the next checkpoint succeeds."""
import argparse, os, random, re, shutil, signal, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from e2e_driver import checkpoint, coordinator_gone, fail, free_port, kill, parser, run, wait_connected  # noqa: E402


def events(path):
    try:
        with open(path) as f:
            return [l.rstrip("\n") for l in f]
    except FileNotFoundError:
        return []


def wait_event(path, line, proc, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if line in events(path):
            return
        if proc.poll() is not None:
            fail("the program ended (rc %s) before event %r; events: %s" % (proc.returncode, line, events(path)))
        time.sleep(0.01)
    fail("no event %r within %d s; events: %s" % (line, timeout, events(path)))


def before(ev, a, b):
    if a not in ev or b not in ev or ev.index(a) > ev.index(b):
        fail("events: want %r before %r: %s" % (a, b, ev))


def main():
    ap = parser()
    ap.add_argument("--mode", choices=["plain", "long", "timeout", "phase", "slowcb"], default="plain")
    ap.add_argument("--tag", required=True, help="what the program's callbacks print as tag=")
    ap.add_argument("prog", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    prog = a.prog[1:] if a.prog and a.prog[0] == "--" else a.prog
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    port = free_port(rng)
    print("seed %d port %d mode %s" % (seed, port, a.mode), flush=True)
    shutil.rmtree(a.workdir, ignore_errors=True)
    ref, work, ck, evd = (os.path.join(a.workdir, d) for d in ("ref", "run", "ck", "events"))
    for d in (ref, work, evd):
        os.makedirs(d)
    env = dict(os.environ, REVIVE_INJECT_LIB=os.path.abspath(a.inject),
               REVIVE_RESTART_BIN=os.path.abspath(a.restart), REVIVE_LOG="0")
    for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD", "REVIVE_CRITICAL_TIMEOUT"):
        env.pop(k, None)
    if a.mode == "timeout":
        env["REVIVE_CRITICAL_TIMEOUT"] = "1"
    tag = " tag=" + a.tag

    # Without revive: same program, same library, nothing called back. Beside the launched run (it sleeps
    # most of the time; run first, it added its whole length to the test), checked after the restart.
    ref_ev = os.path.join(evd, "ref.events")
    with open(os.path.join(ref, "stdout"), "wb") as out:
        ref_proc = subprocess.Popen(prog, cwd=ref, stdout=out, stdin=subprocess.DEVNULL,
                                    env=dict(env, HOOKS_EVENTS=ref_ev))

    def check_reference():
        try:
            rc = ref_proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            ref_proc.kill()
            fail("without revive: the run did not end within 120 s")
        want_ref = ["active=0"] + (["long begin", "long end"] + ["after %d" % i for i in range(1, 6)]
                                   if a.mode in ("long", "timeout", "phase") else [])
        if rc != 0 or events(ref_ev) != want_ref:
            fail("without revive: rc %d, events %s, want %s" % (rc, events(ref_ev), want_ref))
        print("without revive: rc 0, no callback ran", flush=True)

    if a.mode in ("phase", "slowcb"):  # launch finds this coordinator listening and joins it
        r = run([a.revive, "coordinator", "--port", str(port), "--ckpt-dir", ck, "--phase-timeout", "2", "--daemon",
                 "--exit-on-last"], env=env)
        if r.returncode != 0:
            fail("revive coordinator --daemon exited %d: %s" % (r.returncode, r.stderr))
    ev = os.path.join(evd, "run.events")
    renv = dict(env, HOOKS_EVENTS=ev)
    if a.mode == "slowcb":
        renv["HOOKS_CKPT_SLEEP_MS"] = "3000"
    lerr = open(os.path.join(a.workdir, "launch.stderr"), "wb")
    with open(os.path.join(work, "stdout"), "wb") as out:
        proc = subprocess.Popen([a.revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--"] + prog, cwd=work,
                                stdout=out, stderr=lerr, stdin=subprocess.DEVNULL, env=renv)
    wait_connected(a.revive, port, ck, 1)
    wait_event(ev, "active=1", proc)
    gen = 1
    if a.mode == "plain":
        time.sleep(rng.uniform(0.2, 0.6))
        checkpoint(a.revive, port, ck, gen)
    elif a.mode == "long":
        wait_event(ev, "long begin", proc)
        checkpoint(a.revive, port, ck, gen)
        seen = events(ev)  # as `revive checkpoint` returned
        before(seen, "long begin", "checkpoint n=1" + tag)  # callbacks are not held back by sections
        before(seen, "checkpoint n=1" + tag, "long end")     # the image waited for the section
    else:
        if a.mode == "slowcb":
            time.sleep(rng.uniform(0.2, 0.6))
        else:
            wait_event(ev, "long begin", proc)
        r = run([a.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], timeout=120)
        msg = r.stderr.strip()
        pat = r"generation 1 failed: .*process %d \((\S+)\) was in a critical section for 1\.\d s " % proc.pid
        if a.mode == "phase":
            pat += r"\(cut short by the coordinator's phase timeout: 1\.8 s\)"
        elif a.mode == "slowcb":
            pat = (r"generation 1 failed: .*process %d \((\S+)\): its checkpoint callbacks did not return within "
                   r"1\.[89] s \(cut short by the coordinator's phase timeout\)" % proc.pid)
        if r.returncode != 1 or not re.search(pat, msg):
            fail("checkpoint during an overlong section: exit %d, %r; want exit 1 and /%s/" % (r.returncode, msg, pat))
        if os.path.exists(os.path.join(ck, "ckpt-1", "MANIFEST.json")):
            fail("the failed generation has a manifest")
        print("the first checkpoint failed as expected: %s" % msg, flush=True)
        # Answered at the deadline, not when the section or the slow callback ended.
        if "long end" in events(ev) or (a.mode == "slowcb" and "checkpoint n=1" + tag in events(ev)):
            fail("the checkpoint was answered only after the section or callback ended: %s" % events(ev))
        wait_event(ev, "continue n=1" + tag, proc)  # a failed checkpoint continues too
        if a.mode != "slowcb":
            wait_event(ev, "long end", proc)
        gen = 2
        checkpoint(a.revive, port, ck, gen)
    n = gen  # callbacks per kind in the first run
    wait_event(ev, "continue n=%d" % n + tag, proc)
    first = events(ev)
    want = ["checkpoint n=%d" % i + tag for i in range(1, n + 1)] + ["continue n=%d" % i + tag for i in range(1, n + 1)]
    got = [l for l in first if l.startswith(("checkpoint", "continue", "restart"))]
    if sorted(got) != sorted(want) or any("restart" in l for l in first):
        fail("first run's callbacks: %s, want %s" % (got, want))
    for i in range(1, n + 1):
        before(first, "checkpoint n=%d" % i + tag, "continue n=%d" % i + tag)
    if "unregistered callback ran" in first:
        fail("an unregistered callback ran")
    if a.tag == "cpp":  # its last continue callback throws: reported on stderr, nothing else happens
        want_err = b"a hooks callback threw: from a continue callback (ignored)"
        deadline = time.time() + 30
        while open(os.path.join(a.workdir, "launch.stderr"), "rb").read().count(want_err) < n:
            if time.time() > deadline:
                fail("the throwing callback was not reported on stderr %d times" % n)
            time.sleep(0.01)
    kill(proc, "launched program")
    if not coordinator_gone(a.revive, port, ck):
        fail("launch's coordinator did not exit after its only process died")
    first = events(ev)

    rerr_path = os.path.join(a.workdir, "restart.stderr")
    with open(rerr_path, "wb") as rerr:
        p = subprocess.run([a.revive, "restart", "--port", str(port), ck], cwd=work, stdout=rerr, stderr=rerr,
                           stdin=subprocess.DEVNULL, env=renv, timeout=120)
    if p.returncode != 0:
        fail("revive restart exited %d: %s" % (p.returncode, open(rerr_path).read()))
    # What the restored run added. The events file may have been rolled back to its checkpoint-time
    # contents (the files plugin restores a file that was open for writing then, as the Fortran unit can
    # be), so the new lines start where the file stops matching the first run, not at its old length.
    after = events(ev)
    same = 0
    while same < min(len(first), len(after)) and first[same] == after[same]:
        same += 1
    second = after[same:]
    want_restart = "restart n=1 checkpoints=%d continues=%d" % (n, n - 1) + tag
    cb = [l for l in second if l.startswith(("checkpoint", "continue", "restart"))]
    if cb != [want_restart]:
        fail("restored run's callbacks: %s, want [%r]" % (cb, want_restart))
    if a.mode == "long":
        if "long end" in second or "long begin" in second:
            fail("the restored run redid the critical section: the image was taken inside it: %s" % second)
        if "after 1" not in second:
            fail("the restored run did not redo the first step after the section: the image was not taken "
                 "right after it: %s" % second)
    check_reference()
    wanted = open(os.path.join(ref, "stdout"), "rb").read()
    got = open(os.path.join(work, "stdout"), "rb").read()
    if got != wanted:
        fail("stdout differs after restart: %d bytes vs %d expected" % (len(got), len(wanted)))
    print("OK: %s; stdout identical (%d bytes); first run %s; restored run %s" % (a.mode, len(got), got_summary(first),
                                                                             cb), flush=True)


def got_summary(ev):
    return [l for l in ev if not l.startswith("after")]


if __name__ == "__main__":
    main()
