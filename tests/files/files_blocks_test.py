#!/usr/bin/env python3
"""Large written files saved by blocks (files plugin, docs/plugins.md "files", "Large files").

A program keeps a 48 MiB file open for writing and rewrites small ranges of it in place, in three hot
1 MiB blocks, between checkpoints (and keeps a 16 MiB file it wrote once open for writing, untouched).
Cases:
  bigfile  three checkpoints; the second and third must store far less than the file (only the changed
           blocks, next to the image); the first generation is then deleted and a fourth checkpoint taken
           (the store sweep must keep exactly the blocks the remaining generations link); SIGKILL at a
           random moment, `revive restart`: stdout and the file must equal an uninterrupted run's.
  crash    a checkpoint, then a second one SIGKILLed at a random point of its save (blocks half written,
           no image), restart: the newest complete generation's blocks are all there; result identical.
  reflink  bigfile's program on an XFS filesystem (loop device, reflink=1): the first checkpoint's blocks
           are clones of the file's extents (FICLONERANGE), so the filesystem's used space grows by far
           less than the file; restart identical. Needs root and mkfs.xfs (scripts/deps.sh); exits 77 only
           when the loop device cannot be made or mounted.
  mapped   bigfile's rewrites made through a shared mapping (ctime moves only when a write faults): later
           checkpoints must still store the changed blocks (no stale fast path); restart identical.
  damaged  one block of the newest generation flipped: the restart refuses, naming the block and the file;
           one block removed: refused as missing; both put back: the restart succeeds, result identical.
Failures print FAIL and exit 1. --seed makes the random moments repeatable. REVIVE_FILES_DELTA_MB=0 (no
block saving: the file is copied into every image, as before) makes bigfile, damaged and reflink fail.
"""
import argparse, glob, hashlib, json, os, random, re, shutil, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hosts"))
from harness import fail, skip, run, free_port, clean_env  # noqa: E402
from files_test import kill_all  # noqa: E402

MIB = 1 << 20
SIZE = 48 * MIB
# A refused restart names the file the block belongs to (blocks of equal contents are stored once: the
# first 16 blocks of big.bin start out equal to still.bin's).
NAMES_FILE = re.compile(r"of '/[^']*/(big|still)\.bin'")

PROG = r'''
import hashlib, os, sys, time
size, steps, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
wide = mode == "wide"
fd = os.open("big.bin", os.O_RDWR | os.O_CREAT, 0o644)
base = bytes(range(256)) * 4096
for k in range(size >> 20):
    os.pwrite(fd, base[k % 251:] + base[:k % 251], k << 20)
# Written once, then left open for writing untouched: its later checkpoints take the fast path (size,
# mtime and ctime unchanged: the previous hashes, linked again without reading it).
still = os.open("still.bin", os.O_RDWR | os.O_CREAT, 0o644)
for k in range(16):
    os.pwrite(still, base[k:] + base[:k], k << 20)
print("ready", flush=True)
for i in range(steps):
    # Small in-place rewrites, always in one of three blocks (3, 12, 21 MiB on): three changed blocks
    # per checkpoint at most (four when a range straddles a block end). "wide": a new block every step.
    blk = (i * 5) % (size >> 20) if wide else 3 + 9 * (i % 3)
    off = blk * (1 << 20) + (i * 4099) % (1 << 20)
    rec = (b"%06d;" % i) * 11
    if mode == "mapped":  # through a shared mapping: no write(), and ctime moves only on a fault
        if i == 0:
            import mmap
            m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        m[off:off + len(rec)] = rec
    else:
        os.pwrite(fd, rec, off)
    print("step", i, flush=True)
    time.sleep(0.02)
h = hashlib.sha256()
for k in range(0, size, 1 << 20):
    h.update(os.pread(fd, 1 << 20, k))
print("final", h.hexdigest(), flush=True)
'''


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MIB), b""):
            h.update(chunk)
    return h.hexdigest()


def inodes(ck):
    """{(dev, ino): (size, kind)} of every regular file under ck (hard links counted once); kind "blk" for
    a block (GEN/.blk-H or the store's link to it), else the file's name."""
    out = {}
    for root, _, files in os.walk(ck):
        for f in files:
            st = os.lstat(os.path.join(root, f))
            blk = f.startswith(".blk-") or os.path.basename(root) == ".revive-blocks"
            out[(st.st_dev, st.st_ino)] = (st.st_size, "blk" if blk else f)
    return out


def blocks_of(gen):
    return sorted(f for f in os.listdir(gen) if f.startswith(".blk-") and not f.endswith(".tmp"))


class T:
    def __init__(self, a, rng):
        self.a, self.rng = a, rng
        self.revive = os.path.abspath(a.revive)
        self.work = os.path.join(os.path.abspath(a.workdir), "blocks-" + a.case)
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.env = clean_env({"REVIVE_LOG": os.environ.get("REVIVE_LOG", "1")})
        self.steps = 120 if a.case == "crash" else 250  # crash restarts three times: shorter runs

    def prepare(self, d):
        os.makedirs(d)
        with open(os.path.join(d, "prog.py"), "w") as f:
            f.write(PROG)
        return ["/usr/bin/python3", "prog.py", str(SIZE), str(self.steps), {"crash": "wide", "mapped": "mapped"}.get(self.a.case, "hot")]

    def start(self, d, argv, port=None, ck=None):
        cmd = argv if port is None else [self.revive, "launch", "--port", str(port), "--ckpt-dir", ck, "--"] + argv
        return subprocess.Popen(cmd, cwd=d, env=self.env, stdin=subprocess.DEVNULL,
                                stdout=open(os.path.join(d, "stdout"), "wb"), stderr=open(os.path.join(d, "stderr"), "wb"))

    def result(self, d):
        return (open(os.path.join(d, "stdout")).read(), digest(os.path.join(d, "big.bin")),
                digest(os.path.join(d, "still.bin")))

    def reference(self):
        d = os.path.join(self.work, "ref")
        p = self.start(d, self.prepare(d))
        if p.wait(timeout=120) != 0:
            fail("uninterrupted run exited %d: %s" % (p.returncode, open(os.path.join(d, "stderr")).read()[-500:]))
        self.ref = self.result(d)

    def wait_ready(self, d, p):
        for _ in range(600):
            if "ready" in open(os.path.join(d, "stdout")).read():
                return
            if p.poll() is not None:
                fail("program ended before it was ready: %s" % open(os.path.join(d, "stderr")).read()[-800:])
            time.sleep(0.05)
        fail("program not ready after 30 s")

    def checkpoint(self, port, ck):
        t0 = time.time()
        r = run([self.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=self.env, timeout=90)
        if r.returncode != 0:
            fail("checkpoint: %s" % r.stderr.strip())
        return time.time() - t0

    def launch(self, d, port):
        """The program under `revive launch` in d, once its file is made: (checkpoint dir, launcher)."""
        ck = os.path.join(d, "ck")
        p = self.start(d, self.prepare(d), port, ck)
        self.wait_ready(d, p)
        time.sleep(0.3)
        return ck, p

    def restart(self, d, port, ck, must_work=True):
        with open(os.path.join(d, "stdout"), "ab") as out:
            rr = subprocess.run([self.revive, "restart", "--port", str(port), ck], cwd=d, env=self.env, stdout=out,
                                stderr=subprocess.PIPE, text=True, timeout=120)
        if must_work and rr.returncode != 0:
            fail("restart exited %d: %s\nprogram's stderr: %s" % (rr.returncode, rr.stderr[-1500:],
                                                                open(os.path.join(d, "stderr")).read()[-1500:]))
        return rr

    def compare(self, d, what):
        got = self.result(d)
        if got != self.ref:
            fail("%s: result differs from the uninterrupted run:\nstdout tail %r, files %s\nvs\nstdout tail %r, files %s"
                 % (what, got[0][-200:], got[1:], self.ref[0][-200:], self.ref[1:]))

    def kill_restart_compare(self, p, port, d, ck, what, upto):
        """SIGKILL at a random moment within `upto` seconds, restart, compare with the uninterrupted run."""
        time.sleep(self.rng.uniform(0.0, upto))
        kill_all(p, port)
        self.restart(d, port, ck)
        self.compare(d, what)

    def store_consistent(self, ck):
        """Every store entry is linked by some generation; every block a generation holds is whole."""
        store = os.path.join(ck, ".revive-blocks")
        names = set(os.listdir(store))
        held = set()
        for g in os.listdir(ck):
            if g.startswith("ckpt-"):
                held |= {b[len(".blk-"):] for b in blocks_of(os.path.join(ck, g))}
        orphans = [n for n in names if os.lstat(os.path.join(store, n)).st_nlink < 2]
        if orphans:
            fail("block store keeps %d blocks no generation links (e.g. %s)" % (len(orphans), orphans[0]))
        return len(names), len(held)

    # --- cases -----------------------------------------------------------------------------------------

    def bigfile(self, port):
        d = os.path.join(self.work, "run")
        ck, p = self.launch(d, port)
        grown = []
        for k in range(3):
            before = inodes(ck) if os.path.isdir(ck) else {}
            secs = self.checkpoint(port, ck)
            after = inodes(ck)
            new = {i: v for i, v in after.items() if i not in before}
            blk = sum(s for s, f in new.values() if f == "blk")
            img = sum(s for s, f in new.values() if f.endswith(".rimg"))
            grown.append(blk)
            steps = open(os.path.join(d, "stdout")).read().count("step")
            print("checkpoint %d (after %d steps): %.2f s, new block bytes %d (%.1f%% of the file), image %d bytes"
                  % (k + 1, steps, secs, blk, 100.0 * blk / SIZE, img), flush=True)
            time.sleep(0.5)
        if grown[0] < SIZE:
            fail("first checkpoint stored %d block bytes, less than the %d-byte file" % (grown[0], SIZE))
        for k in (1, 2):
            if grown[k] > SIZE // 8:
                fail("checkpoint %d stored %d new block bytes: more than 1/8 of the %d-byte file, though only a "
                     "few blocks changed" % (k + 1, grown[k], SIZE))
        # A generation deleted (as a user pruning old ones would): its blocks only it held go at the next
        # checkpoint's sweep, those later generations link stay.
        shutil.rmtree(os.path.join(ck, "ckpt-1"))
        self.checkpoint(port, ck)
        n_store, n_held = self.store_consistent(ck)
        if n_store != n_held:
            fail("block store has %d entries, the generations hold %d distinct blocks" % (n_store, n_held))
        print("after deleting ckpt-1 and checkpointing: store %d blocks = blocks held by generations" % n_store)
        time.sleep(self.rng.uniform(0.0, 1.0))
        kill_all(p, port)
        # The restarted program is checkpointed too (its tables of known blocks came back with its
        # memory; its file was rewritten, so it is read again), killed again, and restarted from there.
        port = free_port(self.rng)
        with open(os.path.join(d, "stdout"), "ab") as out:
            rp = subprocess.Popen([self.revive, "restart", "--port", str(port), ck], cwd=d, env=self.env,
                                  stdout=out, stderr=open(os.path.join(d, "restart.err"), "wb"))
        time.sleep(0.8)
        if rp.poll() is not None:
            fail("the restarted program ended within 0.8 s (exit %s): %s" % (rp.returncode,
                 open(os.path.join(d, "restart.err")).read()[-800:]))
        before = inodes(ck)
        self.checkpoint(port, ck)
        new = sum(s for i, (s, f) in inodes(ck).items() if i not in before and f == "blk")
        print("checkpoint of the restarted program: new block bytes %d" % new, flush=True)
        if new > SIZE // 8:
            fail("the restarted program's checkpoint stored %d new block bytes (more than 1/8 of the file)" % new)
        time.sleep(self.rng.uniform(0.0, 0.5))
        kill_all(rp, port)
        port = free_port(self.rng)
        self.restart(d, port, ck)
        self.compare(d, "bigfile")
        self.store_consistent(ck)
        print("bigfile: restarted twice, file and output identical")

    def mapped(self, port):
        """The hot blocks written through a shared mapping: pages dirty since before a checkpoint take
        later writes without moving ctime unless the save write-protects them; the fast path must not
        reuse the previous hashes then. Three checkpoints, SIGKILL, restart: identical."""
        d = os.path.join(self.work, "run")
        ck, p = self.launch(d, port)
        for k in range(3):
            before = inodes(ck) if os.path.isdir(ck) else {}
            self.checkpoint(port, ck)
            new = sum(s for i, (s, f) in inodes(ck).items() if i not in before and f == "blk")
            print("checkpoint %d: new block bytes %d" % (k + 1, new), flush=True)
            if k and new == 0:
                fail("checkpoint %d stored no new block though the program wrote through its mapping" % (k + 1))
            time.sleep(0.5)
        self.kill_restart_compare(p, port, d, ck, "mapped", 0.5)
        print("mapped: restart ok, file and output identical")

    def crash(self, port):
        """Rounds of: a checkpoint, then a second one (a new block per step of the program since: tens of
        blocks to write) SIGKILLed at a random moment from before it starts to after it ends."""
        for r in range(self.a.rounds):
            if r:
                port = free_port(self.rng)  # the last round's coordinator may still be closing
            d = os.path.join(self.work, "run%d" % r)
            ck, p = self.launch(d, port)
            secs = self.checkpoint(port, ck)
            time.sleep(0.4)
            c = subprocess.Popen([self.revive, "checkpoint", "--port", str(port), "--ckpt-dir", ck], env=self.env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # From the moment its generation directory appears (the coordinator made it; the save is next)
            # to about when the first checkpoint, which wrote every block, had ended.
            t0 = time.time()
            while not os.path.isdir(os.path.join(ck, "ckpt-2")) and time.time() - t0 < 10:
                time.sleep(0.001)
            when = self.rng.uniform(0.0, secs * 0.7)
            time.sleep(when)
            kill_all(p, port)
            c.wait()
            gens = sorted(g for g in os.listdir(ck) if g.startswith("ckpt-"))
            done = [g for g in gens if os.path.exists(os.path.join(ck, g, "MANIFEST.json"))]
            half = [g for g in gens if g not in done]
            nblk = {g: len(blocks_of(os.path.join(ck, g))) for g in gens}
            print("round %d: killed %.3f s after the second checkpoint's directory appeared (the first took %.2f s): complete %s, "
                  "incomplete %s, blocks %s" % (r, when, secs, done, half, nblk), flush=True)
            self.restart(d, port, ck)
            self.compare(d, "crash round %d" % r)
        print("crash: %d rounds, every restart identical" % self.a.rounds)

    def reflink(self, port):
        if os.geteuid() != 0:
            skip("reflink: needs root for a loop device")
        if shutil.which("mkfs.xfs") is None:
            fail("mkfs.xfs is not installed (scripts/deps.sh installs xfsprogs)")
        img, mnt = os.path.join(self.work, "xfs.img"), os.path.join(self.work, "xfs")
        with open(img, "wb") as f:
            f.truncate(768 * MIB)
        r = run(["mkfs.xfs", "-q", "-m", "reflink=1", img])
        if r.returncode != 0:
            fail("mkfs.xfs: %s" % r.stderr)
        os.makedirs(mnt)
        r = run(["losetup", "-f", "--show", img])
        if r.returncode != 0:
            skip("reflink: no loop device: %s" % r.stderr.strip())
        loop = r.stdout.strip()
        try:
            r = run(["mount", loop, mnt])
            if r.returncode != 0:
                skip("reflink: cannot mount %s: %s" % (loop, r.stderr.strip()))
            try:
                self.reflink_on(port, mnt)
            finally:
                run(["umount", "-l", mnt])
        finally:
            run(["losetup", "-d", loop])

    def reflink_on(self, port, mnt):
        d = os.path.join(mnt, "run")
        ck, p = self.launch(d, port)
        used = []
        for k in range(2):
            sv = os.statvfs(mnt)
            before = (sv.f_blocks - sv.f_bfree) * sv.f_frsize
            self.checkpoint(port, ck)
            sv = os.statvfs(mnt)
            used.append((sv.f_blocks - sv.f_bfree) * sv.f_frsize - before)
            img = sum(os.path.getsize(os.path.join(ck, "ckpt-%d" % (k + 1), f))
                      for f in os.listdir(os.path.join(ck, "ckpt-%d" % (k + 1))) if f.endswith(".rimg"))
            print("checkpoint %d on XFS: space used grew %d bytes (image %d, file %d)" % (k + 1, used[-1], img, SIZE),
                  flush=True)
            if img > SIZE // 4:
                fail("checkpoint %d on XFS: a %d-byte image holds the file's contents" % (k + 1, img))
            if used[-1] - img > SIZE // 4:
                fail("checkpoint %d on XFS took %d bytes beside its %d-byte image: the blocks were copied, not "
                     "cloned" % (k + 1, used[-1] - img, img))
            time.sleep(0.4)
        self.kill_restart_compare(p, port, d, ck, "reflink", 1.0)
        print("reflink: blocks cloned, restart ok, file and output identical")

    def inspect_bad(self, images, what, block):
        """revive inspect of each image: the one that needs `block` exits 1 naming it and `what`; every
        image exits 0 or 1 (never a crash). Returns that image's output."""
        for img in images:
            r = subprocess.run([self.revive, "inspect", img], capture_output=True, text=True, timeout=120)
            if r.returncode not in (0, 1):
                fail("revive inspect of %s exited %d:\n%s%s" % (img, r.returncode, r.stdout[-1500:], r.stderr))
            if r.returncode == 1 and what in r.stdout and block in r.stdout:
                return r.stdout
        fail("revive inspect of %s: no image reported block %s as '%s'" % (images, block, what))

    def damaged(self, port):
        d = os.path.join(self.work, "run")
        ck, p = self.launch(d, port)
        self.checkpoint(port, ck)
        time.sleep(0.3)
        self.checkpoint(port, ck)
        time.sleep(self.rng.uniform(0.0, 1.0))
        kill_all(p, port)
        gen = os.path.join(ck, "ckpt-2")
        blks = blocks_of(gen)
        if not blks:
            fail("%s holds no blocks: the 48 MiB file was not saved by blocks" % gen)
        victim = os.path.join(gen, blks[self.rng.randrange(len(blks))])
        images = sorted(glob.glob(os.path.join(gen, "*.rimg")))
        holders = []  # images whose files section lists blocks: inspect checks them all
        for img in images:
            r = subprocess.run([self.revive, "inspect", "--json", img], capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                fail("revive inspect of the intact image %s exited %d:\n%s%s" % (img, r.returncode, r.stdout[-800:], r.stderr))
            js = json.loads(r.stdout)
            if any(f.get("blocks", 0) > 0 for f in js["files"]):
                holders.append(img)
        if not holders:
            fail("revive inspect lists no file stored by blocks in any image of %s" % gen)
        with open(victim, "r+b") as f:  # one byte flipped (the store's link is the same inode)
            f.seek(12345)
            b = f.read(1)
            f.seek(12345)
            f.write(bytes([b[0] ^ 0x40]))
        out = self.inspect_bad(holders, "is damaged", victim)
        print("inspect names the damaged block: %s" % [l for l in out.splitlines() if "is damaged" in l][0][:300])
        rr = self.restart(d, port, ck, must_work=False)
        if rr.returncode == 0 or "is damaged" not in rr.stderr or victim not in rr.stderr or not NAMES_FILE.search(rr.stderr):
            fail("restart with a damaged block exited %d without naming it (%s):\n%s" % (rr.returncode, victim, rr.stderr[-1500:]))
        print("damaged block refused: %s" % [l for l in rr.stderr.splitlines() if "is damaged" in l][0][:300])
        with open(victim, "r+b") as f:
            f.seek(12345)
            f.write(b)
        # Each restart on a port of its own: the refused restart's coordinator may still be closing.
        port = free_port(self.rng)
        gone = os.path.join(gen, blks[0])
        aside = os.path.join(d, "aside.blk")
        os.rename(gone, aside)
        os.unlink(os.path.join(ck, ".revive-blocks", blks[0][len(".blk-"):]))
        self.inspect_bad(holders, "is missing", gone)
        rr = self.restart(d, port, ck, must_work=False)
        if rr.returncode == 0 or "is missing" not in rr.stderr or gone not in rr.stderr or not NAMES_FILE.search(rr.stderr):
            fail("restart with a missing block exited %d without naming it (%s):\n%s" % (rr.returncode, gone, rr.stderr[-1500:]))
        print("missing block refused: %s" % [l for l in rr.stderr.splitlines() if "is missing" in l][0][:300])
        os.rename(aside, gone)
        port = free_port(self.rng)
        # The killed run's output after the checkpoint is in stdout; the fd plugin puts the offset back.
        self.restart(d, port, ck)
        self.compare(d, "damaged (blocks put back)")
        print("damaged: refused twice, then restart ok with the blocks back, result identical")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--revive", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=3, help="crash: kill rounds")
    ap.add_argument("case", choices=["bigfile", "crash", "damaged", "reflink", "mapped"])
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print("seed %d" % seed, flush=True)
    t = T(a, rng)
    t.reference()
    port = free_port(rng)
    getattr(t, a.case)(port)
    shutil.rmtree(t.work, ignore_errors=True)


if __name__ == "__main__":
    main()
