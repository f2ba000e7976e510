#!/usr/bin/env python3
"""`revive restart --lazy` of a damaged image (src/cli/lazy_verify.h). progs/lazy_heap.c fills 32 MiB with a
pattern and is checkpointed and killed; the checkpoint is copied. The intact copy restarted lazily ends
with "heap ok", exit 0. In the other, one byte of the heap is flipped in the image (inside a chunk that a
lazy restart maps instead of reading): restarted lazily, the computation must be stopped before the
program ends, with a message naming the chunk and the image; an eager restart refuses it outright.

usage: lazy_damaged.py --revive R --inject I --restart RS --workdir W PROG"""
import glob, os, random, shutil, signal, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_driver import checkpoint, coordinator_gone, fail, free_port, parser, wait_connected  # noqa: E402


def end_coordinator(port):
    """After a failed restart the coordinator stays 30 s for processes still being restored (src/coord,
    kRestartFailedGrace); this test has none left: it is ended (its command line names the port)."""
    for pid in os.listdir("/proc"):
        try:
            argv = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
        except OSError:
            continue
        if any(b"coordinator" in x for x in argv) and any(
                argv[i] == b"--port" and argv[i + 1] == str(port).encode() for i in range(len(argv) - 1)):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def restart(revive, port, ck, work, env, lazy, name):
    cmd = [revive, "restart", "--port", str(port)] + (["--lazy"] if lazy else []) + [ck]
    with open(os.path.join(work, name + ".out"), "wb") as out, open(os.path.join(work, name + ".err"), "wb") as err:
        r = subprocess.run(cmd, cwd=work, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, timeout=120)
    if r.returncode != 0:
        end_coordinator(port)
    if not coordinator_gone(revive, port, ck, 15):
        fail("%s: the restart's coordinator did not exit" % name)
    return r.returncode, open(os.path.join(work, name + ".err")).read()


def main():
    ap = parser()
    ap.add_argument("prog")
    a = ap.parse_args()
    revive = os.path.abspath(a.revive)
    shutil.rmtree(a.workdir, ignore_errors=True)
    work = os.path.join(a.workdir, "run")
    os.makedirs(work)
    ck, intact = os.path.join(a.workdir, "ck"), os.path.join(a.workdir, "ck-intact")
    port = free_port(random.Random())
    env = dict(os.environ, REVIVE_INJECT_LIB=os.path.abspath(a.inject), REVIVE_RESTART_BIN=os.path.abspath(a.restart),
               REVIVE_LOG="0", REVIVE_LOCAL_DIRS="")
    for k in ("REVIVE_PORT", "REVIVE_CKPT_DIR", "REVIVE_SECRET_FILE", "LD_PRELOAD"):
        env.pop(k, None)
    out = open(os.path.join(work, "stdout"), "wb")
    p = subprocess.Popen([revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--", os.path.abspath(a.prog), "80"],
                         cwd=work, stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
    deadline = time.time() + 30
    while b"ready\n" not in open(os.path.join(work, "stdout"), "rb").read():
        if p.poll() is not None or time.time() > deadline:
            fail("the program did not get ready")
        time.sleep(0.02)
    wait_connected(revive, port, ck, 1)
    checkpoint(revive, port, ck, 1)
    p.kill()
    p.wait()
    if not coordinator_gone(revive, port, ck, 15):
        fail("the launch's coordinator did not exit")
    shutil.copytree(ck, intact, symlinks=True)

    rc, err = restart(revive, port, intact, work, env, True, "intact")
    text = open(os.path.join(work, "stdout"), "rb").read().decode(errors="replace")
    if rc != 0 or not text.endswith("heap ok\n"):
        fail("lazy restart of the intact image: rc %d, stdout %r, stderr %r" % (rc, text[-200:], err))
    print("intact image, --lazy: heap ok, rc 0", flush=True)

    image = glob.glob(os.path.join(ck, "ckpt-1", "*.rimg"))[0]
    data = bytearray(open(image, "rb").read())
    hits = []
    at = data.find(b"LAZYHEAP")
    while at >= 0 and len(hits) < 600000:
        hits.append(at)
        at = data.find(b"LAZYHEAP", at + 64)
    if len(hits) < 100000:
        fail("%s: the heap's pattern is not in the image (%d blocks found): stored compressed?" % (image, len(hits)))
    spot = hits[len(hits) // 2] + 40
    data[spot] ^= 0x5a
    open(image, "wb").write(bytes(data))
    print("flipped the byte at offset %d of %s" % (spot, image), flush=True)

    rc, err = restart(revive, port, ck, work, env, False, "eager")
    if rc == 0 or "checksum mismatch" not in err:
        fail("eager restart of the damaged image: rc %d, want a refusal naming the checksum: %r" % (rc, err))
    rc, err = restart(revive, port, ck, work, env, True, "lazy")
    text = open(os.path.join(work, "stdout"), "rb").read().decode(errors="replace")
    want = ["image %s: data chunk" % image, "checksum mismatch",
            "with --lazy maps those bytes unverified, so the computation is stopped"]
    if rc == 0 or [w for w in want if w not in err] or "heap BAD" in text:
        fail("lazy restart of the damaged image: rc %d (want the computation stopped), stdout tail %r, stderr %r"
             % (rc, text[-200:], err))
    print("damaged image: eager refused, --lazy stopped (rc %d) before the program read the bad block" % rc,
          flush=True)


if __name__ == "__main__":
    main()
