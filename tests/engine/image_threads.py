#!/usr/bin/env python3
"""Checks an image's thread list: IMAGE must list exactly N threads (the program's and the engine's
checkpoint thread; never the engine's compression workers), one of them marked as the checkpoint
thread. Usage: image_threads.py IMAGE N"""
import struct, sys

THREAD_RECORD = 112  # image::ThreadRecord (src/image/format.h)
ENTRY = 56           # image::SectionEntry

def main():
    path, want = sys.argv[1], int(sys.argv[2])
    data = open(path, "rb").read()
    dir_off, dir_count = struct.unpack_from("<QQ", data, len(data) - 64 + 8)  # Trailer: magic, dir_offset, count
    for i in range(dir_count):
        name, kind, ver, off, length, _ = struct.unpack_from("<24sIIQQQ", data, dir_off + i * ENTRY)
        if name.rstrip(b"\0") != b"threads":
            continue
        n = length // THREAD_RECORD
        ckpt = sum(struct.unpack_from("<I", data, off + k * THREAD_RECORD + 108)[0] for k in range(n))
        if n != want or ckpt != 1:
            sys.exit("FAIL: %s lists %d threads (%d checkpoint threads), want %d (1)" % (path, n, ckpt, want))
        print("OK: %s lists %d threads" % (path, n))
        return
    sys.exit("FAIL: %s has no threads section" % path)

if __name__ == "__main__":
    main()
