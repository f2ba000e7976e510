#!/usr/bin/env python3
"""fork+_exit+waitpid as a restarted computation sees it (issue 8): one program (fork_loop) run natively,
under the injected library alone (LD_PRELOAD, no coordinator), under `revive launch`, under launch after
one checkpoint (taken while it waits at its gate: "ckpt"), and restarted with virtual pids (launched, checkpointed while it waits at a gate,
SIGKILLed, `revive restart` with REVIVE_VPID=1: new kernel pids, the table mapped, forks take the lazy
join), alternated K times; each run ROUNDS rounds of N forks. Prints the median us per fork of each
mode and its ratio to native measured in the same alternation (this VM drifts by more than the
differences: paired ratios are steadier than a ratio of overall medians).

Usage: restart_fork.py BUILD_DIR [K] [ROUNDS] [N]"""
import os, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

B = os.path.abspath(sys.argv[1])
K = int(sys.argv[2]) if len(sys.argv) > 2 else 3
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 5
N = int(sys.argv[4]) if len(sys.argv) > 4 else 200
prog = os.path.join(B, "bench", "vpid", "fork_loop")
revive = os.path.join(B, "src", "cli", "revive")
env = dict(os.environ, REVIVE_INJECT_LIB=os.path.join(B, "src", "inject", "librevive_inject.so"),
           REVIVE_RESTART_BIN=os.path.join(B, "src", "restart", "revive-restart"), REVIVE_LOG="0")
for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD", "REVIVE_SIGNAL", "REVIVE_VPID"):
    env.pop(k, None)


def die(msg):
    sys.exit("restart_fork: " + msg)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(path, text, proc, what, timeout=60):
    deadline = time.time() + timeout
    while text not in open(path, "rb").read():
        if proc.poll() is not None:
            die("%s ended (rc %s) before printing %r: %s" % (what, proc.returncode, text, open(path, "rb").read()))
        if time.time() > deadline:
            die("%s did not print %r in %d s" % (what, text, timeout))
        time.sleep(0.01)


faults = {}  # mode -> [(parent, child) page faults per fork, per round]


def figures(path):
    lines = open(path).read().split("\n")
    i = lines.index("started")
    rows = [x.split() for x in lines[i + 1:i + 1 + ROUNDS]]
    vals = [float(r[0]) for r in rows]
    faults.setdefault(os.path.basename(os.path.dirname(path)), []).extend((float(r[1]), float(r[2])) for r in rows)
    if len(vals) != ROUNDS or not lines[i + 1 + ROUNDS].startswith("pid "):
        die("unexpected output in %s: %r" % (path, lines))
    return vals, int(lines[i + 1 + ROUNDS].split()[1])


def run(mode, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    gate, out, ck = (os.path.join(work, x) for x in ("gate", "out", "ck"))
    args = [prog, gate, str(ROUNDS), str(N)]
    if mode not in ("ckpt", "restart"):
        open(gate, "w").close()
    if mode in ("native", "library"):
        e = dict(env, LD_PRELOAD=env["REVIVE_INJECT_LIB"]) if mode == "library" else env
        with open(out, "wb") as f:
            subprocess.run(args, stdout=f, check=True, env=e)
        return figures(out)
    port = str(free_port())
    with open(out, "wb") as f:
        p = subprocess.Popen([revive, "launch", "--port", port, "--ckpt-dir", ck, "--"] + args, cwd=work,
                             stdout=f, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
                             start_new_session=True)
    if mode == "launch":
        if p.wait(timeout=300) != 0:
            die("revive launch exited %d" % p.returncode)
        return figures(out)
    wait_for(out, b"started\n", p, "the launched program")
    c = subprocess.run([revive, "checkpoint", "--port", port, "--ckpt-dir", ck], capture_output=True, env=env)
    if c.returncode != 0:
        die("revive checkpoint: %s" % c.stderr.decode(errors="replace"))
    if mode == "ckpt":  # checkpointed once, going on in the same process
        open(gate, "w").close()
        if p.wait(timeout=300) != 0:
            die("revive launch exited %d" % p.returncode)
        return figures(out)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    time.sleep(0.3)  # the coordinator leaves once its processes are gone
    r = subprocess.Popen([revive, "restart", "--port", port, ck], cwd=work, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=dict(env, REVIVE_VPID="1"),
                         start_new_session=True)
    time.sleep(0.5)
    open(gate, "w").close()
    if r.wait(timeout=300) != 0:
        die("revive restart exited %d" % r.returncode)
    vals, pid = figures(out)
    return vals, pid


def main():
    for x in (prog, revive):
        if not os.path.exists(x):
            die("missing " + x)
    top = tempfile.mkdtemp(prefix="revive-restart-fork-")
    res = {m: [] for m in (os.environ.get("MODES") or "native library launch ckpt restart").split()}
    ratios = {m: [] for m in res}
    try:
        for k in range(K):
            per = {}
            for m in res:
                vals, pid = run(m, os.path.join(top, m))
                if m == "restart" and pid == 0:
                    die("no pid line")
                res[m] += vals
                per[m] = statistics.median(vals)
            for m in res:
                ratios[m].append(per[m] / per["native"])
        nat = statistics.median(res["native"])
        print("fork+_exit+waitpid, %d alternated runs of %d rounds of %d forks per mode:" % (K, ROUNDS, N))
        print("  (median of all rounds; ratio: median over the runs of each run's median / native's in that run)")
        for m in res:
            v = statistics.median(res[m])
            r = sorted(ratios[m])
            pf = statistics.median(x[0] for x in faults[m])
            cf = statistics.median(x[1] for x in faults[m])
            print("  %-8s %7.1f us  %.2fx native (runs %.2f-%.2fx)  page faults per fork: parent %.1f, child %.1f"
                  % (m, v, statistics.median(r), r[0], r[-1], pf, cf))
    finally:
        shutil.rmtree(top, ignore_errors=True)


main()
