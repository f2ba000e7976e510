#!/usr/bin/env python3
"""Multi-level storage of the application-level library (issue 9): what a program pays per checkpoint and
what a restart pays per level, against the physical limits of the same bytes, measured in one run.

  bench.py ML_APP MPIEXEC WORKDIR [--reps 5] [--big 4194304] [--steps 20] [--every 2]

4 ranks, one per simulated host (REVIVE_HOST=h0..h3), one XOR group of 4. Node-local storage in
/dev/shm (tmpfs), the global level (REVIVE_CP_PATH) in WORKDIR (put it on the disk). Every figure is the
median of --reps runs, the configurations interleaved so that the machine's noise hits them alike.

--pfs-mbps N (root): the global level goes instead to an ext4 file system on a loop device whose reads and
writes the kernel throttles to N MB/s in all (cgroup v1 blkio.throttle on the root group, which also
covers the page cache's writeback): a stand-in for a parallel file system, whose per-node share is many
times slower than node memory. On this VM the plain disk writes with fsync at about memory-copy speed (the
host caches it), which no cluster's PFS does; the raw limit below is measured on the throttled device too.
"""
import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("app")
ap.add_argument("mpiexec")
ap.add_argument("work")
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--big", type=int, default=4194304)
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--every", type=int, default=2)
ap.add_argument("--pfs-mbps", type=float, default=0)
a = ap.parse_args()

NP = 4
WORK = os.path.abspath(a.work)
GLOB = os.path.join(WORK, "global")
PFS = None  # (loop device, mount point, "major:minor") of the throttled stand-in


def pfs_setup(mbps):
    """A loop-mounted ext4 under WORK throttled to MBPS MB/s (reads and writes); GLOB moves onto it."""
    global GLOB, PFS
    os.makedirs(WORK, exist_ok=True)
    img, mnt = os.path.join(WORK, "pfs.img"), os.path.join(WORK, "pfs")
    subprocess.run(["truncate", "-s", "8G", img], check=True)
    dev = subprocess.run(["losetup", "-f", "--show", img], check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
    os.makedirs(mnt, exist_ok=True)
    subprocess.run(["mount", dev, mnt], check=True)
    st = os.stat(dev)
    mm = "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
    PFS = (dev, mnt, mm)
    bps = int(mbps * 1e6)
    for f in ("write_bps_device", "read_bps_device"):
        with open("/sys/fs/cgroup/blkio/blkio.throttle." + f, "w") as fh:
            fh.write("%s %d\n" % (mm, bps))
    GLOB = os.path.join(mnt, "global")


def pfs_teardown():
    if not PFS:
        return
    dev, mnt, mm = PFS
    for f in ("write_bps_device", "read_bps_device"):
        try:
            with open("/sys/fs/cgroup/blkio/blkio.throttle." + f, "w") as fh:
                fh.write("%s 0\n" % mm)
        except OSError:
            pass
    subprocess.run(["umount", mnt], check=False)
    subprocess.run(["losetup", "-d", dev], check=False)
    try:
        os.unlink(os.path.join(WORK, "pfs.img"))
    except OSError:
        pass


if a.pfs_mbps > 0:
    import atexit
    pfs_setup(a.pfs_mbps)
    atexit.register(pfs_teardown)
LOCAL = "/dev/shm/revive-mlbench-%d" % os.getpid()
WRAP = 'r=${OMPI_COMM_WORLD_RANK:-$PMI_RANK}; REVIVE_HOST=h$((r / 1)) exec "$@"'


def can_drop():
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return True
    except OSError:
        return False


DROP = can_drop()


def drop(files):
    """Evicts FILES from the page cache: drop_caches when permitted, else dd iflag=nocache per file."""
    os.sync()
    if DROP:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
    else:
        for p in files:
            subprocess.run(["dd", "if=" + p, "iflag=nocache", "count=0"], stderr=subprocess.DEVNULL, check=False)


def clean():
    shutil.rmtree(GLOB, ignore_errors=True)
    shutil.rmtree(LOCAL, ignore_errors=True)
    os.makedirs(GLOB)
    os.makedirs(LOCAL)


def run(levels, steps, every, die=None, expect=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("REVIVE_")}
    e.update({"REVIVE_CP_PATH": GLOB, "REVIVE_LOCAL_PATH": LOCAL, "REVIVE_GROUP_SIZE": "4",
              "REVIVE_PARITY": "1", "ML_APP_BIG": str(a.big), "OMPI_ALLOW_RUN_AS_ROOT": "1",
              "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    if levels:
        e["REVIVE_LEVELS"] = levels
    cmd = [a.mpiexec, "-n", str(NP), "sh", "-c", WRAP, "sh", a.app, str(steps), str(every)]
    if die is not None:
        cmd.append(str(die))
    t = time.perf_counter()
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=600)
    dt = time.perf_counter() - t
    if die is None and p.returncode != 0:
        sys.exit("ml_app failed (%s):\n%s" % (" ".join(cmd), p.stderr))
    if expect is not None and ("restarted at step %d" % expect) not in p.stderr:
        sys.exit("expected a restart at step %d (levels %r):\n%s" % (expect, levels, p.stderr))
    return dt


def newest(root):
    """Files of the newest version under ROOT (directories v-N)."""
    vs = {}
    for d in glob.glob(os.path.join(root, "**", "v-*"), recursive=True):
        if os.path.isdir(d):
            try:
                vs.setdefault(int(os.path.basename(d)[2:]), []).append(d)
            except ValueError:
                pass
    if not vs:
        return []
    out = []
    for d in vs[max(vs)]:
        for r, _, fs in os.walk(d):
            out += [os.path.join(r, f) for f in fs]
    return out


def raw_read(files):
    """Reads FILES in NP parallel cat processes (as NP ranks would), seconds."""
    parts = [files[i::NP] for i in range(NP)]
    t = time.perf_counter()
    ps = [subprocess.Popen(["sh", "-c", 'cat "$@" > /dev/null', "sh"] + p) for p in parts if p]
    for p in ps:
        p.wait()
    return time.perf_counter() - t


def raw_write(root, mib, fsync):
    """NP parallel dd of MIB MiB each into ROOT (conv=fsync when FSYNC), seconds."""
    os.makedirs(root, exist_ok=True)
    t = time.perf_counter()
    ps = [subprocess.Popen(["dd", "if=/dev/zero", "of=%s/raw%d" % (root, r), "bs=1M", "count=%d" % mib]
                           + (["conv=fsync"] if fsync else []), stderr=subprocess.DEVNULL) for r in range(NP)]
    for p in ps:
        p.wait()
    dt = time.perf_counter() - t
    shutil.rmtree(root, ignore_errors=True)
    return dt


def size(files):
    return sum(os.path.getsize(f) for f in files)


def med(xs):
    return statistics.median(xs)


mib = (a.big * 8 + (1 << 20) - 1) >> 20
ncp = len([s for s in range(0, a.steps + 1) if a.every > 0 and s % a.every == 0])
print("### multilevel bench: %d ranks on 4 simulated hosts, %d MiB per rank, %d steps, checkpoint every %d "
      "(%d checkpoints), reps %d, load %s, page cache drop: %s" %
      (NP, mib, a.steps, a.every, ncp, a.reps, open("/proc/loadavg").read().split()[:3],
       "echo 1 > /proc/sys/vm/drop_caches" if DROP else "dd iflag=nocache count=0 per file"))
print("local %s (tmpfs), global %s%s" % (LOCAL, GLOB, " (ext4 on %s, throttled to %.0f MB/s: the PFS stand-in)"
                                          % (PFS[0], a.pfs_mbps) if PFS else " (the disk)"))

# 1. Application overhead.
CONF = [("native", None, 0), ("L4 (REVIVE_LEVELS unset)", None, a.every), ("L1+L3", "L1+L3", a.every),
        ("L1+L3,L4@5", "L1+L3,L4@5", a.every)]
wall = {c[0]: [] for c in CONF}
wr_disk, wr_shm = [], []
for rep in range(a.reps):
    for name, lv, ev in CONF:
        clean()
        wall[name].append(run(lv, a.steps, ev))
    clean()
    wr_disk.append(raw_write(os.path.join(GLOB, "raw"), mib, True))
    wr_shm.append(raw_write(os.path.join(LOCAL, "raw"), mib, False))
nat = med(wall["native"])
lim4 = med(wr_disk) * ncp
lim1 = med(wr_shm) * ncp
print("\n## 1. application overhead (wall of the whole job, median of %d)" % a.reps)
print("raw write+fsync of %d x %d MiB to the global level: %.3f s per checkpoint, x%d = %.3f s (L4 limit)" %
      (NP, mib, med(wr_disk), ncp, lim4))
print("raw write of %d x %d MiB to /dev/shm (dd, memcpy speed): %.3f s per checkpoint, x%d = %.3f s (L1 limit)" %
      (NP, mib, med(wr_shm), ncp, lim1))
ov = {}
for name, _, _ in CONF:
    w = med(wall[name])
    ov[name] = w - nat
    extra = ""
    if name.startswith("L4"):
        extra = "  ratio to raw disk limit %.2f" % (ov[name] / lim4)
    elif name != "native":
        extra = "  ratio to /dev/shm limit %.2f" % (ov[name] / lim1)
    print("%-26s wall %.3f s  (runs %s)  overhead %.3f s%s" %
          (name, w, " ".join("%.2f" % x for x in wall[name]), ov[name], extra))
o4 = ov["L4 (REVIVE_LEVELS unset)"]
print("overhead(L1+L3)/overhead(L4) = %.3f (goal <= 0.2)" % (ov["L1+L3"] / o4 if o4 > 0 else float("nan")))
print("overhead(L1+L3,L4@5)/overhead(L4) = %.3f" % (ov["L1+L3,L4@5"] / o4 if o4 > 0 else float("nan")))

# 2. Restart time per level. The killed run checkpoints steps 0, EVERY, 2*EVERY and dies after the last;
# the restart resumes at DIE+1 > STEPS, so it reads the version and exits.
DIE = 2 * a.every
RS = [("L1 (all pieces local)", "L1+L3", None), ("L1, host h1 wiped (XOR rebuild)", "L1+L3", "h1"),
      ("L4 (global, cold cache)", None, None)]
start = {n: [] for n, _, _ in RS}
rest = {n: [] for n, _, _ in RS}
raw = {n: [] for n, _, _ in RS}
byts = {}
for rep in range(a.reps):
    for name, lv, wipe in RS:
        clean()
        start[name].append(run(lv, -1, 0))  # the same job, no checkpoint, nothing to compute
        clean()
        run(lv, DIE, a.every, die=DIE)
        if wipe:
            shutil.rmtree(os.path.join(LOCAL, wipe))
        files = newest(GLOB if lv is None else LOCAL)
        byts[name] = size(files)
        drop(files)
        raw[name].append(raw_read(files))
        drop(files)
        rest[name].append(run(lv, DIE, a.every, expect=DIE + 1))
print("\n## 2. restart (job wall minus the same job's no-checkpoint startup, median of %d)" % a.reps)
for name, _, _ in RS:
    s, r, w = med(start[name]), med(rest[name]), med(raw[name])
    print("%-32s startup %.3f s  restart %.3f s  read %.3f s  raw cat of the version's %.1f MiB %.3f s "
          "(%.0f MB/s)  ratio %.2f" % (name, s, r, r - s, byts[name] / 2**20, w, byts[name] / w / 1e6,
                                       (r - s) / w if w > 0 else float("nan")))
shutil.rmtree(LOCAL, ignore_errors=True)
shutil.rmtree(GLOB, ignore_errors=True)
