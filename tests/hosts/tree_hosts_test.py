#!/usr/bin/env python3
"""Process trees over three "hosts" (network namespaces made by scripts/netns.sh, joined by veth to a
bridge). `revive launch --hosts h1,h2,h3 -n 3 --launcher netns` starts tree_hosts' three roles, one per
host, each host behind its own sub-coordinator: a TCP server (h1); a parent+child over a socketpair whose
child relays to the server over TCP (h2); a parent+child over a pipe (h3). The computation is
checkpointed at a random moment, SIGKILLed and restarted with `revive restart --hosts` so that every tree
moves to another host (two trees share one), rebuilt there with its recorded pids behind a new
sub-coordinator; the roots then exit 0/5/7 in manifest order, split over the hosts so that only the rule
"first non-zero root in manifest order" (not "per host part") gives 5.
Checks: the manifest records where each process ran (before and after); every process really runs in
its host's namespace and connects to that host's sub-coordinator (on the host's own address); a --map that splits a tree is refused
(exit 2) and leaves no coordinator behind; every output file and the exit status equal an uninterrupted
run's, byte for byte."""
import json, os, random, shutil, signal, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

NHOSTS = 3
FILES = ["out-0", "out-1", "out-1-child", "out-2", "out-2-child"]

def netns_inode(ns):
    return os.stat("/run/netns/" + ns).st_ino

def read_pids(d):
    """role -> [parent pid, child pid] (the server has no child)."""
    out = {}
    for role in range(3):
        path = os.path.join(d, "pids-%d" % role)
        deadline = time.time() + 30
        while not (os.path.exists(path) and open(path).read().endswith("\n")):
            if time.time() > deadline:
                fail("%s not written" % path)
            time.sleep(0.05)
        out[role] = [int(x) for x in open(path).read().split() if int(x) != 0]
    return out

def check_manifest(m, pids, hosts_of_role, what):
    by_pid = {p["pid"]: p for p in m["processes"]}
    upids = {}
    for role, ps in pids.items():
        for pid in ps:
            if pid not in by_pid:
                fail("%s: manifest has no process with pid %d (role %d): %s" % (what, pid, role, json.dumps(m)))
            if by_pid[pid]["host"] != hosts_of_role[role]:
                fail("%s: manifest records host %r for pid %d (role %d), want %s" %
                     (what, by_pid[pid]["host"], pid, role, hosts_of_role[role]))
            upids[pid] = by_pid[pid]["upid"]
    print("%s: %s" % (what, sorted((p["upid"], p["pid"], p["host"]) for p in m["processes"])), flush=True)
    return upids

def host_ip(h):
    return NET + "." + str(int(h[len(PREFIX):]) + 1)  # netns.sh: host i has NET.(i+1)

def check_running_on(pids, hosts_of_role, sub_port_of_host, what):
    """Each process in its host's namespace, talking to the sub-coordinator of that host."""
    for role, ps in pids.items():
        for pid in ps:
            try:
                ino = os.stat("/proc/%d/ns/net" % pid).st_ino
            except OSError:
                fail("%s: pid %d (role %d) is not running" % (what, pid, role))
            if ino != netns_inode(hosts_of_role[role]):
                fail("%s: pid %d (role %d) is not in namespace %s" % (what, pid, role, hosts_of_role[role]))
    for h, sp in sub_port_of_host.items():
        # The sub runs in that namespace only: its port answers there and relays to the root.
        r = run(["ip", "netns", "exec", h, REVIVE, "status", "--port", str(sp), "--ckpt-dir", CK],
                env=dict(ENV, REVIVE_COORD_HOST=host_ip(h)), timeout=30)
        if r.returncode != 0 or count_procs(r.stdout) != 5:
            fail("%s: no sub-coordinator of the computation on %s port %d: rc %d %s %s" %
                 (what, h, sp, r.returncode, r.stdout, r.stderr))

def main():
    global REVIVE
    ap = hosts_parser()
    ap.add_argument("--prog", required=True, help="tree_hosts")
    ap.add_argument("--bytes", default="40000000")
    ap.add_argument("--pace", default="6000")
    a = ap.parse_args()
    REVIVE = os.path.abspath(a.revive)
    with_namespaces(a, "rvt", "10.81", NHOSTS, lambda rng, seed, prefix, net: test(a, rng, seed, prefix, net))

def test(a, rng, seed, prefix, net):
    global CK, ENV, NET, PREFIX
    NET, PREFIX = net, prefix
    hosts = [prefix + str(i + 1) for i in range(NHOSTS)]
    coord_ip = net + ".1"
    port = free_port(rng, coord_ip)
    pport = free_port(rng)
    sub1 = free_port(rng)  # the namespaces are new: any port is free there; this one keeps records apart
    print("seed %d port %d subs from %d coordinator %s" % (seed, port, sub1, coord_ip), flush=True)
    shutil.rmtree(a.workdir, ignore_errors=True)
    CK = os.path.join(a.workdir, "ck")
    ref, rund = os.path.join(a.workdir, "ref"), os.path.join(a.workdir, "run")
    for d in (ref, rund):
        os.makedirs(d)
    ENV = clean_env(dict(REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
                         REVIVE_LOG="0", REVIVE_COORD_HOST=coord_ip))

    # Uninterrupted reference: the three roles natively, over loopback.
    refs = [subprocess.Popen([a.prog, "127.0.0.1", str(pport), a.bytes, a.pace, ref], stdin=subprocess.DEVNULL,
                             env=dict(os.environ, REVIVE_LAUNCH_INDEX=str(i))) for i in range(3)]
    if any(p.wait(timeout=120) != 0 for p in refs):
        fail("reference run failed: %s" % [p.returncode for p in refs])

    # Launch: role i on hosts[i]; the client tree reaches the server at h1's address.
    launch = [REVIVE, "launch", "--port", str(port), "--ckpt-dir", CK, "--hosts", ",".join(hosts), "-n", "3",
              "--launcher", "netns", "--sub-port", str(sub1), "--",
              os.path.abspath(a.prog), net + ".2", str(pport), a.bytes, a.pace, rund]
    print("launch: " + " ".join(launch), flush=True)
    lerr = open(os.path.join(a.workdir, "launch-stderr"), "wb")
    lp = subprocess.Popen(launch, cwd=a.workdir, stdout=lerr, stderr=lerr, stdin=subprocess.DEVNULL, env=ENV)
    t0 = time.time()
    wait_procs(REVIVE, port, CK, ENV, 5, procs=[lp])
    print("launch on 3 hosts: 5 processes connected after %.2f s (polled)" % (time.time() - t0), flush=True)
    pids = read_pids(rund)
    role_host = {i: hosts[i] for i in range(3)}
    check_running_on(pids, role_host, {hosts[k]: sub1 + k for k in range(NHOSTS)}, "after launch")
    for role, ps in pids.items():
        env = environ(ps[0])
        if env.get(b"REVIVE_COORD_HOST") != host_ip(hosts[role]).encode() or env.get(b"REVIVE_COORD_PORT") != str(sub1 + role).encode():
            fail("role %d (pid %d) was not pointed at its host's sub-coordinator: %r" % (role, ps[0], env))
    time.sleep(rng.uniform(0.3, 1.5))
    m, _ = checkpoint(REVIVE, port, CK, ENV, 1, 5)
    upid = check_manifest(m, pids, role_host, "checkpoint 1")
    all_pids = [pid for ps in pids.values() for pid in ps]
    if lp.poll() is not None:
        fail("the computation ended (rc %s) before it was killed; give it more bytes" % lp.returncode)
    for sig in (signal.SIGSTOP, signal.SIGKILL):  # stopped first: no process sees its peer die
        for pid in all_pids:
            os.kill(pid, sig)
    try:
        lp.wait(timeout=60)
    except subprocess.TimeoutExpired:
        fail("revive launch did not end after its processes were killed")
    if not coordinator_gone(REVIVE, port, CK, ENV):
        fail("coordinator did not exit after its processes died")

    # A placement that splits the socketpair tree is refused before anything starts.
    bad = "%d=%s,%d=%s" % (upid[pids[1][0]], hosts[0], upid[pids[1][1]], hosts[1])
    r = run([REVIVE, "restart", "--port", str(port), "--map", bad, "--launcher", "netns", CK], env=ENV, timeout=60)
    if r.returncode != 2 or "cannot be split" not in r.stderr:
        fail("restart --map %s: rc %d, %r (want 2 and a refusal to split a tree)" % (bad, r.returncode, r.stderr))
    if status(REVIVE, port, CK, ENV).returncode == 0:
        fail("a refused placement left a coordinator running")
    print("split refused: " + r.stderr.strip(), flush=True)

    # Restart: every tree moves to another host, the first and the last tree (manifest order of their
    # first process, the order --hosts is applied in) together on the host the middle one ran on, the
    # middle one on the first one's host: --hosts X,Y,X. Parts are numbered by first use: X, then Y.
    pos = {p["pid"]: k for k, p in enumerate(m["processes"])}
    order = sorted(range(3), key=lambda role: min(pos[pid] for pid in pids[role]))
    X, Y = hosts[order[1]], hosts[order[0]]
    new_host = {order[0]: X, order[1]: Y, order[2]: X}
    part_hosts = [X, Y]
    # Exit statuses (read by the roots when they end): first tree 0, middle 5, last 7. The first
    # non-zero of the roots in manifest order is 5, what a restart on one host returns; taking X's part
    # (first non-zero of its trees: 7) before Y's would give 7.
    for role, code in ((order[1], 5), (order[2], 7)):
        with open(os.path.join(rund, "exit-%d" % role), "w") as f:
            f.write("%d\n" % code)
    want_rc = 5
    sub2 = free_port(rng)
    cmd = [REVIVE, "restart", "--port", str(port), "--hosts", ",".join(new_host[r] for r in order),
           "--launcher", "ip netns exec {host} {cmd}", "--sub-port", str(sub2), CK]

    # One host cannot start its sub-coordinator (something else holds the port there): that part fails,
    # and the restored processes of the other hosts, parked at the restart barrier for processes that
    # will never come, are stopped instead of waiting forever.
    squat_host = part_hosts[1]
    squat = subprocess.Popen(["ip", "netns", "exec", squat_host, sys.executable, "-c",
                              "import socket,sys,time\ns=socket.socket(); s.bind(('0.0.0.0', %d)); s.listen(1)\n"
                              "print('ok', flush=True); time.sleep(120)" % (sub2 + 1)], stdout=subprocess.PIPE)
    try:
        squat.stdout.readline()
        r = run(cmd, cwd=a.workdir, env=ENV, timeout=120)
    finally:
        squat.kill()
        squat.wait()
    if r.returncode == 0 or "are stopped" not in r.stderr or squat_host not in r.stderr:
        fail("restart with a taken sub port on %s: rc %d, %r" % (squat_host, r.returncode, r.stderr))
    # It leaves at once here; once, under ctest -j3 at load ~10, it stayed past 30 s (the coordinator's grace
    # for latecomers of a failed restart; not understood, docs/status.md). The time is printed to tell.
    t_gone = time.time()
    if not coordinator_gone(REVIVE, port, CK, ENV, timeout=45):
        fail("an aborted restart left its coordinator running")
    print("aborted restart: its coordinator left %.1f s after revive restart returned" % (time.time() - t_gone),
          flush=True)
    print("a failed host part stops the restart: " + r.stderr.strip().replace("\n", " | "), flush=True)
    print("restart: " + " ".join(cmd), flush=True)
    rerr = open(os.path.join(a.workdir, "restart-stderr"), "wb")
    t0 = time.time()
    rp = subprocess.Popen(cmd, cwd=a.workdir, stdout=rerr, stderr=rerr, stdin=subprocess.DEVNULL, env=ENV)
    wait_procs(REVIVE, port, CK, ENV, 5, procs=[rp])
    print("restart on 3 hosts: all 5 processes running again after %.2f s (polled)" % (time.time() - t0), flush=True)
    # Parts are numbered in the order of their hosts' first trees: part_hosts[k] has sub2 + k.
    check_running_on(pids, new_host, {h: sub2 + k for k, h in enumerate(part_hosts)}, "after restart")
    m2, _ = checkpoint(REVIVE, port, CK, ENV, 2, 5)
    check_manifest(m2, pids, new_host, "checkpoint 2 after the swap")
    try:
        rp.wait(timeout=120)
    except subprocess.TimeoutExpired:
        rp.kill()
        fail("restarted computation did not finish")
    if rp.returncode != want_rc:
        fail("revive restart exited %s, want %d (the first non-zero root status in manifest order): %s" %
             (rp.returncode, want_rc, open(os.path.join(a.workdir, "restart-stderr")).read()))
    for f in FILES:
        want = open(os.path.join(ref, f), "rb").read()
        got = open(os.path.join(rund, f), "rb").read()
        if want != got:
            fail("%s differs from the uninterrupted run (%d bytes vs %d): %r" % (f, len(got), len(want), got[-300:]))
    if not coordinator_gone(REVIVE, port, CK, ENV):
        fail("restart's coordinator did not exit after the computation ended")
    print("OK: 3 trees (5 processes) moved over %s, outputs identical, exit %d" % (", ".join(hosts), want_rc),
          flush=True)

if __name__ == "__main__":
    main()
