#!/usr/bin/env python3
"""Pre-images go back on the host that made them (docs/plugins.md "files", `revive restart --hosts`).

Two network-namespace hosts, each with its own node-local directory at one path (NODE = WORK/nodelocal:
a private mount namespace per host with WORK/local-<host> bound on it, kept across the kill, as a real
host's /tmp is), each holding state.txt and conf.txt with contents of its own, made before the launch.
`revive launch --hosts h1,h2 -n 2` runs one program per host; after the checkpoint each program appends
to its state.txt (O_APPEND: a cut-back record), rewrites its conf.txt from its contents (O_TRUNC: a copy)
and later rewrites state.txt too (the cut-back record becomes a copy). SIGKILL at a random moment;
`revive restart --hosts h1,h2` with the same launcher. Each host's files and each program's output must
equal an uninterrupted run of that host's program, byte for byte. Putting every pre-image back on every
host (as before 2026-11-27) writes one host's conf.txt into the other's, or refuses the cut-back record of
the other host's state.txt (another inode): the test fails either way. Exits 77 without namespaces.
"""
import json, os, random, shutil, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
from harness import clean_env, descendants, fail, free_port, run, wait_procs, with_namespaces  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from preimage_test import PROLOGUE  # noqa: E402

PROG = PROLOGUE + r'''
for step in range(48):
    fd = os.open("nodelocal/state.txt", os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"step %d after %s\n" % (step, h(rd("nodelocal/state.txt")).encode()))
    os.close(fd)
    if step == 8:    # O_TRUNC from the old contents
        old = rd("nodelocal/conf.txt"); open("nodelocal/conf.txt", "wb").write(h(old).encode() * 2)
    if step == 24:   # the appended file rewritten: its cut-back record becomes a copy
        old = rd("nodelocal/state.txt"); open("nodelocal/state.txt", "wb").write(h(old).encode() + b"\n")
    print("step", step, flush=True)
    time.sleep(0.02)
while not os.path.exists("ctl/end"): time.sleep(0.01)
for n in ("nodelocal/state.txt", "nodelocal/conf.txt"):
    print(n, h(rd(n)))
'''


def fill(local, k):
    os.makedirs(local)
    for n in ("state.txt", "conf.txt"):
        with open(os.path.join(local, n), "w") as f:
            f.write("%s of host %d\n" % (n, k) * (10 + 7 * k))


def files_of(local):
    return {n: open(os.path.join(local, n), "rb").read() for n in ("state.txt", "conf.txt")}


def test(a, rng, seed, prefix, net):
    hosts = [prefix + "1", prefix + "2"]
    work = os.path.abspath(a.workdir)
    shutil.rmtree(work, ignore_errors=True)
    revive = os.path.abspath(a.revive)
    env = clean_env({"REVIVE_LOG": "1", "REVIVE_COORD_HOST": net + ".1"})
    # The uninterrupted runs: host k's program on host k's files.
    ref = []
    for k in range(2):
        d = os.path.join(work, "ref%d" % k)
        fill(os.path.join(d, "nodelocal"), k)
        os.makedirs(os.path.join(d, "ctl"))
        for n in ("go", "end"):
            open(os.path.join(d, "ctl", n), "w").close()
        with open(os.path.join(d, "prog.py"), "w") as f:
            f.write(PROG)
        r = subprocess.run(["/usr/bin/python3", "prog.py"], cwd=d, stdout=subprocess.PIPE, timeout=60)
        ref.append((r.stdout, files_of(os.path.join(d, "nodelocal"))))

    d = os.path.join(work, "run")
    os.makedirs(os.path.join(d, "ctl"))
    os.makedirs(os.path.join(d, "nodelocal"))
    with open(os.path.join(d, "prog.py"), "w") as f:
        f.write(PROG)
    for k, h in enumerate(hosts):
        fill(os.path.join(d, "local-" + h), k)
    ck = os.path.join(d, "ck")
    port = free_port(rng, net + ".1")
    sub = free_port(rng)
    tmpl = ("ip netns exec {host} unshare -m --propagation private sh -c "
            "'mount --bind %s/local-{host} %s/nodelocal && exec \"$0\" \"$@\"' {cmd}" % (d, d))
    place = ["--hosts", ",".join(hosts), "--launcher", tmpl, "--sub-port", str(sub)]
    print("seed %d, port %d, sub-ports %d-%d" % (seed, port, sub, sub + 1), flush=True)
    lerr = open(os.path.join(d, "launch-stderr"), "wb")
    lp = subprocess.Popen([revive, "launch", "--port", str(port), "--ckpt-dir", ck] + place + ["-n", "2", "--",
                          "bash", "-c", 'exec /usr/bin/python3 prog.py > out-$REVIVE_LAUNCH_INDEX'],
                          cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=lerr, stderr=lerr)
    outs = [os.path.join(d, "out-%d" % i) for i in range(2)]
    deadline = time.time() + 60
    while not all(os.path.exists(o) and b"ready" in open(o, "rb").read() for o in outs):
        if time.time() > deadline or lp.poll() is not None:
            fail("the programs did not start: %s" % open(os.path.join(d, "launch-stderr")).read()[-1500:])
        time.sleep(0.02)
    wait_procs(revive, port, ck, env, 2, procs=[lp])
    r = run([revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=env, timeout=90)
    if r.returncode != 0:
        fail("checkpoint: %s" % r.stderr.strip())
    open(os.path.join(d, "ctl", "go"), "w").close()
    time.sleep(rng.uniform(0.3, 1.4))  # the changes run from 0 to about 1.2 s
    if lp.poll() is not None:
        fail("the launch ended before the kill")
    for q in descendants(lp.pid):
        try:
            os.kill(q, 9)
        except ProcessLookupError:
            pass
    run(["pkill", "-9", "-f", "(revive|coordinator).*--port (%d|%d|%d)( |$)" % (port, sub, sub + 1)])
    lp.wait()
    time.sleep(0.3)
    gen = sorted(x for x in os.listdir(ck) if x.startswith("ckpt-"))[-1]
    pre = os.path.join(ck, gen, ".pre")
    recs = [x for x in os.listdir(pre) if "." not in x] if os.path.isdir(pre) else []
    made = {h: sum(1 for x in recs if open(os.path.join(pre, x), "rb").read().endswith(h.encode())) for h in hosts}
    if sum(made.values()) != len(recs):
        fail("records that name neither host: %s" % recs)
    open(os.path.join(d, "ctl", "end"), "w").close()
    # Each process back on the host it ran on (--hosts alone deals trees out in manifest order).
    m = json.load(open(os.path.join(ck, gen, "MANIFEST.json")))
    pins = ",".join("%d=%s" % (q["upid"], q["host"]) for q in m["processes"])
    rr = subprocess.run([revive, "restart", "--port", str(port), "--map", pins] + place + [ck], cwd=d, env=env,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if rr.returncode != 0:
        run(["pkill", "-9", "-f", "(revive|coordinator).*--port (%d|%d|%d)( |$)" % (port, sub, sub + 1)])
        fail("restart exited %d: %s" % (rr.returncode, rr.stderr[-2000:]))
    for k, h in enumerate(hosts):
        got = (open(outs[k], "rb").read(), files_of(os.path.join(d, "local-" + h)))
        for what, x, y in (("output", got[0], ref[k][0]), ("state.txt", got[1]["state.txt"], ref[k][1]["state.txt"]),
                           ("conf.txt", got[1]["conf.txt"], ref[k][1]["conf.txt"])):
            if x != y:
                n = next(i for i in range(min(len(x), len(y)) + 1) if i == min(len(x), len(y)) or x[i] != y[i])
                fail("host %s: %s differs from the uninterrupted run's at byte %d (records per host %s):\n%r\nvs\n%r"
                     % (h, what, n, made, x[max(0, n - 200):n + 300], y[max(0, n - 200):n + 300]))
    print("records per host %s; each host's files and output identical" % made, flush=True)
    shutil.rmtree(work, ignore_errors=True)


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--revive", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--netns", required=True, help="scripts/netns.sh")
    ap.add_argument("--seed", type=int)
    a = ap.parse_args()
    if not shutil.which("unshare"):
        print("SKIP: unshare not installed")
        sys.exit(77)
    with_namespaces(a, "rvq", "10.86", 2, lambda rng, seed, prefix, net: test(a, rng, seed, prefix, net))
    print("PASS")


if __name__ == "__main__":
    main()
