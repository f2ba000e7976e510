#!/usr/bin/env python3
"""What a taken listener port costs a restart (docs/channels.md "A listener's port taken").

A python3 server listens on port P and forks a client that makes a new connection to 127.0.0.1:P every
20 ms and prints the reply. Launched under revive, checkpointed once, killed. Then restarted from that
checkpoint RUNS times with P free and RUNS times with P held by another program (interleaved), each timed
from the `revive restart` command to the first line the restored client prints (the program doing work
again), and killed. Prints the medians and the ratio held / free (the free restart is the limit: the same
restart without the move). Never asserted.

  python3 bench/channels/port_taken_bench.py --revive BUILD/src/cli/revive [--runs 5]"""
import argparse, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

PROG = r'''
import os, socket, sys, time
port = int(sys.argv[1])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # else its TIME_WAITs keep the holder out too
srv.bind(("0.0.0.0", port))
srv.listen(16)
if os.fork() == 0:
    srv.close()
    i = 0
    while True:
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(b"%d\n" % i)
        print(i, c.recv(64).decode().strip(), flush=True)
        c.close()
        i += 1
        time.sleep(0.02)
while True:
    conn, _ = srv.accept()
    n = int(conn.recv(64))
    conn.sendall(b"%d\n" % (n * n))
    conn.close()
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_tree(pid, prog):
    """SIGKILL pid's session (the launch or restart) and the program (a restored tree makes its recorded
    session again, not the restart's), and wait until the program is gone."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    subprocess.run(["pkill", "-9", "-f", prog])
    for _ in range(200):
        if subprocess.run(["pgrep", "-f", prog], capture_output=True).returncode != 0:
            return
        time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--revive", required=True)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    revive = os.path.abspath(a.revive)
    work = tempfile.mkdtemp(prefix="port-bench-")
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    prog = os.path.join(work, "prog.py")
    open(prog, "w").write(PROG)
    lport, cport, ck = free_port(), free_port(), os.path.join(work, "ck")
    env = dict(os.environ, REVIVE_LOCAL_DIRS="", REVIVE_LOG="0")
    try:
        p = subprocess.Popen([revive, "launch", "--port", str(cport), "--ckpt-dir", ck, "--", py, prog, str(lport)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        for _ in range(10):
            p.stdout.readline()
        r = subprocess.run([revive, "checkpoint", "--port", str(cport), "--ckpt-dir", ck], env=env,
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            sys.exit("checkpoint: " + r.stderr)
        kill_tree(p.pid, prog)
        p.wait()
        subprocess.run(["pkill", "-9", "-f", "coordinator.*--port %d( |$)" % cport])
        times = {"free": [], "held": []}
        for k in range(a.runs):
            for mode in ("free", "held"):
                holder = None
                if mode == "held":
                    holder = socket.socket()
                    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    holder.bind(("127.0.0.1", lport))
                    holder.listen(16)
                t0 = time.time()
                q = subprocess.Popen([revive, "restart", "--port", str(cport), ck], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, start_new_session=True)
                line = q.stdout.readline()
                dt = time.time() - t0
                kill_tree(q.pid, prog)
                q.wait()
                subprocess.run(["pkill", "-9", "-f", "coordinator.*--port %d( |$)" % cport])
                if holder:
                    holder.close()
                if not line:
                    sys.exit("restart (%s) printed nothing" % mode)
                times[mode].append(dt)
                time.sleep(0.3)
        f, h = statistics.median(times["free"]), statistics.median(times["held"])
        print("restart to the client's first line, %d runs each (medians):" % a.runs)
        print("  port free   %.3f s  (%s)" % (f, " ".join("%.2f" % t for t in times["free"])))
        print("  port held   %.3f s  (%s)" % (h, " ".join("%.2f" % t for t in times["held"])))
        print("  held / free %.2f x  (+%.3f s)" % (h / f, h - f))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
