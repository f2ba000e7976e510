#!/usr/bin/env python3
"""Migration across hosts (network namespaces made by scripts/netns.sh): NPROCS independent processes
are launched alternately in namespaces rvh1 and rvh2 (REVIVE_HOST_ID names the namespace), checkpointed
at a random moment, SIGKILLed, and restarted with `revive restart --hosts ... --launcher 'ip netns exec
{host} {cmd}'` so that every process lands on the OTHER namespace. Checks: the manifest records each
process's namespace; every restored process really runs in its new namespace (/proc/PID/ns/net); a
checkpoint after the restart records the new hosts; each stdout and exit status equals an uninterrupted
run's, byte for byte.
--user NAME (run as root): the namespaces are root's, the computation is NAME's: every revive command and
program runs as NAME, and "ssh to a host" is tests/hosts/ns_enter.c (--enter), installed setuid root for
the test only (it joins the namespace, then gives up root for good), as sshd is the privileged part of a
login. The restarts then recreate pids in pid namespaces of their own (docs/process-trees.md)."""
import argparse, json, os, random, shutil, signal, struct, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *

def netns_inode(ns):
    return os.stat("/run/netns/" + ns).st_ino

ATTACKER = r"""
import socket, struct, sys
host, port = sys.argv[1], int(sys.argv[2])
def attempt(data, close_early=False):
    s = socket.create_connection((host, port), timeout=5)
    s.recv(4096)  # CHALLENGE
    try:
        s.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        return "closed"  # the coordinator hung up while we were still sending
    if close_early:
        s.close()
        return "closed by us"
    try:
        while s.recv(4096):
            pass
        return "closed"
    except ConnectionResetError:
        return "closed"
    except socket.timeout:
        return "left open"
hdr = lambda t, n: b"RVP1" + struct.pack("<HHII", t, 0, n, 1)
hello = b"role=proc\npid=1\nproof=" + b"0" * 64 + b"\n"
print(attempt(hdr(1, len(hello)) + hello))           # HELLO with a wrong proof
print(attempt(b"\xff" * 70000))                      # garbage
print(attempt(hdr(1, 1 << 21)))                       # oversized announcement
print(attempt(hdr(1, 100) + b"role=proc\n", True))   # truncated payload, then gone
print(attempt(hdr(1, 100)[:7], True))                 # truncated header, then gone
"""

def attack_from_namespace(revive, ns, coord_ip, port, ck, env, workdir):
    """Another "host" without the secret: refused; garbage and truncated frames only drop that peer."""
    wrong = os.path.join(workdir, "wrong-secret")
    with open(wrong, "w") as f:
        f.write("not the computation's secret")
    os.chmod(wrong, 0o600)
    r = run(["ip", "netns", "exec", ns, revive, "status", "--port", str(port), "--ckpt-dir", ck],
            env=dict(env, REVIVE_SECRET_FILE=wrong))
    if r.returncode != 2 or "authentication failed" not in r.stderr:
        fail("status from %s with a wrong secret: rc %d %r" % (ns, r.returncode, r.stderr))
    r = run(["ip", "netns", "exec", ns, sys.executable, "-c", ATTACKER, coord_ip, str(port)], timeout=60)
    got = r.stdout.split("\n")
    if r.returncode != 0 or got[:3] != ["closed"] * 3:
        fail("attacks from %s: rc %d, %r %r" % (ns, r.returncode, r.stdout, r.stderr))
    print("attacks from %s refused/dropped: %s" % (ns, ", ".join(got[:5])), flush=True)

def main():
    ap = hosts_parser()
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--pair", nargs=3, metavar=("PROG", "BYTES", "PACE_US"),
                    help="instead of independent processes: a tcp_hosts server in the first namespace and its "
                         "client in the second, connected across the bridge")
    ap.add_argument("--udp-pair", nargs=2, metavar=("PROG", "N"),
                    help="instead: tests/channels' udp_queue receiver (bound to the wildcard address) in the first "
                         "namespace and its sender in the second, over connected UDP sockets with datagrams "
                         "queued at the checkpoint (checked in the images)")
    ap.add_argument("--reconnect-pair", nargs=3, metavar=("PROG", "N", "PACE_US"),
                    help="instead: a tcp_hosts rserver in the first namespace answering N requests, each on a new "
                         "connection its rclient in the second makes to the server's (old) address")
    ap.add_argument("--dgram-pair", nargs=3, metavar=("PROG", "N", "PACE_US"),
                    help="instead: a udp_hosts userver in the first namespace answering N requests its uclient in "
                         "the second sends to the server's (old) address with sendto, taking answers only from there")
    ap.add_argument("--twice", action="store_true",
                    help="with --reconnect-pair: nserver/nclient (the server moves to new listeners, the client follows "
                         "the addresses it is told), migrated twice: swapped, then back")
    ap.add_argument("--batches", action="store_true",
                    help="with --dgram-pair: mserver/mclient, the same requests in sendmmsg/recvmmsg batches")
    ap.add_argument("--user", help="run the computation as this ordinary user (created if missing)")
    ap.add_argument("--enter", help="tests/hosts/ns_enter (with --user)")
    ap.add_argument("prog", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    prog = a.prog[1:] if a.prog and a.prog[0] == "--" else a.prog
    with_namespaces(a, "rvm", "10.79", 2, lambda rng, seed, prefix, net: test(a, prog, rng, seed, prefix, net))

class AsUser:
    """--user: a `revive` wrapper and a setuid ns_enter in a root-owned directory of their own, and how to
    start things as the user. Without --user every method is the identity."""
    def __init__(self, a, tag):
        self.user, self.dir = a.user, None
        if not self.user:
            return
        if os.getuid() != 0:
            skip("--user needs root (it runs the computation as another user)")
        if subprocess.run(["id", "-u", self.user], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", self.user])
        self.dir = "/tmp/revive-as-user-" + tag
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir, 0o755)
        if os.statvfs(self.dir).f_flag & os.ST_NOSUID:
            shutil.rmtree(self.dir, ignore_errors=True)
            skip("/tmp is mounted nosuid: the setuid ns_enter (the test's ssh) cannot work there")
        self.enter = os.path.join(self.dir, "ns_enter")
        shutil.copy(a.enter, self.enter)
        os.chown(self.enter, 0, 0)
        os.chmod(self.enter, 0o4755)
        self.revive = os.path.join(self.dir, "revive")
        with open(self.revive, "w") as f:
            f.write('#!/bin/sh\nexec runuser -u %s -- %s "$@"\n' % (self.user, os.path.abspath(a.revive)))
        os.chmod(self.revive, 0o755)

    def close(self):
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def wrap(self, revive):  # the revive command the harness runs
        return self.revive if self.user else revive

    def on_host(self, host):  # prefix: start a command on a host
        return ["runuser", "-u", self.user, "--", self.enter, host] if self.user else ["ip", "netns", "exec", host]

    def launcher(self):
        return "%s {host} {cmd}" % self.enter if self.user else "ip netns exec {host} {cmd}"

    def give(self, path):  # the work directory becomes the user's
        if self.user:
            subprocess.run(["chown", "-R", self.user + ":", path], check=True)

    def prog_pid(self, p):
        """The launched program's pid: p itself, or below runuser with --user."""
        pid = p.pid
        while self.user:
            try:
                comm = open("/proc/%d/comm" % pid).read().strip()
            except OSError:
                return pid
            if comm not in ("runuser", "ns_enter"):
                return pid
            kids = children(pid)
            if not kids:
                return pid
            pid = kids[0]
        return pid

def test(a, prog, rng, seed, prefix, net):
    u = AsUser(a, prefix)
    try:
        test_as(a, prog, rng, seed, prefix, net, u)
    finally:
        u.close()

def test_as(a, prog, rng, seed, prefix, net, u):
    hosts = [prefix + "1", prefix + "2"]
    coord_ip = net + ".1"
    port = free_port(rng, coord_ip)
    print("seed %d port %d coordinator %s" % (seed, port, coord_ip), flush=True)
    shutil.rmtree(a.workdir, ignore_errors=True)
    ck = os.path.join(a.workdir, "ck")
    env = clean_env(dict(REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
                         REVIVE_LOG="0", REVIVE_COORD_HOST=coord_ip))
    revive_real = os.path.abspath(a.revive)
    revive = u.wrap(revive_real)
    if a.udp_pair:  # spelled like a TCP pair from here on (host file, named launcher)
        a.pair = a.udp_pair
    modes = ("server", "client")
    if a.reconnect_pair:
        a.pair, modes = a.reconnect_pair, ("nserver", "nclient") if a.twice else ("rserver", "rclient")
    if a.dgram_pair:
        a.pair, modes = a.dgram_pair, ("mserver", "mclient") if a.batches else ("userver", "uclient")
    if a.pair:
        # Reference: the same pair over loopback in this namespace; then server on host 1, client on host 2.
        a.procs = 2
        pport = str(free_port(rng))
        server = [a.pair[0], modes[0], pport, a.pair[1], a.pair[2]] if not a.udp_pair else \
            [a.pair[0], "recv", pport, a.pair[1], "127.0.0.1"]
        progs = [server, [a.pair[0], modes[1], "127.0.0.1", pport, a.pair[1], a.pair[2]] if not a.udp_pair else
                 [a.pair[0], "send", pport, a.pair[1], "127.0.0.1"]]
        refs = []
        for i, p in enumerate(progs):
            d = os.path.join(a.workdir, "ref-%d" % i)
            os.makedirs(d)
            refs.append(subprocess.Popen(p, cwd=d, stdout=open(os.path.join(d, "stdout"), "wb"),
                                         stdin=subprocess.DEVNULL))
        ref_rc = [r.wait(timeout=120) for r in refs]
        if a.udp_pair:  # the receiver on any address of whichever host; the sender to host 1's
            progs = [[a.pair[0], "recv", pport, a.pair[1], "0.0.0.0"], [a.pair[0], "send", pport, a.pair[1], net + ".2"]]
        else:
            progs[1] = [a.pair[0], modes[1], net + ".2", pport, a.pair[1], a.pair[2]]  # host 1's address
    else:
        # Each process gets its own arguments (rounds) so the outputs differ and a mix-up shows.
        progs = [prog[:1] + [str(int(prog[1]) + 7 * i)] + prog[2:] for i in range(a.procs)]
        ref_rc = []
        for i, p in enumerate(progs):
            d = os.path.join(a.workdir, "ref-%d" % i)
            os.makedirs(d)
            with open(os.path.join(d, "stdout"), "wb") as out:
                ref_rc.append(subprocess.run(p, cwd=d, stdout=out, stdin=subprocess.DEVNULL, timeout=120).returncode)

    # The coordinator listens on the bridge address so every namespace reaches it; `revive launch` inside a
    # namespace finds it there and only checks it belongs to this computation.
    os.makedirs(ck)
    u.give(a.workdir)
    r = run([revive, "coordinator", "--daemon", "--exit-on-last", "--port", str(port), "--ckpt-dir", ck,
             "--bind", coord_ip], env=env)
    if r.returncode != 0:
        fail("coordinator --bind %s: %s" % (coord_ip, r.stderr))
    procs, runs = [], []
    for i, p in enumerate(progs):
        d = os.path.join(a.workdir, "run-%d" % i)
        os.makedirs(d)
        u.give(d)
        runs.append(d)
        host = hosts[i % 2]
        with open(os.path.join(d, "stdout"), "wb") as out:
            u.give(os.path.join(d, "stdout"))
            procs.append(subprocess.Popen(u.on_host(host) + ["env", "REVIVE_HOST_ID=" + host, revive_real,
                                           "launch", "--port", str(port), "--ckpt-dir", ck, "--"] + p,
                                          cwd=d, stdout=out, stdin=subprocess.DEVNULL, env=env))
    wait_procs(revive, port, ck, env, a.procs)
    for i, p in enumerate(procs):  # launched where we said: the program's own network namespace
        got = os.stat("/proc/%d/ns/net" % u.prog_pid(p)).st_ino
        if got != netns_inode(hosts[i % 2]):
            fail("process %d (pid %d) is not in namespace %s" % (i, p.pid, hosts[i % 2]))
    attack_from_namespace(revive_real, hosts[0], coord_ip, port, ck, env, a.workdir)
    time.sleep(rng.uniform(0.2, 0.6))
    m, _ = checkpoint(revive, port, ck, env, 1, a.procs)
    # Which process is which: its stdout file is in its run directory (image name has the upid).
    where = {}
    for p in m["processes"]:
        where[p["upid"]] = p["host"]
    upid_of = {}
    for i, p in enumerate(procs):
        for q in m["processes"]:
            if q["pid"] == u.prog_pid(p):
                upid_of[i] = q["upid"]
        if i not in upid_of:
            fail("manifest has no process with pid %d: %s" % (p.pid, json.dumps(m)))
        if where[upid_of[i]] != hosts[i % 2]:
            fail("manifest records host %r for process %d, launched in %s" % (where[upid_of[i]], i, hosts[i % 2]))
    print("checkpoint 1: hosts recorded %s" % sorted(where.items()), flush=True)
    if a.udp_pair:  # datagrams were waiting (the chan section's bytes kept per socket: chan_plugin.cpp)
        kept = []
        for f in sorted(os.listdir(os.path.join(ck, "ckpt-1"))):
            b = open(os.path.join(ck, "ckpt-1", f), "rb").read() if f.endswith(".rimg") else b""
            i = b.rfind(b"RVCH")
            if i >= 0:
                kept += [struct.unpack_from("<IIq", b, i + 8 + 16 * k)[2]
                         for k in range(struct.unpack_from("<I", b, i + 4)[0])]
        if not any(kept):
            fail("no datagram was queued at checkpoint 1 (bytes kept per socket: %s)" % kept)
        print("checkpoint 1: bytes kept per socket %s" % kept, flush=True)
    time.sleep(rng.uniform(0, 0.2))
    for p in procs:  # all alive first: killing one end of a TCP pair makes the other fail on its own
        if p.poll() is not None:
            fail("a launched program ended (rc %s) before it was killed; make it run longer" % p.returncode)
    for p in procs:
        os.kill(u.prog_pid(p), signal.SIGKILL)
    for p in procs:
        p.wait()
    if not coordinator_gone(revive, port, ck, env):
        fail("coordinator did not exit after its processes died")

    # Swap: each process goes to the namespace it was not in. Process k of the manifest -> hosts[k].
    swapped = [hosts[1] if p["host"] == hosts[0] else hosts[0] for p in m["processes"]]
    if a.pair:  # the other spellings: a host file and the named launcher
        hostfile = os.path.join(a.workdir, "hostfile")
        with open(hostfile, "w") as f:
            f.write("# swapped placement\n" + "".join("%s slots=1\n" % h for h in swapped))
        u.give(hostfile)
        cmd = [revive, "restart", "--port", str(port), "--hostfile", hostfile, "--launcher",
               u.launcher() if u.user else "netns", ck]
    else:
        cmd = [revive, "restart", "--port", str(port), "--hosts", ",".join(swapped),
               "--launcher", u.launcher(), ck]
    print("restart: " + " ".join(cmd), flush=True)
    rerr = open(os.path.join(a.workdir, "restart-stderr"), "wb")
    rp = subprocess.Popen(cmd, cwd=a.workdir, stdout=rerr, stderr=rerr, stdin=subprocess.DEVNULL, env=env)
    rerr.close()
    wait_procs(revive, port, ck, env, a.procs)
    moved = 0
    # revive restart -> launcher (ip netns exec, which execs) -> that host's `revive restart --only` -> the
    # restored processes: the ones writing into a run directory.
    tree, found = [rp.pid], []
    while tree:
        pid = tree.pop()
        kids = children(pid)
        tree += kids
        found += kids
    for pid in found:
        try:
            out = os.readlink("/proc/%d/fd/1" % pid)
            netino = os.stat("/proc/%d/ns/net" % pid).st_ino
        except OSError:
            continue  # already finished
        i = runs.index(os.path.dirname(out)) if os.path.dirname(out) in runs else -1
        if i < 0:
            continue  # a launcher or a host's `revive restart`
        want = hosts[1 - i % 2]
        if netino != netns_inode(want):
            fail("restored process %d (pid %d) is not in namespace %s" % (i, pid, want))
        if u.user:  # the user's, in a pid namespace of its restart's own
            import pwd
            owner = os.stat("/proc/%d" % pid).st_uid
            if owner != pwd.getpwnam(u.user).pw_uid:
                fail("restored process %d (pid %d) runs as uid %d, not %s" % (i, pid, owner, u.user))
            if os.stat("/proc/%d/ns/pid" % pid).st_ino == os.stat("/proc/self/ns/pid").st_ino:
                fail("restored process %d (pid %d) is in the test's pid namespace" % (i, pid))
        moved += 1
    if moved != a.procs:
        fail("found %d restored processes in their new namespaces, want %d" % (moved, a.procs))
    if a.twice:
        # The client must have learned the server's listener by its new host's address (two new listeners
        # opened there) before checkpoint 2: 90 more answers than at checkpoint 1.
        client_out = os.path.join(runs[1], "stdout")
        n0 = open(client_out, "rb").read().count(b"\n")
        deadline = time.time() + 60
        while open(client_out, "rb").read().count(b"\n") < n0 + 90:
            if time.time() > deadline:
                fail("the restored client did not make 90 more requests in 60 s")
            time.sleep(0.05)
    m2, _ = checkpoint(revive, port, ck, env, 2, a.procs)
    for q in m2["processes"]:
        i = [k for k, u in upid_of.items() if u == q["upid"]]
        if not i and (a.reconnect_pair or a.dgram_pair):
            i = [1]  # the client exec'd itself since the restart: a new process of the computation, a new upid
        if len(i) != 1 or q["host"] != hosts[1 - i[0] % 2]:
            fail("after migration the manifest records %r for upid %d" % (q["host"], q["upid"]))
    print("checkpoint 2 after migration: hosts %s" % sorted((q["upid"], q["host"]) for q in m2["processes"]),
          flush=True)
    if a.twice:
        # Second migration: killed, restarted from checkpoint 2 with every process back on the other host.
        # The client now connects to the server's address on the host of the first restart, known only
        # since that restart: without noting every host a process has lived on, refused.
        time.sleep(rng.uniform(0, 0.2))
        # Every process below this restart (its hosts' parts and the restored programs), and only those:
        # other tests run the same programs beside this one.
        victims, tree = [], [rp.pid]
        while tree:
            kids = children(tree.pop())
            tree += kids
            victims += kids
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            rp.wait(timeout=30)
        except subprocess.TimeoutExpired:
            rp.kill()
        if not coordinator_gone(revive, port, ck, env):
            fail("coordinator did not exit after the restored processes were killed")
        back = [hosts[1] if q["host"] == hosts[0] else hosts[0] for q in m2["processes"]]
        cmd = [revive, "restart", "--port", str(port), "--hosts", ",".join(back), "--launcher", u.launcher(), ck]
        print("restart 2: " + " ".join(cmd), flush=True)
        rerr = open(os.path.join(a.workdir, "restart-stderr"), "wb")
        rp = subprocess.Popen(cmd, cwd=a.workdir, stdout=rerr, stderr=rerr, stdin=subprocess.DEVNULL, env=env)
        rerr.close()
    try:
        rp.wait(timeout=120)
    except subprocess.TimeoutExpired:
        rp.kill()
        fail("restarted computation did not finish")
    # restart's rule with --hosts: each host's part returns the first non-zero status of its processes in
    # manifest order; the parts are taken in the order of their hosts' first process in the manifest.
    index_of = {u: i for i, u in upid_of.items()}
    part_rc = {}
    for k, q in enumerate(m["processes"]):
        c = ref_rc[index_of[q["upid"]]]
        if part_rc.get(swapped[k], 0) == 0:
            part_rc[swapped[k]] = c
    want_rc = next((c for c in part_rc.values() if c != 0), 0)
    if a.twice:  # the manifest of checkpoint 2 has the exec'd client's new upid: no part rule, every one 0
        want_rc = next((c for c in ref_rc if c != 0), 0)
    if rp.returncode != want_rc:
        fail("revive restart exited %s, want %s; stderr: %s" % (rp.returncode, want_rc,
             open(os.path.join(a.workdir, "restart-stderr")).read()))
    for i in range(a.procs):
        want = open(os.path.join(a.workdir, "ref-%d" % i, "stdout"), "rb").read()
        got = open(os.path.join(runs[i], "stdout"), "rb").read()
        if want != got:
            fail("process %d: stdout differs after migration (%d bytes vs %d)" % (i, len(got), len(want)))
    if not coordinator_gone(revive, port, ck, env):
        fail("restart's coordinator did not exit after the computation ended")
    print("OK: %d processes migrated between %s and %s, outputs identical" % (a.procs, hosts[0], hosts[1]),
          flush=True)

if __name__ == "__main__":
    main()
