"""Shared by tests/hosts, tests/scale and bench/distributed: run `revive`, pick ports, wait for the
coordinator, read manifests. Failures print FAIL and exit 1; a test that cannot run here exits 77 with
the reason (CTest SKIP_RETURN_CODE)."""
import json, os, random, re, signal, socket, subprocess, sys, time

def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)

def skip(msg):
    print("SKIP: " + msg, flush=True)
    sys.exit(77)

def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)

def wait_for(pred, timeout, what, context=lambda: "", step=0.05):
    """pred()'s first true value within timeout seconds; else FAIL naming what, followed by context()."""
    t = time.time()
    while time.time() - t < timeout:
        v = pred()
        if v:
            return v
        time.sleep(step)
    fail("timed out after %d s waiting for %s%s" % (timeout, what, context()))

def run_log(ck):
    """`revive run`'s log in checkpoint directory ck ("" before it exists)."""
    try:
        return open(os.path.join(ck, "run.log")).read()
    except OSError:
        return ""

def run_failures(ck):
    """The failures revive run counted: its "failure N:" lines (other lines may say "failure" too, e.g.
    "... completed within 3 s of the failure", which made run.kills count 6 of 5 once)."""
    return len(re.findall(r"\] failure \d+:", run_log(ck)))

def free_port(rng, host="127.0.0.1"):
    """A random port nobody listens on now (other tests and engineers share the machine)."""
    for _ in range(200):
        port = 20000 + rng.randrange(12000)  # below the ephemeral range (32768-60999): an outgoing connection cannot hold it
        with socket.socket() as s:
            try:
                s.bind((host, port))
                return port
            except OSError:
                continue
    fail("no free port found")

def clean_env(revive_env):
    env = dict(os.environ, **revive_env)
    for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD", "REVIVE_HOST_ID",
              "REVIVE_COORD_HOST"):
        if k not in revive_env:
            env.pop(k, None)
    return env

def status(revive, port, ck, env):
    return run([revive, "status", "--port", str(port), "--ckpt-dir", ck], env=env, timeout=30)

def wait_procs(revive, port, ck, env, n, timeout=60, procs=()):
    """Until the coordinator lists n processes (all connected and idle); fails at once if one of `procs`
    (Popen objects that must stay alive meanwhile) has ended."""
    deadline = time.time() + timeout
    last = ""
    while time.time() < deadline:
        for p in procs:
            if p.poll() is not None:
                fail("%s ended with status %s while waiting for %d processes" % (p.args, p.returncode, n))
        r = status(revive, port, ck, env)
        last = r.stdout + r.stderr
        if r.returncode == 0 and count_procs(r.stdout) == n and status_field(r.stdout, "state") == "idle":
            return r.stdout
        time.sleep(0.1)
    fail("coordinator did not list %d processes within %ds; last status: %s" % (n, timeout, last[-2000:]))

def status_field(text, key):
    """`revive status` prints "key:   value" lines first."""
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if k.strip() == key:
            return v.strip()
    return None

def count_procs(text):
    for line in text.splitlines():
        w = line.replace(":", " ").split()
        if "processes" in w:
            i = w.index("processes")
            for cand in (w[i - 1] if i > 0 else "", w[i + 1] if i + 1 < len(w) else ""):
                if cand.isdigit():
                    return int(cand)
    return -1

def coordinator_gone(revive, port, ck, env, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if status(revive, port, ck, env).returncode != 0:
            return True
        time.sleep(0.1)
    return False

def checkpoint(revive, port, ck, env, want_gen, nprocs):
    t0 = time.time()
    r = run([revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=env, timeout=300)
    secs = time.time() - t0
    if r.returncode != 0:
        fail("revive checkpoint exited %d: %s" % (r.returncode, r.stderr.strip()))
    got = r.stdout.strip()
    if got != os.path.join(ck, "ckpt-%d" % want_gen):
        fail("revive checkpoint printed %r, want generation %d" % (got, want_gen))
    m = json.load(open(os.path.join(got, "MANIFEST.json")))
    if len(m["processes"]) != nprocs:
        fail("%s/MANIFEST.json lists %d processes, want %d" % (got, len(m["processes"]), nprocs))
    return m, secs

def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []

def hosts_parser():
    """The options every tests/hosts driver takes (binaries, scripts/netns.sh, work directory, seed)."""
    import argparse
    ap = argparse.ArgumentParser()
    for opt in ("--revive", "--inject", "--restart", "--workdir"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--netns", required=True, help="scripts/netns.sh")
    ap.add_argument("--seed", type=int, default=None)
    return ap

def with_namespaces(a, prefix, net_base, n, body):
    """Seeds the test (a.seed or random), makes n namespaces prefix1..n on a random /24 of net_base
    (e.g. "10.79"), runs body(rng, seed, prefix, net) and removes them again. Skips (77) with netns.sh's
    reason where namespaces cannot be made."""
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    used = run(["ip", "-o", "-4", "addr"]).stdout
    for _ in range(50):  # a /24 no other interface (another test's bridge) is on
        net = "%s.%d" % (net_base, rng.randrange(200) + 20)
        if " %s." % net not in used:
            break
    # A prefix of this run's own: `netns.sh up` first removes everything with its prefix, so two tests (or
    # two builds' test runs) sharing one would tear down each other's hosts mid-test.
    prefix = "%s%03x" % (prefix, rng.randrange(4096))
    nsenv = dict(os.environ, REVIVE_NETNS_PREFIX=prefix, REVIVE_NETNS_NET=net)
    chk = run(["bash", a.netns, "check"], env=nsenv)
    if chk.returncode == 77:
        skip(chk.stdout.strip())
    r = run(["bash", a.netns, "up", str(n)], env=nsenv)
    if r.returncode != 0:
        fail("netns.sh up %d: %s%s" % (n, r.stdout, r.stderr))
    try:
        body(rng, seed, prefix, net)
    finally:
        # A failed run leaves its programs behind (a restored server waiting for a client that is gone):
        # whatever still runs in the hosts goes with them, so it holds no port or namespace after the test.
        for k in range(1, n + 1):
            for pid in run(["ip", "netns", "pids", "%s%d" % (prefix, k)]).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        # and the coordinators listening on the bridge (a failed restart's may wait for latecomers)
        run(["pkill", "-9", "-f", r"coordinator .*--bind %s( |$)" % re.escape(net + ".1")])
        run(["bash", a.netns, "down"], env=nsenv)

def environ(pid):
    """A process's environment (bytes -> bytes); {} when it is gone."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    except OSError:
        return {}

def descendants(pid):
    """pid and every process below it (all threads' children), for killing a whole job."""
    out, below = [], [pid]  # below: processes whose children are still to be listed
    while below:
        q = below.pop()
        out.append(q)
        try:
            for t in os.listdir("/proc/%d/task" % q):
                below += [int(k) for k in open("/proc/%d/task/%s/children" % (q, t)).read().split()]
        except OSError:
            pass
    return out
