#!/usr/bin/env python3
"""`revive launch --hosts h1,h2 -n 4 --launcher netns -- PROG` end to end over two network namespaces:
copy i runs on host i mod 2 (its own namespace), told REVIVE_LAUNCH_INDEX=i and REVIVE_LAUNCH_SIZE=4,
in the launching directory, connected to a sub-coordinator on its host (the host's address, sub port +
host index) that relays to the root; a checkpoint's manifest records every copy's host; each copy's output
equals an uninterrupted run's and the exit status is the first non-zero copy status in index order over
all hosts (copy 0 exits 0, copies 1 and 2 with different non-zero statuses: the old per-host-part rule,
h1's copies 0,2 before h2's 1,3, would give copy 2's). Bad input (a host name
with shell syntax, a template without {cmd}) is exit 2 before any coordinator starts."""
import os, shutil, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

N = 4

def main():
    ap = hosts_parser()
    ap.add_argument("--worker", required=True)
    a = ap.parse_args()
    with_namespaces(a, "rvl", "10.83", 2, lambda rng, seed, prefix, net: test(a, rng, seed, prefix, net))

def test(a, rng, seed, prefix, net):
    hosts = [prefix + "1", prefix + "2"]
    coord_ip = net + ".1"
    port = free_port(rng, coord_ip)
    sub = free_port(rng)
    print("seed %d port %d subs %d,%d" % (seed, port, sub, sub + 1), flush=True)
    shutil.rmtree(a.workdir, ignore_errors=True)
    ck, ref, rund = (os.path.join(a.workdir, d) for d in ("ck", "ref", "run"))
    os.makedirs(ref)
    os.makedirs(rund)
    revive = os.path.abspath(a.revive)
    env = clean_env(dict(REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
                         REVIVE_LOG="0", REVIVE_COORD_HOST=coord_ip))
    # Copy i: the worker with 200 + 7i rounds (so a mix-up shows), stdout to out-i of the current directory;
    # it exits (total % 5) + 10: 13 for copy 1, 10 for copy 2. Copy 0's bash runs it as a child and exits 0.
    script = ('if [ $REVIVE_LAUNCH_INDEX = 0 ]; then "$0" 200 2 > out-0; exit 0; fi; '
              'exec "$0" $((200 + 7 * REVIVE_LAUNCH_INDEX)) 2 > out-$REVIVE_LAUNCH_INDEX')
    ref_rc = []
    for i in range(N):
        ref_rc.append(subprocess.run(["bash", "-c", script, os.path.abspath(a.worker)], cwd=ref, timeout=120,
                                     env=dict(os.environ, REVIVE_LAUNCH_INDEX=str(i))).returncode)

    for bad, why in ((["--hosts", hosts[0] + ",x;rm"], "x;rm"), (["--hosts", hosts[0], "--launcher", "ip netns exec {host}"],
                                                                  "exactly one {cmd}")):
        r = run([revive, "launch", "--port", str(port), "--ckpt-dir", ck] + bad + ["--", "/bin/true"], env=env, timeout=30)
        if r.returncode != 2 or why not in r.stderr:
            fail("launch %s: rc %d %r, want 2 naming %r" % (bad, r.returncode, r.stderr, why))
        if status(revive, port, ck, env).returncode == 0:
            fail("launch %s left a coordinator running" % bad)
    print("bad input refused", flush=True)

    cmd = [revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--hosts", ",".join(hosts), "-n", str(N),
           "--launcher", "netns", "--sub-port", str(sub), "--", "bash", "-c", script, os.path.abspath(a.worker)]
    print("launch: " + " ".join(cmd), flush=True)
    lerr = open(os.path.join(a.workdir, "launch-stderr"), "wb")
    t0 = time.time()
    lp = subprocess.Popen(cmd, cwd=rund, stdout=lerr, stderr=lerr, stdin=subprocess.DEVNULL, env=env)
    nprocs = N + 1  # copy 0 is bash and its worker
    wait_procs(revive, port, ck, env, nprocs, procs=[lp])
    print("%d copies connected after %.2f s" % (N, time.time() - t0), flush=True)
    m, _ = checkpoint(revive, port, ck, env, 1, nprocs)
    seen = set()
    for q in m["processes"]:
        pid = q["pid"]
        e = environ(pid)
        try:
            out = os.readlink("/proc/%d/fd/1" % pid)
            ino = os.stat("/proc/%d/ns/net" % pid).st_ino
            comm = open("/proc/%d/comm" % pid).read().strip()
        except OSError:
            fail("copy pid %d ended before the test looked at it; give the worker more rounds" % pid)
        i = int(e.get(b"REVIVE_LAUNCH_INDEX", b"-1"))
        if comm == "bash" and i == 0:
            out = os.path.join(rund, "out-0")  # copy 0's shell: its worker child writes out-0
        if out != os.path.join(rund, "out-%d" % i) or e.get(b"REVIVE_LAUNCH_SIZE") != str(N).encode():
            fail("pid %d: index %d size %r writes %s" % (pid, i, e.get(b"REVIVE_LAUNCH_SIZE"), out))
        h = hosts[i % 2]
        if q["host"] != h:
            fail("manifest records host %r for copy %d, want %s" % (q["host"], i, h))
        if ino != os.stat("/run/netns/" + h).st_ino:
            fail("copy %d (pid %d) is not in namespace %s" % (i, pid, h))
        want = ((net + ".%d" % (i % 2 + 2)).encode(), str(sub + i % 2).encode())  # host k: NET.(k+2)
        if (e.get(b"REVIVE_COORD_HOST"), e.get(b"REVIVE_COORD_PORT")) != want:
            fail("copy %d connects to %r, want its host's sub-coordinator %r" %
                 (i, (e.get(b"REVIVE_COORD_HOST"), e.get(b"REVIVE_COORD_PORT")), want))
        seen.add(i)
    if seen != set(range(N)):
        fail("copies in the manifest: %s" % sorted(seen))
    for k, h in enumerate(hosts):  # the sub answers only inside its namespace and relays to the root
        r = run(["ip", "netns", "exec", h, revive, "status", "--port", str(sub + k), "--ckpt-dir", ck],
                env=dict(env, REVIVE_COORD_HOST=net + ".%d" % (k + 2)), timeout=30)
        if r.returncode != 0 or count_procs(r.stdout) != nprocs:
            fail("sub-coordinator on %s port %d: rc %d %s %s" % (h, sub + k, r.returncode, r.stdout, r.stderr))
    print("manifest: %s" % sorted((q["upid"], q["host"]) for q in m["processes"]), flush=True)
    try:
        lp.wait(timeout=120)
    except subprocess.TimeoutExpired:
        lp.kill()
        fail("launched copies did not finish")
    # The rule: the first non-zero status of the copies in index order, over all hosts. The copies' statuses
    # are chosen so that the old rule (each host part's first non-zero, parts in host order) differs.
    want_rc = next((c for c in ref_rc if c != 0), 0)
    parts = [next((ref_rc[i] for i in range(N) if i % 2 == k and ref_rc[i] != 0), 0) for k in range(2)]
    if next((c for c in parts if c != 0), 0) == want_rc:
        fail("test set-up: copy statuses %s do not tell the global rule from the per-part one" % ref_rc)
    if lp.returncode != want_rc:
        fail("revive launch exited %d, want %d; stderr: %s" % (lp.returncode, want_rc,
             open(os.path.join(a.workdir, "launch-stderr")).read()))
    for i in range(N):
        if open(os.path.join(ref, "out-%d" % i), "rb").read() != open(os.path.join(rund, "out-%d" % i), "rb").read():
            fail("copy %d: output differs from the uninterrupted run" % i)
    if not coordinator_gone(revive, port, ck, env):
        fail("the root coordinator did not exit after the copies ended")
    print("OK: %d copies over %s, exit %d, outputs identical" % (N, ",".join(hosts), lp.returncode), flush=True)

if __name__ == "__main__":
    main()
