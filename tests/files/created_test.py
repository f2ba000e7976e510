#!/usr/bin/env python3
"""The launch root's walk saves the node-local files the computation created -- told by its creation log
(files plugin, docs/plugins.md "files") -- and no others. created_prog.c makes files in a node-local
directory with mkstemps, mkstemp, creat, open O_CREAT|O_EXCL, open O_CREAT, openat, fopen "w", a child
after exec, a rename into it of a file made in the working directory, a link into it of another (its
first name removed), mknod and mknodat of regular files, and the files posix_spawn's and posix_spawnp's
O_CREAT file actions open in the child (glibc, before the exec: no wrapper runs there), and closes them; meanwhile a process outside the computation (a plain shell, same user)
creates files in the same directory.
  own      checkpoint; the image must hold the computation's files and not the outsider's (searched for
           their marker bytes in the uncompressed image); SIGKILL everything, empty the directory, restart:
           the computation's files are back byte for byte, the outsider's are not; the program's output
           equals an uninterrupted run's.
  again    own, then the restored incarnation makes a second set; checkpoint, SIGKILL, empty the directory,
           restart: both sets are back (the log survives a restart, and files the restart recreated are
           in it).
  damaged  the log torn (5 stray bytes appended), checkpoint; then overwritten with garbage, checkpoint:
           each works, warns naming the log and the reason, and falls back to the birth-time rule (the
           outsider's files are then saved too); restart from the second: the program's files are back.
Failures print FAIL and exit 1. REVIVE_LOCAL_WALK=birth in the environment shows case own failing (that is
how the test was checked)."""
import argparse, os, shutil, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
from harness import fail, run, free_port, clean_env  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from files_test import digest, kill_all  # noqa: E402
import random  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUTSIDER = b"OUTSIDER-MARKER-7f3a"  # bytes of the outsider's files only


def wait_line(path, want, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path) and want in open(path).read().splitlines():
            return
        if proc is not None and proc.poll() is not None:
            fail("program ended (%s) before printing %r: %s" % (proc.returncode, want, open(path).read()[-500:]))
        time.sleep(0.02)
    fail("program did not print %r within %ds" % (want, timeout))


def outsider(node, tag):
    """Files made by a process that is not part of the computation (no LD_PRELOAD), of the same user."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REVIVE_") and k != "LD_PRELOAD"}
    sh = "printf '%s %s\\n' > \"$0/other-$1.txt\"; mkdir -p \"$0/sub-$1\"; printf '%s\\n' > \"$0/sub-$1/x\"" % (
        OUTSIDER.decode(), tag, OUTSIDER.decode())
    r = run(["sh", "-c", sh, node, tag], env=env)
    if r.returncode != 0:
        fail("outsider shell: %s" % r.stderr)
    return [os.path.join(node, "other-%s.txt" % tag), os.path.join(node, "sub-%s" % tag, "x")]


def image_holds(gen, marker):
    for root, _, files in os.walk(gen):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                if marker in fh.read():
                    return True
    return False


class Run:
    def __init__(self, a, d, steps):
        self.a, self.d, self.steps = a, d, steps
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(os.path.join(d, "ctl"))
        self.node = os.path.join(d, "nodetmp")
        os.makedirs(self.node)
        self.ck = os.path.join(d, "ck")
        self.env = clean_env({"REVIVE_LOG": os.environ.get("REVIVE_LOG", "0"), "REVIVE_LOCAL_DIRS": self.node})
        for k in ("REVIVE_LOCAL_WALK",):
            if k in os.environ:
                self.env[k] = os.environ[k]
        self.env.pop("REVIVE_COMPRESS", None)  # the image is searched for marker bytes

    def start(self, prog, port=None):
        argv = [prog, self.node, str(self.steps)]
        cmd = argv if port is None else [self.a.revive, "launch", "--port", str(port), "--ckpt-dir", self.ck, "--"] + argv
        self.port = port
        self.out = os.path.join(self.d, "stdout")
        self.err = os.path.join(self.d, "stderr")
        self.p = subprocess.Popen(cmd, cwd=self.d, env=self.env, stdout=open(self.out, "ab"), stderr=open(self.err, "ab"))

    def ctl(self, name):
        open(os.path.join(self.d, "ctl", name), "w").close()

    def step(self, k):
        self.ctl("step%d" % k)
        wait_line(self.out, "made %d" % k, self.p)

    def own(self, k):
        return [l for l in open(os.path.join(self.d, "names-%d" % k)).read().split()]

    def checkpoint(self):
        r = run([self.a.revive, "checkpoint", "--port", str(self.port), "--ckpt-dir", self.ck], env=self.env, timeout=90)
        if r.returncode != 0:
            fail("checkpoint: %s\nprogram's stderr: %s" % (r.stderr.strip(), open(self.err).read()[-1500:]))
        return r.stdout.strip()

    def kill_and_empty(self):
        kill_all(self.p, self.port)
        shutil.rmtree(self.node)  # a node loss: the node-local directory comes back empty
        os.makedirs(self.node)

    def restart(self):
        self.p = subprocess.Popen([self.a.revive, "restart", "--port", str(self.port), self.ck], cwd=self.d, env=self.env,
                                  stdout=open(self.out, "ab"), stderr=open(self.err, "ab"))

    def finish(self):
        self.ctl("end")
        if self.p.wait(timeout=60) != 0:
            fail("exited %d: %s" % (self.p.returncode, open(self.err).read()[-1500:]))
        return [l for l in open(self.out).read().splitlines() if not l.startswith("made ")]


def wait_files(paths, proc, timeout=30):
    """The restart recreates the files before the program runs on; the program waits for ctl/end."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if all(os.path.exists(p) for p in paths):
            return
        if proc.poll() is not None:
            fail("restart ended (%s) before the files were back" % proc.returncode)
        time.sleep(0.05)
    fail("after restart, missing: %s" % [p for p in paths if not os.path.exists(p)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--revive", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("case", choices=["own", "again", "damaged"])
    a = ap.parse_args()
    a.revive = os.path.abspath(a.revive)
    work = os.path.join(os.path.abspath(a.workdir), "created-" + a.case)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    prog = os.path.join(work, "created_prog")
    r = run(["gcc", "-O1", "-o", prog, os.path.join(HERE, "created_prog.c")])
    if r.returncode != 0:
        fail("cannot build created_prog: %s" % r.stderr)
    steps = 2 if a.case == "again" else 1

    ref = Run(a, os.path.join(work, "ref"), steps)
    ref.start(prog)
    for k in range(1, steps + 1):
        ref.step(k)
    want = ref.finish()
    if len(want) != 14 * steps or any("missing" in l for l in want):
        fail("uninterrupted run printed %r" % want)

    rng = random.Random()
    port = free_port(rng)
    t = Run(a, os.path.join(work, "run"), steps)
    t.start(prog, port)
    t.step(1)
    others = outsider(t.node, "1")
    own = t.own(1)
    sums = {p: digest(p) for p in own}
    log = os.path.join(t.ck, ".revive-created")
    if a.case == "damaged":
        with open(log, "ab") as f:
            f.write(b"\x01\x02\x03\x04\x05")
    gen = t.checkpoint()
    held = image_holds(gen, OUTSIDER)
    if not image_holds(gen, b"mkstemps line 39") or not image_holds(gen, b"child after-exec"):
        fail("%s does not hold the computation's node-local files (mkstemps, child after exec)" % gen)
    if a.case == "damaged":
        err = open(t.err).read()
        if "creation log '%s': torn" % log not in err:
            fail("no warning naming the torn log; stderr: %s" % err[-1500:])
        if not held:
            fail("the torn log did not fall back to the birth-time rule (the outsider's file is not in %s)" % gen)
        with open(log, "wb") as f:
            f.write(os.urandom(96))
        gen = t.checkpoint()
        err = open(t.err).read()
        if "creation log '%s': not a creation log (bad magic)" % log not in err:
            fail("no warning naming the garbage log; stderr: %s" % err[-1500:])
        print("damaged: both checkpoints warned and fell back to birth times", flush=True)
    elif held:
        fail("%s holds the outsider's file (%s): the walk took another program's file" % (gen, OUTSIDER.decode()))
    t.kill_and_empty()
    t.restart()
    wait_files(own, t.p)
    for p in own:
        if digest(p) != sums[p]:
            fail("%s restored with other contents" % p)
    back = [p for p in others if os.path.exists(p)]
    if a.case != "damaged" and back:
        fail("the restart recreated the outsider's files %s" % back)
    print("%s: %d own files restored byte for byte, outsider's %s" % (
        a.case, len(own), "also (fallback)" if back else "not"), flush=True)
    if a.case == "again":
        t.step(2)
        outsider(t.node, "2")
        own2 = [p for p in t.own(2) if p not in own]  # names-2 lists set 1 too
        sums.update({p: digest(p) for p in own2})
        gen = t.checkpoint()
        if image_holds(gen, OUTSIDER):
            fail("%s (after a restart) holds the outsider's file" % gen)
        t.kill_and_empty()
        t.restart()
        wait_files(own + own2, t.p)
        for p in own + own2:
            if digest(p) != sums[p]:
                fail("%s restored with other contents after the second restart" % p)
        print("again: %d files of both incarnations restored after the second restart" % len(own + own2), flush=True)
    got = t.finish()
    if got != want:
        fail("output differs from the uninterrupted run:\n%s\nvs\n%s" % ("\n".join(got), "\n".join(want)))
    shutil.rmtree(work, ignore_errors=True)
    print("created %s: passed" % a.case)


if __name__ == "__main__":
    main()
