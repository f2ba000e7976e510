#!/usr/bin/env python3
"""Transparent checkpoint/restart of verbs programs (issue 12, docs/verbs.md), on the softverbs device.

  verbs_cr.py --revive R --inject I --restart S --sv-lib DIR --daemon D --workdir W --mode M
              [--netns scripts/netns.sh] [--ckpts K] [--chain C] [--seed N] -- KIND ARGV...

KIND pingpong: ARGV is one of Debian's ibverbs-utils with its options; the job is a shell running its
  server and its client (loopback TCP for the exchange of addresses, as a user runs them). Checked: both
  end with status 0 and the "N iters" line, and the addresses each printed (lid, QPN, PSN, gid: the
  program's virtual ids) are each other's.
KIND fipingpong: ARGV is libfabric's fi_pingpong with its options (provider, endpoint type, size); the
  job runs its server and client as for KIND pingpong. Checked: both end with status 0 and report every
  message sent and acknowledged (-c: each message's data checked by the program itself).
KIND prog: ARGV is verbs_inflight (or fi_inflight) and its options; the reference is a native run with the same options,
  and the restored job's stdout must equal it byte for byte.
--fabric: a libfabric program (fi_inflight, fi_pingpong): no verbs device, no softverbs library.
Modes:
  same    the job runs, is checkpointed K times at random moments, every process is SIGKILLed, and
          `revive restart` brings it back on the same device (the daemon keeps running: new QPNs and keys);
  newdev  the same, but the device is replaced between kill and restart (a new daemon: new LID, GID,
          GUID, QPNs and keys; what another host or a rebooted one looks like to the program);
  netns   server and client on two network-namespace hosts, each with its own device, launched
          separately into one computation, restarted with the hosts swapped (the pingpong's client
          reaches the server's address on host 1 only for the exchange before the checkpoint).
--ib2tcp (modes newdev and netns): the device is taken away after the kill (no daemon, and the job's
  environment forbids starting one) and `revive restart --ib2tcp` brings the job back over TCP sockets;
  a checkpoint of the restored job must then be refused (not supported over TCP) and the job go on.
--chain C checkpoints and kills the restored job C times more. --refused TEXT (KIND pingpong, same host):
the program holds an object the plugin cannot make again; the checkpoint must fail with TEXT and the job
finish unharmed. Every failure prints FAIL with the logs.
"""
import argparse, os, random, re, shutil, signal, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hosts"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "proctree"))
from harness import clean_env, coordinator_gone, fail, free_port, run, with_namespaces  # noqa: E402
from tree_driver import kill_tree  # noqa: E402  (stops the whole tree, then kills it, and waits)

A = None
DAEMONS = {}  # netns ("" = this one) -> Popen


def logs_and_fail(msg):
    for root, _, files in os.walk(A.workdir):
        for f in sorted(files):
            if f.endswith((".out", ".err", "stdout", "stderr")):
                p = os.path.join(root, f)
                data = open(p, "rb").read()[-3000:].decode(errors="replace")
                if data:
                    print("----- %s\n%s" % (p, data), flush=True)
    fail(msg)


def ns_prefix(ns):
    return ["ip", "netns", "exec", ns] if ns else []


def start_daemon(ns=""):
    sock = run(ns_prefix(ns) + [A.daemon, "--socket-path"], env=ENV).stdout.strip()
    out = open(os.path.join(A.workdir, "daemon%s.out" % ("-" + ns if ns else "")), "ab")
    DAEMONS[ns] = subprocess.Popen(ns_prefix(ns) + [A.daemon, "--foreground", "--idle", "0"], stdout=out,
                                   stderr=out, stdin=subprocess.DEVNULL, env=ENV)
    for _ in range(200):
        if run([A.daemon, "--stats", sock], env=ENV).returncode == 0:
            return run([A.daemon, "--stats", sock], env=ENV).stdout
        time.sleep(0.05)
    logs_and_fail("softverbsd did not start in %s" % (ns or "this namespace"))


def stop_daemon(ns=""):
    d = DAEMONS.pop(ns, None)
    if d:
        d.terminate()
        d.wait(timeout=10)


def lid_of(stats):
    m = re.search(r"^lid (\S+)", stats, re.M)
    return m.group(1) if m else "?"


def checkpoint(port, ck, k, phase, env=None):
    r = run([A.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=env or ENV, timeout=120)
    if r.returncode != 0:
        logs_and_fail("[%s] checkpoint %d: revive checkpoint exited %d: %s" % (phase, k, r.returncode, r.stderr.strip()))
    print("[%s] checkpoint %d: %s" % (phase, k, r.stdout.strip()), flush=True)


def wait_running(port, ck, n, phase, timeout=60, env=None):
    """Until the coordinator has at least n processes and is idle (a restored job past its restart)."""
    deadline = time.time() + timeout
    r = None
    while time.time() < deadline:
        r = run([A.revive, "status", "--port", str(port), "--ckpt-dir", ck], env=env or ENV, timeout=30)
        m = re.search(r"processes:\s+(\d+)", r.stdout)
        if r.returncode == 0 and m and int(m.group(1)) >= n and "state:       idle" in r.stdout:
            return
        time.sleep(0.05)
    logs_and_fail("[%s] the coordinator never had %d idle processes: %s" % (phase, n, r.stdout + r.stderr if r else ""))


def pingpong_cmd(argv, port, n):
    util, opts = argv[0], " ".join(argv[1:])
    # The client gives up at once ("Couldn't connect") when the server does not listen yet: the server
    # sets its device up first (ibv_srq_pingpong: 16 QPs), which took more than a fixed 0.3 s in a loaded
    # CI run (2026-11-28: the server then waited for ever, "the restored job did not finish"). The client
    # starts when `ss` shows the listener, as for fi_pingpong below.
    return ("%s %s -p %d -n %d > srv.out 2> srv.err & for i in $(seq 200); do ss -ltnH \"sport = :%d\" | grep -q . && break;"
            " sleep 0.05; done; %s %s -p %d -n %d 127.0.0.1 > cli.out 2> cli.err;"
            " c=$?; wait $!; s=$?; echo \"server $s client $c\" > status.out" % (util, opts, port, n, port, util, opts, port, n))


def fipingpong_cmd(argv, port, n):
    util, opts = argv[0], " ".join(argv[1:])
    # The client gives up at once when the server's control port is not listening yet (a loaded machine):
    # it starts when `ss` shows the listener (a probe connection would be taken for the client).
    return ("%s %s -B %d -I %d > srv.out 2> srv.err & for i in $(seq 200); do ss -ltnH \"sport = :%d\" | grep -q . && break;"
            " sleep 0.05; done; %s %s -P %d -I %d 127.0.0.1 > cli.out 2> cli.err;"
            " c=$?; wait $!; s=$?; echo \"server $s client $c\" > status.out" % (util, opts, port, n, port, util, opts, port, n))


def check_fipingpong(outs, n, phase):
    """fi_pingpong prints `SIZE #sent =#ack ...` per size: every size's messages all sent and acknowledged."""
    for side, path in zip(("srv", "cli"), outs):
        rows = re.findall(r"^\s*(\d+)\s+(\S+)\s+=(\S+)\s", open(path).read(), re.M)
        want = next(("%d%s" % (n // d, u) for d, u in ((10**9, "g"), (10**6, "m"), (10**3, "k")) if n >= d and n % d == 0),
                    str(n))  # fabtests' size_str
        if not rows or any(sent != want or ack != want for _, sent, ack in rows):
            logs_and_fail("[%s] %s.out: want every size with %s sent and =%s acknowledged, got %s" % (phase, side, want, want, rows))
    print("[%s] both sides sent and had acknowledged %d messages" % (phase, n), flush=True)


def check_pingpong(outs, n, phase):
    """outs: the server's and the client's stdout files."""
    addr = {}
    for side, path in zip(("srv", "cli"), outs):
        text = open(path).read()
        if not re.search(r"^%d iters in " % n, text, re.M):
            logs_and_fail("[%s] %s.out has no '%d iters' line" % (phase, side, n))
        # ibv_ud_pingpong writes "PSN ...: GID" for its own address and "PSN ..., GID" for the peer's;
        # ibv_srq_pingpong one line per QP (16)
        loc = [x.strip().replace(": GID", ", GID") for x in re.findall(r"local address:\s+(.*)", text)]
        rem = [x.strip().replace(": GID", ", GID") for x in re.findall(r"remote address:\s+(.*)", text)]
        if not loc or len(loc) != len(rem):
            logs_and_fail("[%s] %s.out: want as many local as remote address lines, at least one" % (phase, side))
        addr[side] = (loc, rem)
    if addr["srv"][0] != addr["cli"][1] or addr["cli"][0] != addr["srv"][1]:
        logs_and_fail("[%s] the sides do not name each other: %s" % (phase, addr))
    print("[%s] both sides did %d iterations; addresses %s" % (phase, n, addr["srv"][0][0]), flush=True)


def refused(port, ck, job, rd, n):
    """The program holds an object the plugin cannot make again: the checkpoint must fail naming it,
    and the program must go on and finish as if nothing had happened."""
    time.sleep(0.5)
    r = run([A.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=ENV, timeout=120)
    if r.returncode == 0:
        logs_and_fail("[refuse] the checkpoint succeeded (%s); it must be refused" % r.stdout.strip())
    if A.refused not in r.stderr:
        logs_and_fail("[refuse] the checkpoint failed without naming %r: %s" % (A.refused, r.stderr.strip()))
    print("[refuse] checkpoint refused: %s" % r.stderr.strip(), flush=True)
    if job.wait(timeout=A.timeout) != 0:
        logs_and_fail("[refuse] the job exited %d after the refused checkpoint" % job.returncode)
    sp = os.path.join(rd, "status.out")
    st = open(sp).read().strip() if os.path.exists(sp) else ""
    if st != "server 0 client 0":
        logs_and_fail("[refuse] exit statuses: %r, want 'server 0 client 0'" % st)
    check_pingpong([os.path.join(rd, "srv.out"), os.path.join(rd, "cli.out")], n, "refuse")
    stop_daemon()
    print("OK", flush=True)


def tcp_refusal(port, ck, env):
    """A job restarted over TCP cannot be checkpointed again: the request must fail saying so."""
    time.sleep(0.2)
    r = run([A.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=env, timeout=120)
    if r.returncode == 0 or "over TCP since its restart" not in r.stderr:
        logs_and_fail("[ib2tcp] a checkpoint of the job restarted over TCP: exit %d, %r; want it refused"
                      % (r.returncode, r.stderr.strip()))
    print("[ib2tcp] checkpoint refused as documented: %s" % r.stderr.strip()[:160], flush=True)


def one_host(rng):
    """Modes same and newdev."""
    kind, argv = A.argv[0], A.argv[1:]
    ck = os.path.join(A.workdir, "ck")
    rd = os.path.join(A.workdir, "run")
    os.makedirs(rd)
    lid0 = lid_of(start_daemon()) if not A.fabric else None
    port = free_port(rng)
    if kind in ("pingpong", "fipingpong"):
        n = A.iters or 50000
        cmd = ["bash", "-c", (pingpong_cmd if kind == "pingpong" else fipingpong_cmd)(argv, free_port(rng), n)]
        nprocs = 3
    else:
        refd = os.path.join(A.workdir, "ref")
        os.makedirs(refd)
        with open(os.path.join(refd, "stdout"), "wb") as out:
            r = subprocess.run(argv + ["--fork"], cwd=refd, stdout=out, stderr=subprocess.PIPE, env=ENV, timeout=120)
        if r.returncode != 0:
            logs_and_fail("[native] %s exited %d: %s" % (argv[0], r.returncode, r.stderr.decode(errors="replace")))
        cmd = argv + ["--fork"]
        nprocs = 2
    env = dict(ENV)
    out = open(os.path.join(rd, "stdout"), "wb")
    err = open(os.path.join(rd, "launch.err"), "wb")
    job = subprocess.Popen([A.revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--"] + cmd, cwd=rd, stdout=out,
                           stderr=err, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    pg = [job.pid]
    wait_running(port, ck, nprocs, "launch")
    if A.refused:
        refused(port, ck, job, rd, n)
        return
    for c in range(A.chain + 1):
        phase = "run %d" % c
        for k in range(A.ckpts):
            time.sleep(rng.uniform(*A.delay))
            if job.poll() is not None:
                logs_and_fail("[%s] the job ended (status %s) before checkpoint %d: make it run longer" % (phase, job.returncode, k + 1))
            checkpoint(port, ck, k + 1, phase)
        time.sleep(rng.uniform(0, 0.3))
        if job.poll() is not None:
            logs_and_fail("[%s] the job ended (status %s) before the kill: make it run longer" % (phase, job.returncode))
        kill_tree(pg, reap=lambda: job.wait(timeout=30))
        if not coordinator_gone(A.revive, port, ck, ENV):
            logs_and_fail("[%s] the coordinator did not exit after its processes died" % phase)
        if A.ib2tcp:
            stop_daemon()
            print("[%s] device removed: restarting over TCP" % phase, flush=True)
        elif A.mode == "newdev":
            stop_daemon()
            lid = lid_of(start_daemon())
            print("[%s] device replaced: lid %s -> %s" % (phase, lid0, lid), flush=True)
            lid0 = lid
        rerr = open(os.path.join(rd, "restart-%d.err" % c), "wb")
        job = subprocess.Popen([A.revive, "restart", "--port", str(port)] + (["--ib2tcp"] if A.ib2tcp else []) + [ck],
                               cwd=rd, stdout=rerr, stderr=rerr, stdin=subprocess.DEVNULL, env=env,
                               start_new_session=True)
        pg = [job.pid]
        if c < A.chain:
            wait_running(port, ck, nprocs, "restart %d" % c)
    if A.ib2tcp and kind == "prog":  # (a pingpong may be done before the request: it has no fixed length)
        wait_running(port, ck, nprocs, "restart")
        tcp_refusal(port, ck, ENV)
    try:
        rc = job.wait(timeout=A.timeout)
    except subprocess.TimeoutExpired:
        kill_tree(pg, reap=lambda: job.wait(timeout=30))
        logs_and_fail("[restart] the restored job did not finish within %d s" % A.timeout)
    if rc != 0:
        logs_and_fail("[restart] revive restart exited %d" % rc)
    if kind in ("pingpong", "fipingpong"):
        sp = os.path.join(rd, "status.out")
        st = open(sp).read().strip() if os.path.exists(sp) else ""
        if st != "server 0 client 0":
            logs_and_fail("[compare] exit statuses: %r, want 'server 0 client 0'" % st)
        (check_pingpong if kind == "pingpong" else check_fipingpong)(
            [os.path.join(rd, "srv.out"), os.path.join(rd, "cli.out")], n, "compare")
    else:
        want = open(os.path.join(A.workdir, "ref", "stdout"), "rb").read()
        got = open(os.path.join(rd, "stdout"), "rb").read()
        if want != got:
            logs_and_fail("[compare] the restored job's stdout differs from the native run's:\n--- want\n%s--- got\n%s"
                          % (want.decode(errors="replace"), got.decode(errors="replace")))
        print("[compare] stdout identical to the native run (%d bytes)" % len(got), flush=True)
    stop_daemon()
    print("OK", flush=True)


def two_hosts(rng, prefix, net):
    """Mode netns: server on host 1, client on host 2, restarted swapped."""
    kind, argv = A.argv[0], A.argv[1:]
    hosts = [prefix + "1", prefix + "2"]
    coord_ip = net + ".1"
    for h in hosts:
        start_daemon(h)
    vport = free_port(rng)
    n = A.iters or 50000
    if kind == "pingpong":
        progs = [argv + ["-p", str(vport), "-n", str(n)], argv + ["-p", str(vport), "-n", str(n), net + ".2"]]
    else:
        progs = [argv + ["--server", str(vport)], argv + ["--client", net + ".2", str(vport)]]
    # Reference: the same pair natively on the same hosts (the pingpongs' output has timings: checked only).
    refs = []
    for i, p in enumerate(progs if kind == "prog" else []):
        d = os.path.join(A.workdir, "ref-%d" % i)
        os.makedirs(d)
        refs.append(subprocess.Popen(ns_prefix(hosts[i]) + p, cwd=d, stdout=open(os.path.join(d, "stdout"), "wb"),
                                     stderr=open(os.path.join(d, "stderr"), "wb"), stdin=subprocess.DEVNULL, env=ENV))
        if i == 0:
            time.sleep(0.3)
    if [r.wait(timeout=120) for r in refs] != [0, 0][:len(refs)]:
        logs_and_fail("[native] the reference pair failed")
    ck = os.path.join(A.workdir, "ck")
    os.makedirs(ck)
    port = free_port(rng, coord_ip)
    env = dict(ENV, REVIVE_COORD_HOST=coord_ip)
    r = run([A.revive, "coordinator", "--daemon", "--exit-on-last", "--port", str(port), "--ckpt-dir", ck,
             "--bind", coord_ip], env=env)
    if r.returncode != 0:
        logs_and_fail("coordinator --bind %s: %s" % (coord_ip, r.stderr))
    jobs = []
    for i, p in enumerate(progs):
        d = os.path.join(A.workdir, "run-%d" % i)
        os.makedirs(d)
        jobs.append(subprocess.Popen(ns_prefix(hosts[i]) + ["env", "REVIVE_HOST_ID=" + hosts[i], A.revive, "launch",
                                     "--port", str(port), "--ckpt-dir", ck, "--"] + p, cwd=d,
                                     stdout=open(os.path.join(d, "stdout"), "wb"),
                                     stderr=open(os.path.join(d, "stderr"), "wb"), stdin=subprocess.DEVNULL, env=env,
                                     start_new_session=True))
        if i == 0:
            time.sleep(0.3)
    wait_running(port, ck, 2, "launch", env=env)
    for k in range(A.ckpts):
        time.sleep(rng.uniform(*A.delay))
        for j in jobs:
            if j.poll() is not None:
                logs_and_fail("[run] a side ended (status %s) before checkpoint %d: make it run longer" % (j.returncode, k + 1))
        checkpoint(port, ck, k + 1, "run", env)
    time.sleep(rng.uniform(0, 0.3))
    kill_tree([j.pid for j in jobs], reap=lambda: [j.wait(timeout=30) for j in jobs])
    if not coordinator_gone(A.revive, port, ck, env):
        logs_and_fail("[run] the coordinator did not exit after its processes died")
    import json
    gens = sorted(int(x.split("-")[1]) for x in os.listdir(ck) if re.match(r"ckpt-\d+$", x))
    m = json.load(open(os.path.join(ck, "ckpt-%d" % gens[-1], "MANIFEST.json")))
    swapped = [hosts[1] if p["host"] == hosts[0] else hosts[0] for p in m["processes"]]
    rerr = open(os.path.join(A.workdir, "restart.err"), "wb")
    if A.ib2tcp:
        for h in hosts:
            stop_daemon(h)
        print("[run] devices removed: restarting over TCP", flush=True)
    rp = subprocess.Popen([A.revive, "restart", "--port", str(port), "--hosts", ",".join(swapped), "--launcher",
                           "netns"] + (["--ib2tcp"] if A.ib2tcp else []) + [ck], cwd=A.workdir, stdout=rerr, stderr=rerr, stdin=subprocess.DEVNULL, env=env,
                          start_new_session=True)
    try:
        rc = rp.wait(timeout=A.timeout)
    except subprocess.TimeoutExpired:
        kill_tree([rp.pid], reap=lambda: rp.wait(timeout=30))
        logs_and_fail("[restart] the restored pair did not finish within %d s" % A.timeout)
    if rc != 0:
        logs_and_fail("[restart] revive restart exited %d" % rc)
    if kind == "pingpong":
        check_pingpong([os.path.join(A.workdir, "run-%d" % i, "stdout") for i in range(2)], n, "compare")
        print("[compare] after a restart on swapped hosts", flush=True)
    for i in range(2 if kind == "prog" else 0):
        want = open(os.path.join(A.workdir, "ref-%d" % i, "stdout"), "rb").read()
        got = open(os.path.join(A.workdir, "run-%d" % i, "stdout"), "rb").read()
        if want != got:
            logs_and_fail("[compare] side %d's stdout differs from the native run's:\n--- want\n%s--- got\n%s"
                          % (i, want.decode(errors="replace"), got.decode(errors="replace")))
    if kind == "prog":
        print("[compare] both sides' stdout identical to the native pair's, after a restart on swapped hosts", flush=True)
    for h in hosts:
        stop_daemon(h)
    print("OK", flush=True)


def main():
    global A, ENV
    ap = argparse.ArgumentParser()
    for k in ("--revive", "--inject", "--restart", "--sv-lib", "--daemon", "--workdir"):
        ap.add_argument(k, required=True)
    ap.add_argument("--mode", choices=["same", "newdev", "netns"], default="same")
    ap.add_argument("--netns", help="scripts/netns.sh (mode netns)")
    ap.add_argument("--ckpts", type=int, default=2)
    ap.add_argument("--chain", type=int, default=0)
    ap.add_argument("--iters", type=int, default=0, help="pingpong: -n (default 50000)")
    ap.add_argument("--delay", type=float, nargs=2, default=[0.4, 1.2])
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--fabric", action="store_true", help="a libfabric program: no verbs device")
    ap.add_argument("--ib2tcp", action="store_true", help="restart over TCP, without the device")
    ap.add_argument("--refused", help="the checkpoint must fail with this text; the job must finish unharmed")
    ap.add_argument("argv", nargs="+")
    A = ap.parse_args()
    for k in ("revive", "inject", "restart", "sv_lib", "daemon", "workdir"):
        setattr(A, k, os.path.abspath(getattr(A, k)))
    shutil.rmtree(A.workdir, ignore_errors=True)
    os.makedirs(os.path.join(A.workdir, "reg"))
    ENV = clean_env(dict(REVIVE_INJECT_LIB=A.inject, REVIVE_RESTART_BIN=A.restart, REVIVE_LOG="1"))
    if not A.fabric:
        ENV["LD_LIBRARY_PATH"] = A.sv_lib + (":" + ENV["LD_LIBRARY_PATH"] if ENV.get("LD_LIBRARY_PATH") else "")
    else:
        # libfabric's tcp and sockets providers put their endpoints on an interface's own address, not on
        # the 127.0.0.1 the program names, and may pick a bridge of a network-namespace test running
        # beside (10.77.0.1, ...). When that test removes its bridge, every connection on the address
        # stalls for good (zero-window probes to an address that is gone), natively too: the "lost drain
        # marker" and fi_inflight's native hangs seen in CI (2026-11-27, `ss -tnie` of a stalled run).
        # A user's cluster has no interfaces coming and going; here the providers use loopback.
        ENV["FI_TCP_IFACE"] = ENV["FI_SOCKETS_IFACE"] = "lo"
    ENV["SOFTVERBS_DIR"] = os.path.join(A.workdir, "reg")  # private sockets and LID registry
    ENV["SOFTVERBS_NO_SPAWN"] = "1"  # the device is the test's daemon, never a child of the job
    try:
        if A.mode == "netns":
            A.seed = A.seed if A.seed is not None else random.randrange(1 << 30)
            with_namespaces(A, "rvi", "10.87", 2, lambda rng, seed, prefix, net: two_hosts(rng, prefix, net))
        else:
            seed = A.seed if A.seed is not None else random.randrange(1 << 30)
            print("seed %d" % seed, flush=True)
            one_host(random.Random(seed))
    finally:
        for ns in list(DAEMONS):
            stop_daemon(ns)
    shutil.rmtree(A.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
