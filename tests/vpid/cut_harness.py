"""What tests/vpid's cut drivers (waitcut.py, sigcut.py) share: a program launched under revive in W/run
with gates in W/gates, checkpoints asked for with `revive checkpoint`, every process killed, and restarts
with virtual pids (REVIVE_VPID=1) that return once the program is back."""
import argparse, os, random, shutil, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "proctree"))
from tree_driver import children, fail, kill_tree  # noqa: E402
from e2e_driver import coordinator_gone, free_port  # noqa: E402


def pending(pid):
    """The signals pending for the process or its main thread (status SigPnd | ShdPnd)."""
    bits = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("SigPnd:", "ShdPnd:")):
                bits |= int(line.split()[1], 16)
    return bits


class Harness:
    @classmethod
    def from_argv(cls):
        ap = argparse.ArgumentParser()
        for o in ("--revive", "--inject", "--restart", "--workdir"):
            ap.add_argument(o, required=True)
        ap.add_argument("prog")
        return cls(ap.parse_args())

    def __init__(self, a):
        if os.geteuid() != 0:
            fail("needs root (/proc/sys/kernel/ns_last_pid)")
        self.revive = os.path.abspath(a.revive)
        shutil.rmtree(a.workdir, ignore_errors=True)
        self.work, self.ck, self.gates = (os.path.join(a.workdir, d) for d in ("run", "ck", "gates"))
        for d in (self.work, self.gates):
            os.makedirs(d)
        self.port = free_port(random.Random())
        env = dict(os.environ, REVIVE_INJECT_LIB=os.path.abspath(a.inject),
                   REVIVE_RESTART_BIN=os.path.abspath(a.restart), REVIVE_LOG="0")
        for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD", "REVIVE_SIGNAL"):
            env.pop(k, None)
        self.env, self.renv = env, dict(env, REVIVE_VPID="1")
        self.prog = os.path.abspath(a.prog)

    def launch(self):
        out = open(os.path.join(self.work, "stdout"), "wb")
        with open(os.path.join(self.work, "launch-stderr"), "wb") as err:
            return subprocess.Popen([self.revive, "launch", "--port", str(self.port), "--ckpt-dir", self.ck, "--",
                                     self.prog, self.gates] + getattr(self, "prog_args", []), cwd=self.work, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, env=self.env)

    def to_incarnation_2(self, line):
        """Launch, checkpoint, kill, restart with virtual pids (incarnation 2: new kernel pids, the
        program's ids seen through the table), open gate A, wait for `line`. Returns (restart, program pid)."""
        proc = self.launched_and_restarted(b"started\n", "incarnation 1")
        self.gate("A")
        self.wait_line(line, proc)
        return proc, children(proc.pid)[0]

    def launched_and_restarted(self, line, what):
        """Launch, wait for `line`, checkpoint (`what`), kill, restart with virtual pids. Returns the restart."""
        proc = self.launch()
        self.wait_line(line, proc)
        self.finish_checkpoint(self.checkpoint(), what)
        self.kill_all(proc, [proc.pid])
        return self.restart(1)

    def gate(self, name):
        open(os.path.join(self.gates, name), "w").close()

    def checkpoint(self):
        return subprocess.Popen([self.revive, "checkpoint", "--port", str(self.port), "--ckpt-dir", self.ck],
                                cwd=self.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)

    def finish_checkpoint(self, p, what):
        o, e = p.communicate(timeout=120)
        if p.returncode != 0:
            fail("revive checkpoint (%s) exited %d: %s" % (what, p.returncode, e.decode(errors="replace")), self.work)
        print("checkpoint (%s): %s" % (what, o.decode().strip()), flush=True)

    def restart(self, n):
        """revive restart with virtual pids, once the program is back (a child of the restart)."""
        with open(os.path.join(self.work, "restart-stderr-%d" % n), "wb") as err:
            p = subprocess.Popen([self.revive, "restart", "--port", str(self.port), self.ck], cwd=self.work,
                                 stdout=err, stderr=err, stdin=subprocess.DEVNULL, env=self.renv)
        deadline = time.time() + 60
        while not children(p.pid):
            if p.poll() is not None or time.time() > deadline:
                fail("restart %d did not bring the program back" % n, self.work)
            time.sleep(0.02)
        return p

    def wait_pending(self, pid, ck_proc, mask, what, before_fail=None):
        """Waits until a signal of `mask` is pending in pid while the checkpoint ck_proc runs."""
        deadline = time.time() + 60
        while not pending(pid) & mask:
            if ck_proc.poll() is not None or time.time() > deadline:
                if before_fail:
                    before_fail()
                fail("%s (pending %#x)" % (what, pending(pid)), self.work)
            time.sleep(0.005)

    def kill_all(self, proc, roots):
        kill_tree(roots, proc.wait)
        if not coordinator_gone(self.revive, self.port, self.ck):
            fail("the coordinator did not exit after the program died", self.work)

    def wait_line(self, text, proc):
        deadline = time.time() + 60
        while text not in open(os.path.join(self.work, "stdout"), "rb").read():
            if proc.poll() is not None:
                fail("the program ended (rc %s) before printing %r" % (proc.returncode, text), self.work)
            if time.time() > deadline:
                fail("the program did not print %r within 60 s" % text, self.work)
            time.sleep(0.02)

    def finish(self, proc, want):
        """Waits for the restored program's end: exit 0 and exactly `want` on stdout."""
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            kill_tree([proc.pid])
            fail("the restored program did not finish", self.work)
        text = open(os.path.join(self.work, "stdout"), "rb").read().decode(errors="replace")
        print(text, end="", flush=True)
        if rc != 0 or text != want:
            fail("restart exited %d; stdout %r, want %r" % (rc, text, want), self.work)
