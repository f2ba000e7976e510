"""What tests/tlevels' drivers share: the set-up of a 3-host computation with REVIVE_LEVELS."""
import os, shutil, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
from harness import clean_env, free_port

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
        self.env = clean_env(dict(REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
                                  REVIVE_LOG="0", REVIVE_COORD_HOST=coord_ip, REVIVE_LEVELS=levels,
                                  REVIVE_LOCAL_PATH=self.local, **extra))
        self.placement = ["--port", str(self.port), "--hosts", ",".join(self.hosts), "--launcher", "netns",
                          "--sub-port", str(self.sub)]
