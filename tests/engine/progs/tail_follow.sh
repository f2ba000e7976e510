#!/bin/sh
# tail -f (coreutils, inotify) following a log a writer appends to, until the writer ends: the test of a
# program nobody here wrote holding an inotify instance across checkpoints and restarts. stdout is the
# log as tail printed it, then "end".
: > log
python3 -c '
import sys, time
with open(sys.argv[1], "a") as f:
    for i in range(int(sys.argv[2])):
        f.write("line %d\n" % i)
        f.flush()
        time.sleep(0.02)
' log "${1:-150}" &
W=$!
tail -n +1 -f --pid=$W log &
T=$!
wait $W
wait $T
echo end
