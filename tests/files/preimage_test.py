#!/usr/bin/env python3
"""Files that existed at the checkpoint, were not open at it and were changed after it come back as they
were (pre-images, files plugin, docs/plugins.md "files"). Each case checkpoints, lets the program change
its files, kills everything with SIGKILL at a random moment, restarts, and compares with an uninterrupted
run, byte for byte:
  make     a rebuild (`make -j2`, every source newer than its object) of a 16-file C project built before
           the launch; the assembler truncates its existing object and takes 0.3 s before writing it
           (gcc -B: a wrapper that truncates the output first, as `as` does, then sleeps, then runs
           /usr/bin/as), so the kill lands while an object is empty and newer than its source; one that
           make had not begun (nor queued) at the checkpoint. Without pre-images the restarted make skips
           it and the link fails. (The uninterrupted reference rebuild runs /usr/bin/as without the wait.)
  ops      python3 rewriting files that existed at the checkpoint: O_TRUNC of one whose new contents are
           derived from its old, an append, a rename over one, an unlink of one it read first, an
           in-place r+ rewrite, a truncate(), a symlink renamed over one, a chmod and a utime: run twice from the old state they give other results.
           Restarted, killed again at a random moment, restarted again from the same checkpoint.
  append   a logger that reopens its log O_APPEND for every line, a file appended to with fopen "a" and
           then rewritten with O_TRUNC from its contents (by then longer than at the checkpoint), and one
           appended to and then switched out of O_APPEND (fcntl F_SETFL) and overwritten at offset 0: the
           log must be kept by its size only (a cut-back record, no copy), the others copied at their
           first change that is not an append, of their checkpoint-time bytes only.
  append_rewrite  append_rewrite.c: files opened O_APPEND after the checkpoint (kept by their size only),
           then rewritten in the middle: by pwritev2(RWF_NOAPPEND), through a MAP_SHARED|PROT_WRITE
           mapping, through a read-only shared mapping made writable by mprotect, by
           fallocate(PUNCH_HOLE), by ftruncate of the O_APPEND descriptor; and one truncated by a
           posix_spawn file action (opened in the child before its exec). Killed at a random moment
           after the last of them. Each needs its copy
           before that change (a cut-back alone leaves the rewritten bytes); the log, only appended to,
           keeps its cut-back record only. Also checks (append_rewrite probe) that pwrite, copy_file_range,
           sendfile and splice on an O_APPEND descriptor append or are refused, as the wrappers assume.
  subdir   a child working in a subdirectory of the launch's creates files there with O_CREAT|O_EXCL
           after the checkpoint: the restart must move them aside (as in the root's working directory),
           or the restarted child fails on the first one.
  damaged  ops, then one byte of a pre-image flipped: the restart must refuse naming the file, and change
           nothing; then a record under another file's name (foreign): refused naming both.
Failures print FAIL and exit 1. REVIVE_TEST_NO_PRE=1 restarts without putting pre-images back (moves
.pre aside first): the make and ops cases must then fail (that is how the test was checked).
"""
import argparse, os, random, shutil, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
from harness import descendants, fail, run, free_port, clean_env  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import files_test  # noqa: E402
from files_test import digest, kill_all  # noqa: E402

NFILES = 16

# What every test program starts with: helpers, then it waits for the test's go.
PROLOGUE = r'''
import fcntl, hashlib, os, sys, time
def h(b): return hashlib.sha256(b).hexdigest()[:16]
def rd(p): return open(p, "rb").read()
print("ready", flush=True)
while not os.path.exists("ctl/go"): time.sleep(0.01)
'''

OPS = PROLOGUE + r'''
for step in range(56):
    if step == 5:    # O_TRUNC, new contents from the old
        old = rd("trunc.txt"); open("trunc.txt", "wb").write(h(old).encode() * 3)
    if step == 12:   # append
        with open("app.txt", "ab") as f: f.write(b"appended %s\n" % h(rd("app.txt")).encode())
    if step == 19:   # rename over
        old = rd("ren.txt"); open("ren.new", "wb").write(h(old).encode()); os.rename("ren.new", "ren.txt")
    if step == 26:   # unlink a file read first
        print("del", h(rd("del.txt")), flush=True); os.unlink("del.txt")
    if step == 33:   # r+ in place
        with open("rw.txt", "r+b") as f: d = f.read(); f.seek(0); f.write(h(d).encode())
    if step == 40:   # truncate(2)
        print("tr", h(rd("cut.txt")), flush=True); os.truncate("cut.txt", 10)
    if step == 52:   # metadata alone, derived from the old: chmod and utime
        st = os.stat("mode.txt"); os.chmod("mode.txt", (st.st_mode & 0o777) ^ 0o004)
        os.utime("mode.txt", ns=(st.st_atime_ns, st.st_mtime_ns + 10**11))
    if step == 47:   # a symlink renamed over a file
        print("sym", h(rd("sym.txt")), flush=True); os.symlink("rw.txt", "sym.new"); os.rename("sym.new", "sym.txt")
    print("step", step, flush=True)
    time.sleep(0.02)
while not os.path.exists("ctl/end"): time.sleep(0.01)
for n in ("trunc.txt", "app.txt", "ren.txt", "del.txt", "rw.txt", "cut.txt", "sym.txt"):
    print(n, h(rd(n)) if os.path.exists(n) else "missing", oct(os.lstat(n).st_mode) if os.path.exists(n) else "")
print("mode.txt", oct(os.stat("mode.txt").st_mode), os.stat("mode.txt").st_mtime_ns)
'''

APPEND = PROLOGUE + r'''
for step in range(60):
    fd = os.open("log.txt", os.O_WRONLY | os.O_APPEND)  # a logger reopening its log for every line
    os.write(fd, b"line %d\n" % step)
    os.close(fd)
    with open("mix.txt", "ab") as f: f.write(b"mix %d\n" % step)
    if step == 30:   # rewritten from its contents: O_TRUNC after appends
        old = rd("mix.txt"); open("mix.txt", "wb").write(h(old).encode() + b"\n")
    if step < 40:
        with open("fl.txt", "ab") as f: f.write(b"fl %d\n" % step)
    if step == 40:   # out of O_APPEND, then overwritten at 0 with a digest of the whole
        fd = os.open("fl.txt", os.O_RDWR | os.O_APPEND)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_APPEND)
        os.pwrite(fd, h(rd("fl.txt")).encode(), 0)
        os.close(fd)
    print("step", step, flush=True)
    time.sleep(0.02)
while not os.path.exists("ctl/end"): time.sleep(0.01)
for n in ("log.txt", "mix.txt", "fl.txt"):
    print(n, h(rd(n)), os.path.getsize(n))
'''
APPEND_FILES = ("log.txt", "mix.txt", "fl.txt")
REWRITE_FILES = ("log.txt", "nap.txt", "map.txt", "mpr.txt", "hole.txt", "tru.txt", "spw.txt")
REWRITE_LAST_STEP = 22  # append_rewrite.c's last rewrite (ftruncate of an O_APPEND descriptor)

# A child exec'd in a subdirectory of the launch's (as make -C sub does): the files it creates there after
# the checkpoint (O_CREAT|O_EXCL) must be moved aside at restart, or the restarted child fails on the first.
# (A child forked without exec shares the launch root's state, which always listed its own directory.)
SUBDIR = r'''
import os, subprocess, sys, time
if len(sys.argv) > 1:  # the child, in sub/
    print("ready", flush=True)
    while not os.path.exists("../ctl/go"): time.sleep(0.01)
    for step in range(40):
        with open("out-%d.txt" % step, "xb") as f: f.write(b"%d\n" % step)
        print("child", step, flush=True)
        time.sleep(0.025)
    sys.exit(0)
subprocess.run([sys.executable, os.path.abspath(sys.argv[0]), "child"], cwd="sub", check=True)
while not os.path.exists("ctl/end"): time.sleep(0.01)
print(sorted(n for n in os.listdir("sub") if not n.startswith(".")), flush=True)
'''


def make_project(d, slow):
    files_test.make_project(d, slow_as=True, nfiles=NFILES, nfuncs=20)
    wrapper = os.path.join(d, "slow", "as")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\nexec /usr/bin/as "$@"\n')
    # Built once before the launch; then every source is newer than its object: the launched make rebuilds.
    if run(["make", "-s", "-C", d, "-j2"]).returncode != 0:
        fail("make: the first build failed")
    old = time.time() - 3600
    for n in os.listdir(d):
        if n.endswith(".o") or n == "prog":
            os.utime(os.path.join(d, n), (old, old))
    if slow:  # the uninterrupted reference rebuild needs no window (the objects are the same)
        with open(wrapper, "w") as f:
            # As `as` does: the output is truncated first; here it then stays empty for 0.3 s.
            f.write('#!/bin/sh\nout=\nprev=\nfor a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done\n'
                    '[ -n "$out" ] && : > "$out"\nsleep 0.3\nexec /usr/bin/as "$@"\n')


def kill_under(d):
    """SIGKILLs what is left of a killed run working in d (restored processes need not descend from the
    restart that was killed) and waits until they are gone, so none changes files during the next restart."""
    for _ in range(100):
        left = []
        for q in os.listdir("/proc"):
            try:
                if q.isdigit() and int(q) != os.getpid() and (os.readlink("/proc/%s/cwd" % q) + "/").startswith(d + "/"):
                    os.kill(int(q), 9)
                    left.append(q)
            except OSError:
                pass
        if not left:
            return
        time.sleep(0.05)
    fail("processes working in %s survive SIGKILL" % d)


def wait_for(pred, what, timeout=60):
    t = time.time() + timeout
    while time.time() < t:
        if pred():
            return
        time.sleep(0.01)
    fail("timed out waiting for " + what)


class Case:
    def __init__(self, a, rng):
        self.a, self.rng = a, rng
        self.revive = os.path.abspath(a.revive)
        self.work = os.path.join(os.path.abspath(a.workdir), a.case)
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.env = clean_env({"REVIVE_LOG": os.environ.get("REVIVE_LOG", "1")})
        self.make = a.case == "make"

    def prepare(self, d, slow=True):
        os.makedirs(os.path.join(d, "nodetmp"))
        if self.make:
            make_project(os.path.join(d, "proj"), slow)
            return ["make", "-s", "-j2", "-C", "proj"]
        # The test's signals to the program live in a subdirectory: the restart moves files created after the
        # checkpoint in the program's working directory aside (docs/plugins.md "files").
        os.makedirs(os.path.join(d, "ctl"))
        if self.a.case == "subdir":
            os.makedirs(os.path.join(d, "sub"))
            with open(os.path.join(d, "sub.py"), "w") as f:
                f.write(SUBDIR)
            return ["/usr/bin/python3", "sub.py"]
        if self.a.case == "append_rewrite":
            prog = os.path.join(d, "append_rewrite")
            r = run(["gcc", "-O1", "-o", prog, os.path.join(os.path.dirname(os.path.abspath(__file__)), "append_rewrite.c")])
            if r.returncode != 0:
                fail("cannot build append_rewrite.c: %s" % r.stderr)
            r = run([prog, "probe", os.path.join(d, "probe.txt")])
            if r.returncode != 0:
                fail("append_rewrite probe: %s%s" % (r.stdout, r.stderr))
            for n in REWRITE_FILES:
                with open(os.path.join(d, n), "w") as f:
                    f.write("%s at the start\n" % n * (800 if n == "hole.txt" else 20))
                os.chmod(os.path.join(d, n), 0o640)
                os.utime(os.path.join(d, n), (1000000, 1000000))
            return [prog]
        if self.a.case == "append":
            with open(os.path.join(d, "app.py"), "w") as f:
                f.write(APPEND)
            for n in APPEND_FILES:
                with open(os.path.join(d, n), "w") as f:
                    f.write("%s at the start\n" % n * 20)
                os.chmod(os.path.join(d, n), 0o640)
                os.utime(os.path.join(d, n), (1000000, 1000000))
            return ["/usr/bin/python3", "app.py"]
        with open(os.path.join(d, "ops.py"), "w") as f:
            f.write(OPS)
        for n in ("trunc.txt", "app.txt", "ren.txt", "del.txt", "rw.txt", "cut.txt", "sym.txt"):
            with open(os.path.join(d, n), "w") as f:
                f.write("%s at the start\n" % n * 20)
            os.chmod(os.path.join(d, n), 0o640)
        with open(os.path.join(d, "mode.txt"), "w") as f:
            f.write("mode.txt\n")
        os.chmod(os.path.join(d, "mode.txt"), 0o640)
        os.utime(os.path.join(d, "mode.txt"), (1000000, 1000000))
        return ["/usr/bin/python3", "ops.py"]

    def result(self, d):
        out = open(os.path.join(d, "stdout"), "rb").read()
        if not self.make:
            return out
        proj = os.path.join(d, "proj")
        r = run([os.path.join(proj, "prog")])
        if r.returncode != 0:
            fail("make: the built program exited %d" % r.returncode)
        objs = {n: digest(os.path.join(proj, n)) for n in sorted(os.listdir(proj)) if n.endswith(".o")}
        return out, r.stdout, objs

    def start(self, d, argv, port=None, ck=None):
        cmd = argv if port is None else [self.revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--"] + argv
        e = dict(self.env, TMPDIR=os.path.join(d, "nodetmp"), REVIVE_LOCAL_DIRS=os.path.join(d, "nodetmp"))
        return subprocess.Popen(cmd, cwd=d, env=e, stdin=subprocess.DEVNULL,
                                stdout=open(os.path.join(d, "stdout"), "wb"), stderr=open(os.path.join(d, "stderr"), "wb"))

    def reference(self):
        d = os.path.join(self.work, "ref")
        os.makedirs(d)
        argv = self.prepare(d, slow=False)
        for n in ("go", "end") if not self.make else ():
            open(os.path.join(d, "ctl", n), "w").close()
        p = self.start(d, argv)
        if p.wait(timeout=120) != 0:
            fail("uninterrupted run exited %d: %s" % (p.returncode, open(os.path.join(d, "stderr")).read()[-500:]))
        self.ref = self.result(d)

    def round(self, port):
        d = os.path.join(self.work, "run")
        os.makedirs(d)
        argv = self.prepare(d)
        ck = os.path.join(d, "ck")
        p = self.start(d, argv, port, ck)
        proj = os.path.join(d, "proj")
        if self.make:  # some objects rebuilt before the checkpoint, most after it
            wait_for(lambda: sum(1 for n in os.listdir(proj) if n.endswith(".o") and
                                 os.stat(os.path.join(proj, n)).st_mtime > time.time() - 600) >= 1, "a new object")
        else:
            wait_for(lambda: b"ready" in open(os.path.join(d, "stdout"), "rb").read(), "the program to start")
        r = run([self.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=self.env, timeout=90)
        if r.returncode != 0:
            fail("checkpoint: %s" % r.stderr.strip())
        t_ck = time.time()
        if self.make:
            # Objects whose compilation had begun by the checkpoint come back with their processes, which
            # make them again; the others are make's to start after the restart, which it skips when they
            # look newer than their sources. Kill while one of those, truncated by the stopped run after the
            # checkpoint, is still empty.
            started = {n for n in os.listdir(proj) if n.endswith(".o") and
                       os.stat(os.path.join(proj, n)).st_mtime > time.time() - 600}
            for q in descendants(p.pid):
                try:
                    started |= {w for w in open("/proc/%d/cmdline" % q, "rb").read().decode().split("\0")
                                if w.endswith(".o")}
                except OSError:
                    pass

            # make goes through prog's objects in order and may have decided on the next one or two (its
            # queue of jobs waiting for a slot): only those past them.
            last = max([int(n[1:3]) for n in started if n.startswith("f")] + [-1])

            def truncated():
                for n in os.listdir(proj):
                    st = os.stat(os.path.join(proj, n))
                    if (n.startswith("f") and n.endswith(".o") and int(n[1:3]) > last + 2 and st.st_size == 0
                            and st.st_mtime > t_ck):
                        return True
                return False
            wait_for(truncated, "an object not begun at the checkpoint, truncated after it")
            time.sleep(self.rng.uniform(0, 0.2))
        else:
            open(os.path.join(d, "ctl", "go"), "w").close()
            if self.a.case == "append_rewrite":  # after its last rewrite, anywhere in the appends that follow
                wait_for(lambda: b"step %d\n" % REWRITE_LAST_STEP in open(os.path.join(d, "stdout"), "rb").read(),
                         "the last rewrite")
                time.sleep(self.rng.uniform(0, 0.7))
            else:
                time.sleep(self.rng.uniform(0.15, 1.6))  # anywhere in its changes (0.1-0.85 s) or after them
        if p.poll() is not None:
            fail("the program ended before the kill")
        kill_all(p, port)
        gen = sorted(x for x in os.listdir(ck) if x.startswith("ckpt-"))[-1]
        pre = os.path.join(ck, gen, ".pre")
        npre = len([x for x in os.listdir(pre) if "." not in x]) if os.path.isdir(pre) else 0
        if self.a.case == "damaged":
            return self.damaged(d, ck, pre, port)
        if self.a.case == "append":
            self.check_append_records(d, pre)
        if self.a.case == "append_rewrite":
            self.check_rewrite_records(d, pre)
        made = open(os.path.join(d, "stdout"), "rb").read().count(b"child ")
        if os.environ.get("REVIVE_TEST_NO_PRE") == "1" and os.path.isdir(pre):
            os.rename(pre, pre + "-aside")
        shutil.rmtree(os.path.join(d, "nodetmp"))
        os.makedirs(os.path.join(d, "nodetmp"))
        if not self.make:
            # Restarted once and killed again in the middle of its changes: a pre-image serves any number of
            # restarts of its generation (files the first restarted run changes again keep the first one).
            with open(os.path.join(d, "stdout"), "ab") as out:
                r1 = subprocess.Popen([self.revive, "restart", "--port", str(port), ck], cwd=d, env=self.env,
                                      stdout=out, stderr=subprocess.DEVNULL)
                time.sleep(self.rng.uniform(0.3, 1.5))
                if r1.poll() is not None:
                    fail("the first restart ended before the kill (exit %d); program's stderr: %s"
                         % (r1.returncode, open(os.path.join(d, "stderr")).read()[-800:]))
                kill_all(r1, port)
            kill_under(d)
            open(os.path.join(d, "ctl", "end"), "w").close()
        with open(os.path.join(d, "stdout"), "ab") as out:
            rr = self.restart(port, ck, d, out)
        if rr.returncode != 0:
            fail("restart exited %d: %s\nprogram's stderr: %s" % (rr.returncode, rr.stderr[-1500:],
                                                                   open(os.path.join(d, "stderr")).read()[-1500:]))
        got = self.result(d)
        aside = os.path.join(d, "sub", ".revive-displaced")
        if self.a.case == "subdir" and made and not (os.path.isdir(aside) and os.listdir(aside)):
            fail("subdir: the child's %d files created after the checkpoint were not moved aside" % made)
        if got != self.ref:
            fail("%s: result differs from the uninterrupted run (%d pre-images):\n%r\nvs\n%r"
                 % (self.a.case, npre, str(got)[:1500], str(self.ref)[:1500]))
        print("%s: %d pre-images put back, result identical" % (self.a.case, npre), flush=True)

    @staticmethod
    def records(d, names, n):
        """The copy records ("<dev>-<ino>-<host hash>") and cut-back records ("...+a") of file n."""
        st = os.stat(os.path.join(d, n))
        k = "%d-%d-" % ((os.major(st.st_dev) << 32) | os.minor(st.st_dev), st.st_ino)
        mine = [x for x in names if x.startswith(k) and "." not in x and x[len(k):].rstrip("+a").isdigit()]
        return [x for x in mine if not x.endswith("+a")], [x for x in mine if x.endswith("+a")]

    def check_rewrite_records(self, d, pre):
        """The log, only appended to, has a cut-back record and no copy; every file rewritten after its
        O_APPEND open (and spw.txt, truncated by a spawn's file action) has a copy record (made before
        the rewrite: the kill came after them all)."""
        names = set(os.listdir(pre)) if os.path.isdir(pre) else set()
        copies, cuts = self.records(d, names, "log.txt")
        if not cuts or copies:
            fail("append_rewrite: the log has no cut-back record, or a copy (%s)" % sorted(names))
        for n in REWRITE_FILES[1:]:
            if not self.records(d, names, n)[0]:
                fail("append_rewrite: %s, rewritten after the checkpoint, has no copy record (%s)" % (n, sorted(names)))

    def check_append_records(self, d, pre):
        """The mechanism, not only the outcome: the log, only ever appended to, has a cut-back record and
        no copy; a file whose O_TRUNC rewrite has begun has a copy of its checkpoint-time bytes."""
        names = set(os.listdir(pre)) if os.path.isdir(pre) else set()
        steps = open(os.path.join(d, "stdout"), "rb").read().count(b"step ")
        if steps == 0:
            return
        def key(n):
            st = os.stat(os.path.join(d, n))
            return "%d-%d" % ((os.major(st.st_dev) << 32) | os.minor(st.st_dev), st.st_ino)
        def records(n):  # "<dev>-<ino>-<host hash>" (copy) and "...+a" (cut back) of file n
            k = key(n) + "-"
            mine = [x for x in names if x.startswith(k) and "." not in x and x[len(k):].rstrip("+a").isdigit()]
            return [x for x in mine if not x.endswith("+a")], [x for x in mine if x.endswith("+a")]
        copies, cuts = records("log.txt")
        if not cuts or copies:
            fail("append: the log has no cut-back record, or a copy (%s)" % sorted(names))
        if any(x.startswith(key("log.txt") + "-") and x.endswith(".d") for x in names):
            fail("append: the log was copied (%s)" % sorted(names))
        if steps > 31:  # mix.txt's O_TRUNC (step 30) has begun: its record is a copy (its inode is the same)
            if not records("mix.txt")[0]:
                fail("append: the rewritten file has no copy record (%s)" % sorted(names))

    def restart(self, port, ck, d, out):
        kill_under(d)
        try:
            return subprocess.run([self.revive, "restart", "--port", str(port), ck], cwd=d, env=self.env, stdout=out,
                                  stderr=subprocess.PIPE, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            run(["pkill", "-9", "-f", "(revive|coordinator).*--port %d( |$)" % port])
            fail("the restart did not end in 60 s; program's stderr: %s" % open(os.path.join(d, "stderr")).read()[-1500:])

    def damaged(self, d, ck, pre, port):
        datas = sorted(x for x in os.listdir(pre) if x.endswith(".d") and os.path.getsize(os.path.join(pre, x)))
        if not datas:
            fail("damaged: no pre-image was written")
        victim = os.path.join(pre, datas[0])
        with open(victim, "r+b") as f:
            b = f.read(1)
            f.seek(0)
            f.write(bytes([b[0] ^ 0x20]))
        before = {n: digest(os.path.join(d, n)) for n in os.listdir(d) if n.endswith(".txt")}
        rr = self.restart(port, ck, d, subprocess.DEVNULL)
        after = {n: digest(os.path.join(d, n)) for n in os.listdir(d) if n.endswith(".txt")}
        if rr.returncode == 0:
            fail("damaged: the restart went on with a damaged pre-image")
        if "damaged" not in rr.stderr or os.path.basename(victim) not in rr.stderr or d not in rr.stderr:
            fail("damaged: the error does not name the file and the pre-image: %s" % rr.stderr)
        if before != after:
            fail("damaged: files were changed by the refused restart")
        print("damaged: refused: %s" % rr.stderr.strip().splitlines()[-1], flush=True)
        # A record under a name it does not describe (another generation's, another file's): refused,
        # naming the record and the file it describes.
        with open(victim, "r+b") as f:
            f.write(b)
        recs = sorted(x for x in os.listdir(pre) if "." not in x and "-" in x)
        foreign = os.path.join(pre, "1-2")
        shutil.copyfile(os.path.join(pre, recs[0]), foreign)
        rr = self.restart(port, ck, d, subprocess.DEVNULL)
        after = {n: digest(os.path.join(d, n)) for n in os.listdir(d) if n.endswith(".txt")}
        if rr.returncode == 0:
            fail("damaged: the restart went on with a foreign record")
        if "foreign" not in rr.stderr or foreign not in rr.stderr or d not in rr.stderr:
            fail("damaged: the error does not name the record and its file: %s" % rr.stderr)
        if before != after:
            fail("damaged: files were changed by the refused restart")
        print("damaged: foreign record refused: %s" % rr.stderr.strip().splitlines()[-1], flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--revive", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seed", type=int)
    ap.add_argument("case", choices=["make", "ops", "append", "append_rewrite", "subdir", "damaged"])
    a = ap.parse_args()
    for tool in ("make", "gcc", "python3"):
        if not shutil.which(tool):
            print("SKIP: %s not installed" % tool)
            sys.exit(77)
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    print("seed", seed, flush=True)
    rng = random.Random(seed)
    c = Case(a, rng)
    c.reference()
    c.round(free_port(rng))
    shutil.rmtree(c.work, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
