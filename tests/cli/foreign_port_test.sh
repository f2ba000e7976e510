#!/usr/bin/env bash
# foreign_port_test.sh REVIVE: two computations on one node, neither given a port. The first holds the
# default port 7779; the second (`revive launch --ckpt-dir B`, no --port) must not fail on the first's
# secret: it moves to a free port and says so, two launches of B started together join ONE coordinator,
# `revive checkpoint --ckpt-dir B` finds it, and `revive restart B` (7779 still the other's) finishes with
# the output of an uninterrupted run. An explicit --port 7779 is never moved: it fails naming the reason.
# Runs in a network namespace of its own, so 7779 is free there whatever else runs on this machine.
set -euo pipefail
rv=$(realpath "$1")
if [ -z "${REVIVE_IN_NETNS:-}" ]; then
  if [ "$(id -u)" = 0 ]; then exec env REVIVE_IN_NETNS=1 unshare -n bash "$0" "$@"; fi
  exec env REVIVE_IN_NETNS=1 unshare -rn bash "$0" "$@"
fi
ip link set lo up
source "$(dirname "$0")/lib.sh"
cd "$tmp"
cleanup_patterns=("$tmp")
for k in 1 2; do printf 'i=0; while [ $i -lt 60 ]; do echo %s-$i; i=$((i+1)); sleep 0.05; done\n' $k > loop$k.sh; done
for k in 1 2; do for i in $(seq 0 59); do echo "$k-$i"; done > want$k.txt; done

# The other computation: default port, its own directory.
"$rv" launch --ckpt-dir "$tmp/A" -- sleep 120 > a.out 2> a.err &
for _ in $(seq 100); do [ -e "$tmp/A/.revive-coord-7779" ] && break; sleep 0.05; done
[ -e "$tmp/A/.revive-coord-7779" ] || { cat a.err; fail "the first computation's coordinator did not start on 7779"; }

# Two launches of B at once, no port.
"$rv" launch --ckpt-dir "$tmp/B" -- bash loop1.sh "$tmp" > out1.txt 2> b1.err &
l1=$!
"$rv" launch --ckpt-dir "$tmp/B" -- bash loop2.sh "$tmp" > out2.txt 2> b2.err &
l2=$!
for _ in $(seq 200); do [ "$(wc -l < out1.txt)" -ge 5 ] && [ "$(wc -l < out2.txt)" -ge 5 ] && break; sleep 0.05; done
grep -q "port 7779 serves another computation" b1.err b2.err || { cat b1.err b2.err; fail "no notice of the move"; }
records=$(ls -a "$tmp/B" | grep -c '^\.revive-coord-[0-9]*$' || true)
[ "$records" = 1 ] || { ls -a "$tmp/B"; cat b1.err b2.err; fail "$records coordinators serve B (want one)"; }
port_b=$(ls -a "$tmp/B" | sed -n 's/^\.revive-coord-\([0-9]*\)$/\1/p')
[ "$port_b" != 7779 ] || fail "B's coordinator is on 7779"

"$rv" checkpoint --ckpt-dir "$tmp/B" > ck.out 2>&1 || { cat ck.out b1.err b2.err; fail "checkpoint --ckpt-dir B (no port)"; }
gen=$(tail -1 ck.out)
n_img=$(ls "$gen"/bash-*.rimg 2>/dev/null | wc -l)
[ "$n_img" -ge 2 ] || { ls "$gen"; fail "the checkpoint holds $n_img bash images: both launches should be in it"; }
# The other computation was not touched: its coordinator still answers with its own processes.
"$rv" status --ckpt-dir "$tmp/A" > a.status 2>&1 || { cat a.status; fail "status of the other computation"; }

pkill -9 -f "loop[12].sh $tmp" || true
wait "$l1" "$l2" 2>/dev/null || true
b1=$(wc -l < out1.txt); b2=$(wc -l < out2.txt)
[ "$b1" -lt 60 ] && [ "$b2" -lt 60 ] || fail "the scripts ended before the kill; make them longer"
rc=0
timeout 60 "$rv" restart "$tmp/B" > rs.out 2>&1 || rc=$?
[ "$rc" = 0 ] || { cat rs.out; fail "revive restart B (no port) exited $rc"; }
grep -q "port 7779 serves another computation" rs.out || { cat rs.out; fail "restart: no notice of the move"; }
for k in 1 2; do
  diff "want$k.txt" "out$k.txt" > /dev/null || { diff "want$k.txt" "out$k.txt" | head; fail "loop$k output after restart differs"; }
done

# An explicit port is the user's word: not moved.
rc=0
"$rv" launch --port 7779 --ckpt-dir "$tmp/C" -- true > c.out 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q "authentication failed" c.out || { cat c.out; fail "an explicit --port 7779 should fail on the other's secret (rc $rc)"; }
"$rv" kill --ckpt-dir "$tmp/A" > /dev/null 2>&1 || true
echo "foreign port test passed (B on port $port_b; kills at lines $b1 and $b2)"
