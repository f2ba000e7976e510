#!/usr/bin/env python3
"""Policy for pipes to processes outside the computation (docs/channels.md): a program (python3) reads
lines from one pipe and writes ticks into another, both held at the other end by this driver, which is not
part of the computation (fds 5 and 6, above 0/1/2). It is checkpointed, killed and restarted without the
driver's ends: the restored program must find both pipes widowed -- its read returns end of file, its write
fails with EPIPE -- as if the driver had gone away, and not /dev/null (writes vanishing without a sign,
the program ticking forever). No stand-in warning may be printed for them: they are restored."""
import argparse, os, shutil, socket, subprocess, sys, time

PROG = r'''
import os, signal, sys, time, select
signal.signal(signal.SIGPIPE, signal.SIG_IGN)
eof = epipe = False
i = 0
while not (eof and epipe):
    if not eof and select.select([5], [], [], 0.01)[0]:
        d = os.read(5, 4096)
        if d:
            for line in d.decode().splitlines():  # two lines may come in one read on a loaded machine
                print("got", line, flush=True)
        else:
            eof = True
            print("reader eof", flush=True)
    if not epipe:
        try:
            os.write(6, b"tick %d\n" % i)
            i += 1
        except BrokenPipeError:
            epipe = True
            print("writer epipe", flush=True)
    time.sleep(0.01)
print("done", flush=True)
'''

def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)

def main():
    ap = argparse.ArgumentParser()
    for k in ("revive", "workdir"):
        ap.add_argument("--" + k, required=True)
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    ck = os.path.join(a.workdir, "ck")
    prog = os.path.join(a.workdir, "prog.py")
    open(prog, "w").write(PROG)
    env = dict(os.environ, REVIVE_LOG="1")
    for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD"):
        env.pop(k, None)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Away from 5 and 6 first, so that placing them cannot close one another.
    r_in, w_in, r_out, w_out = [os.dup2(f, 20 + k, inheritable=False) for k, f in enumerate(os.pipe() + os.pipe())]
    def child_fds():
        os.dup2(r_in, 5)
        os.dup2(w_out, 6)
    out = os.path.join(a.workdir, "stdout")
    err = os.path.join(a.workdir, "stderr")
    p = subprocess.Popen([a.revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--", "/usr/bin/python3", prog],
                         stdout=open(out, "wb"), stderr=open(err, "wb"), stdin=subprocess.DEVNULL, env=env,
                         preexec_fn=child_fds, close_fds=True, pass_fds=(5, 6))
    os.close(r_in)
    os.close(w_out)
    os.set_blocking(r_out, False)
    for i in range(3):
        os.write(w_in, b"line %d\n" % i)
        time.sleep(0.2)
    # The program (python3 under revive launch) may start slowly on a loaded machine: wait until it has
    # ticked and taken the three lines (bytes it left in the pipe would be lost with the driver's end).
    ticks = b""
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            ticks += os.read(r_out, 65536)
        except BlockingIOError:
            pass
        if b"tick" in ticks and open(out).read().count("got line") >= 3:
            break
        time.sleep(0.05)
    if b"tick" not in ticks:
        fail("no ticks from the program within 30 s")
    if open(out).read().count("got line") < 3:
        fail("the program did not read the three lines within 30 s")
    r = subprocess.run([a.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    if r.returncode != 0:
        fail("checkpoint failed: %s" % r.stderr)
    p.kill()
    p.wait()
    subprocess.run(["pkill", "-9", "-f", prog])
    subprocess.run(["pkill", "-9", "-f", "(revive|coordinator).*--port %d( |$)" % port])
    os.close(w_in)
    os.close(r_out)
    time.sleep(0.3)
    t = time.time()
    with open(out, "ab") as o, open(err, "ab") as e:
        rr = subprocess.run([a.revive, "restart", "--port", str(port), ck], stdout=o, stderr=e, env=env, timeout=60)
    lines = open(out).read().splitlines()
    errs = open(err).read()
    print("restart exited %d after %.2fs; output %s" % (rr.returncode, time.time() - t, lines), flush=True)
    if rr.returncode != 0:
        fail("restart exited %d: %s" % (rr.returncode, errs[-1500:]))
    if "reader eof" not in lines or "writer epipe" not in lines or lines[-1] != "done":
        fail("the restored program did not find both outside pipes widowed: %s" % lines)
    if lines[:3] != ["got line 0", "got line 1", "got line 2"]:
        fail("lines before the checkpoint: %s" % lines[:3])
    for fd in (5, 6):
        if ("fd %d (" % fd) in errs and "/dev/null" in errs:
            fail("a stand-in warning was printed for fd %d although it was restored:\n%s" % (fd, errs[-1500:]))
    print("PASS: both outside pipes came back widowed (EOF, EPIPE)", flush=True)

if __name__ == "__main__":
    main()
