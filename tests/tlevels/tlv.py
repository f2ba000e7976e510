"""What tests/tlevels' drivers share: the set-up of a 3-host computation with REVIVE_LEVELS, and the uninterrupted
reference run a restarted one is compared with."""
import os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
from harness import clean_env, coordinator_gone, fail, free_port

N = 3

class Setup:
    """Hosts prefix1..N, the root's port on the bridge, the first sub port, fresh work directories
    (ck, ref, run, local) and the environment of every revive command (levels, node-local root)."""
    def __init__(self, a, rng, prefix, net, levels, what, **extra):
        self.hosts = [prefix + str(k + 1) for k in range(N)]
        coord_ip = net + ".1"
        self.port = free_port(rng, coord_ip)
        self.sub = free_port(rng)
        print("port %d %s" % (self.port, what), flush=True)
        shutil.rmtree(a.workdir, ignore_errors=True)
        self.ck, self.ref, self.rund, self.local = (os.path.join(a.workdir, d) for d in ("ck", "ref", "run", "local"))
        for d in (self.ref, self.rund):
            os.makedirs(d)
        self.revive = os.path.abspath(a.revive)
        # REVIVE_LOCAL_DIRS empty: other users of this machine's /dev/shm (MPI jobs of the same uid) would
        # otherwise count as the computation's files and swell every image.
        self.env = clean_env(dict(REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
                                  REVIVE_LOG="0", REVIVE_COORD_HOST=coord_ip, REVIVE_LEVELS=levels,
                                  REVIVE_LOCAL_PATH=self.local, REVIVE_LOCAL_DIRS="", **extra))
        self.placement = ["--port", str(self.port), "--hosts", ",".join(self.hosts), "--launcher", "netns",
                          "--sub-port", str(self.sub)]


def run_reference(worker, ref, script, n):
    """The uninterrupted run: n copies of `script` (bash -c, $0 = the worker) in parallel in ref; their exit codes."""
    refs = [subprocess.Popen(["bash", "-c", script, os.path.abspath(worker)], cwd=ref,
                             env=dict(os.environ, REVIVE_LAUNCH_INDEX=str(i))) for i in range(n)]
    return [p.wait(timeout=120) for p in refs]

def check_like_reference(revive, port, ck, env, m, index, ref_rc, rc, ref, rund, n):
    """A restarted run (exit code rc, outputs in rund) against the uninterrupted one: the restart exits as the
    first copy that failed did (0 if none), every output is byte for byte the same, its coordinator is gone."""
    first = next((ref_rc[index[q["upid"]]] for q in m["processes"] if ref_rc[index[q["upid"]]] != 0), 0)
    if rc != first:
        fail("revive restart exited %d, want %d" % (rc, first))
    for i in range(n):
        if open(os.path.join(ref, "out-%d" % i), "rb").read() != open(os.path.join(rund, "out-%d" % i), "rb").read():
            fail("copy %d: output differs from the uninterrupted run" % i)
    if not coordinator_gone(revive, port, ck, env):
        fail("restart's coordinator did not exit")
