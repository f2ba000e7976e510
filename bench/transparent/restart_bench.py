#!/usr/bin/env python3
"""Cold restart of one process against a cold read of its image, same run, same file.

For each run: a program fills SIZE MB of heap (random data) and is checkpointed; the image is evicted
from the page cache (fsync + POSIX_FADV_DONTNEED, as after any reboot-free kill) before each of:
  raw buffered  read(2) of the image into fresh anonymous memory (8 MiB pieces)
  raw direct    the same with O_DIRECT (no page cache), never touching the bytes
  direct x3     O_DIRECT with three reads in flight (three threads, 8 MiB pieces), then one load per
                page: what revive-restart does since 2026-11-27, without its checksums
  direct+touch  the same as direct, then one load per page: on this VM the first CPU touch of a page a device wrote
                costs a host fault (~2 us), which the restored program pays anyway when it runs; the
                fastest of buffered, direct+touch and direct x3 is the physical limit
  restart       `revive-restart IMAGE` until the restored engine prints "revive: restored" (the next
                instruction is the program's), with REVIVE_RESTART_NO_DIRECT=1 (buffered) and without,
                and with REVIVE_RESTART_READERS=1 (one read in flight, the way before 2026-11-27).
Prints medians and ratios restart / limit (goal <= 1.2). Usage:
  restart_bench.py --build BUILD --dir DIR [--size 1024] [--runs 5]"""
import argparse, mmap, os, statistics, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # checkpoint_once, restart_once

def evict(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)

def raw_read(path, direct, touch=False):
    size = os.path.getsize(path)
    evict(path)
    buf = mmap.mmap(-1, (size + 4095) // 4096 * 4096)  # fresh, page aligned, not yet faulted in
    view = memoryview(buf)
    t0 = time.time()
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    off, piece = 0, 8 << 20
    while off < size:
        n = min(piece, size - off)
        if direct:
            n = (n + 4095) // 4096 * 4096  # O_DIRECT: whole blocks; the last read comes back short
        got = os.preadv(fd, [view[off:off + n]], off)
        if got <= 0:
            break
        off += got
    if touch:
        view[::4096].tobytes()  # one byte of every page, in C
    os.close(fd)
    t = time.time() - t0
    view.release()
    buf.close()
    return t

def raw_read_parallel(path, threads=3):
    import threading
    size = os.path.getsize(path)
    evict(path)
    buf = mmap.mmap(-1, (size + 4095) // 4096 * 4096)
    view = memoryview(buf)
    piece = 8 << 20
    nxt = [0]
    lock = threading.Lock()
    t0 = time.time()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)

    def work():
        while True:
            with lock:
                off = nxt[0]
                nxt[0] += piece
            if off >= size:
                return
            n = (min(piece, size - off) + 4095) // 4096 * 4096
            os.preadv(fd, [view[off:off + n]], off)  # releases the GIL: the reads overlap

    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    view[::4096].tobytes()
    os.close(fd)
    t = time.time() - t0
    view.release()
    buf.close()
    return t

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    a.inject = os.path.join(a.build, "src/inject/librevive_inject.so")
    a.restart = os.path.join(a.build, "src/restart/revive-restart")
    a.prog = os.path.join(a.build, "bench/transparent/bench_transparent_prog")
    os.makedirs(a.dir, exist_ok=True)
    rows = {k: [] for k in ("buffered", "direct", "direct+touch", "direct x3", "restart", "restart_1reader",
                            "restart_buffered")}
    for _ in range(a.runs):
        img, _, _, _ = bench.checkpoint_once(a, a.size, "random", {})
        rows["buffered"].append(raw_read(img, False))
        rows["direct"].append(raw_read(img, True))
        rows["direct+touch"].append(raw_read(img, True, True))
        rows["direct x3"].append(raw_read_parallel(img))
        evict(img)
        rows["restart"].append(bench.restart_once(a, img, False))
        evict(img)
        os.environ["REVIVE_RESTART_READERS"] = "1"
        rows["restart_1reader"].append(bench.restart_once(a, img, False))
        del os.environ["REVIVE_RESTART_READERS"]
        evict(img)
        os.environ["REVIVE_RESTART_NO_DIRECT"] = "1"
        rows["restart_buffered"].append(bench.restart_once(a, img, False))
        del os.environ["REVIVE_RESTART_NO_DIRECT"]
    med = {k: statistics.median(v) for k, v in rows.items()}
    limit = min(med["buffered"], med["direct+touch"], med["direct x3"])
    print("# %d MB image, medians of %d runs, image evicted before each read; times in s" % (a.size, a.runs))
    for k in rows:
        print("%-17s %7.3f   runs: %s" % (k, med[k], " ".join("%.3f" % x for x in rows[k])))
    print("restart / limit (fastest raw, touched)    %.2f" % (med["restart"] / limit))
    print("restart / raw direct read, untouched     %.2f" % (med["restart"] / med["direct"]))
    print("restart / raw buffered read              %.2f" % (med["restart"] / med["buffered"]))
    print("restart (one reader) / limit             %.2f" % (med["restart_1reader"] / limit))
    print("restart (buffered, old way) / limit      %.2f" % (med["restart_buffered"] / limit))
    print("restart / restart (one reader)           %.2f" % (med["restart"] / med["restart_1reader"]))

if __name__ == "__main__":
    main()
