#!/usr/bin/env bash
# fork_durable_test.sh REVIVE: with --fork a process goes on as soon as its writer child exists, and the
# generation is published only once every image is durable. A writer that fails (the checkpoint
# directory is a small tmpfs that gets full) fails its generation with a message naming the process and
# phase; the previous generation stays complete, and a restart from it after SIGKILL finishes with
# output identical to an uninterrupted run. Needs root (mount).
set -euo pipefail
rv=$(realpath "$1")
[ "$(id -u)" = 0 ] || { echo "needs root (mount -t tmpfs)"; exit 1; }
source "$(dirname "$0")/lib.sh"
cleanup_patterns=("$tmp/count.sh")
extra_cleanup() {  # before lib.sh removes $tmp: the tmpfs inside it
  sleep 0.2
  umount "$tmp/small" 2>/dev/null
}
mkdir "$tmp/small"
mount -t tmpfs -o size=24m tmpfs "$tmp/small"
cat >"$tmp/count.sh" <<'PROG'
#!/bin/sh
i=0; while [ $i -lt 80 ]; do echo "line $i"; i=$((i+1)); sleep 0.05; done
PROG
chmod +x "$tmp/count.sh"
sh "$tmp/count.sh" >"$tmp/ref.out"
ck=$tmp/small/ck
# Node-local files: none. As root in a CI clone, the default walk of /tmp saves every file other tests
# created there since the launch into the image, which then does not fit the 24 MB file system.
export REVIVE_LOCAL_DIRS=
"$rv" launch --fork --port "$port" --ckpt-dir "$ck" -- "$tmp/count.sh" >"$tmp/run.out" 2>"$tmp/launch.err" &
launcher=$!
sleep 0.8
"$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"$tmp/ck1.out" 2>&1 || { cat "$tmp/ck1.out" "$tmp/launch.err"; fail "first checkpoint"; }
[ -f "$ck/ckpt-1/MANIFEST.json" ] || fail "generation 1 has no manifest"
# Fill the file system: the next forked writer fails.
head -c 30M /dev/zero >"$tmp/small/fill" 2>/dev/null || true
if "$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"$tmp/ck2.out" 2>&1; then fail "checkpoint on a full disk succeeded"; fi
grep -q "generation 2 failed" "$tmp/ck2.out" || { cat "$tmp/ck2.out"; fail "no generation failure message"; }
grep -Eq "process upid [0-9]+ \([^,]+, pid [0-9]+" "$tmp/ck2.out" || { cat "$tmp/ck2.out"; fail "the failure does not name the process"; }
grep -q "durable" "$tmp/ck2.out" || { cat "$tmp/ck2.out"; fail "the failure does not name the phase"; }
[ ! -f "$ck/ckpt-2/MANIFEST.json" ] || fail "failed generation 2 has a manifest"
rm -f "$tmp/small/fill"
# The program went on meanwhile; kill everything and restart from generation 1.
pkill -9 -f "$tmp/count.sh" || true
kill -9 "$launcher" 2>/dev/null || true
wait "$launcher" 2>/dev/null || true
pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
sleep 0.3
"$rv" restart --port "$port" "$ck" 2>"$tmp/restart.err" || { cat "$tmp/restart.err"; fail "restart"; }
cmp "$tmp/ref.out" "$tmp/run.out" || { diff "$tmp/ref.out" "$tmp/run.out" | head; fail "output differs after restart"; }
echo "fork durable test passed"
