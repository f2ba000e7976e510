#!/usr/bin/env python3
"""Checks an image's thread list: IMAGE must list N threads (the program's: the engine has no thread of
its own, one program thread served the checkpoint; never the engine's compression workers), or N+1 when
the program may have a short-lived thread of its own at that moment (--extra), exactly one marked as the
checkpoint thread (the one that served it), and every thread with
its own TLS: the compression workers share the checkpoint thread's %fs, so one of them would show up
as a second record with its fs_base. Usage: image_threads.py IMAGE N [--extra]"""
import struct, sys

THREAD_RECORD = 112  # image::ThreadRecord (src/image/format.h)
ENTRY = 56           # image::SectionEntry

def main():
    path, want = sys.argv[1], int(sys.argv[2])
    extra = "--extra" in sys.argv[3:]
    data = open(path, "rb").read()
    dir_off, dir_count = struct.unpack_from("<QQ", data, len(data) - 64 + 8)  # Trailer: magic, dir_offset, count
    for i in range(dir_count):
        name, kind, ver, off, length, _ = struct.unpack_from("<24sIIQQQ", data, dir_off + i * ENTRY)
        if name.rstrip(b"\0") != b"threads":
            continue
        n = length // THREAD_RECORD
        ckpt = sum(struct.unpack_from("<I", data, off + k * THREAD_RECORD + 108)[0] for k in range(n))
        fs = [struct.unpack_from("<Q", data, off + k * THREAD_RECORD + 8)[0] for k in range(n)]
        if not (n == want or (extra and n == want + 1)) or ckpt != 1:
            sys.exit("FAIL: %s lists %d threads (%d checkpoint threads), want %d%s (1)"
                     % (path, n, ckpt, want, " or %d" % (want + 1) if extra else ""))
        if len(set(fs)) != n:
            sys.exit("FAIL: %s: two thread records share a TLS base (fs_base %s)" % (path, fs))
        print("OK: %s lists %d threads" % (path, n))
        return
    sys.exit("FAIL: %s has no threads section" % path)

if __name__ == "__main__":
    main()
