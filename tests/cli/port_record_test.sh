#!/usr/bin/env bash
# port_record_test.sh REVIVE: `revive checkpoint/status/kill --port P` without --ckpt-dir work for the
# user who launched (the per-user record names the checkpoint directory, hence the secret), from any
# working directory; another user is refused with a message saying why; a coordinator killed with -9
# leaves a stale record that gives a clear message, not a hang; an unsafe record directory is not used.
set -euo pipefail
rv=$(realpath "$1")
source "$(dirname "$0")/lib.sh"
chmod 755 "$tmp"
export XDG_RUNTIME_DIR=$tmp/xdg  # this test's own record directory
mkdir -m 700 "$XDG_RUNTIME_DIR"
unset REVIVE_CKPT_DIR REVIVE_PORT
mkdir -p "$tmp/launchdir" "$tmp/elsewhere"
cd "$tmp/launchdir"
# The program outlives its coordinator (killed with -9 below): a marker in its command line lets the
# cleanup find it (it ran on for hours after the test before).
cleanup_patterns=("port-record-loop-$port")
"$rv" launch --port "$port" --ckpt-dir "$tmp/launchdir/ck" -- sh -c 'while :; do sleep 0.1; done' \
  "port-record-loop-$port" >/dev/null 2>"$tmp/launch.err" &
for _ in $(seq 50); do [ -f "$XDG_RUNTIME_DIR/revive/port-$port" ] && break; sleep 0.1; done
[ -f "$XDG_RUNTIME_DIR/revive/port-$port" ] || { cat "$tmp/launch.err"; fail "no record written in $XDG_RUNTIME_DIR/revive"; }
cd "$tmp/elsewhere"
"$rv" checkpoint --port "$port" >"$tmp/ck.out" 2>&1 || { cat "$tmp/ck.out"; fail "checkpoint --port from elsewhere"; }
grep -q "$tmp/launchdir/ck/ckpt-1" "$tmp/ck.out" || fail "checkpoint did not name $tmp/launchdir/ck/ckpt-1"
"$rv" status --port "$port" | grep "checkpoint directory $tmp/launchdir/ck" >/dev/null || fail "status --port"

# Another user: no record of theirs, and the secret is not readable for them.
if id nobody >/dev/null 2>&1 && command -v runuser >/dev/null; then
  if runuser -u nobody -- env XDG_RUNTIME_DIR= "$rv" checkpoint --port "$port" >"$tmp/other.out" 2>&1; then
    fail "another user could checkpoint"
  fi
  grep -q "no computation of this user was started on port $port" "$tmp/other.out" || { cat "$tmp/other.out"; fail "other user's message"; }
  if runuser -u nobody -- "$rv" kill --port "$port" --ckpt-dir "$tmp/launchdir/ck" >"$tmp/other2.out" 2>&1; then
    fail "another user could kill with --ckpt-dir"
  fi
  grep -qi "permission denied" "$tmp/other2.out" || { cat "$tmp/other2.out"; fail "other user's --ckpt-dir message"; }
fi

# An unsafe record directory (others may write it) is not trusted.
chmod 777 "$XDG_RUNTIME_DIR/revive"
if "$rv" status --port "$port" >"$tmp/unsafe.out" 2>&1; then fail "a record in a world-writable directory was used"; fi
grep -q "other users have access" "$tmp/unsafe.out" || { cat "$tmp/unsafe.out"; fail "unsafe directory message"; }
chmod 700 "$XDG_RUNTIME_DIR/revive"

# A coordinator killed with -9 leaves its record: a clear message, within seconds.
coord=$(pgrep -f "coordinator.*--port $port" | head -1)
[ -n "$coord" ] || fail "no coordinator process found"
kill -9 "$coord"
sleep 0.3
if timeout 20 "$rv" status --port "$port" >"$tmp/stale.out" 2>&1; then fail "status succeeded without a coordinator"; fi
[ $? -ne 124 ] || fail "status hung on a stale record"
grep -q "no coordinator is listening" "$tmp/stale.out" || { cat "$tmp/stale.out"; fail "stale message"; }
grep -q "coordinator is lost" "$tmp/stale.out" || { cat "$tmp/stale.out"; fail "lost coordinator not described"; }
echo "port record test passed"
