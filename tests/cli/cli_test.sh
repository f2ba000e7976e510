#!/usr/bin/env bash
# End-to-end tests of the `revive` command with stand-ins for the engine (fake_proc, fake_restart).
# The restart sections restore real images (made with the real engine: revive restart reads them) with the
# stand-in restorer, which checks the coordinator's side of a restart.
# usage: cli_test.sh REVIVE FAKE_PROC FAKE_RESTART FAKE_INJECT_SO STATIC_PROG INJECT_SO WORKER
set -u
REVIVE=$1 FAKE=$2 FAKE_RESTART=$3 FAKE_INJECT=$4 STATIC=$5 INJECT=$6 WORKER=$7
T=$(mktemp -d /tmp/revive-cli-test.XXXXXX)
# Two adjacent free ports (root and sub-coordinator in the tree test).
PORT=$(python3 -c 'import random, socket
for _ in range(200):
    p = random.randrange(20000, 40000)
    try:
        for q in (p, p + 1):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
        print(p); break
    except OSError:
        pass')
failures=0
cleanup() {
  # Stop any coordinator we started (its pid comes from `revive status`).
  for d in "$T"/ck*; do
    pid=$("$REVIVE" status --port "$PORT" --ckpt-dir "$d" 2>/dev/null | sed -n 's/^coordinator: pid \([0-9]*\).*/\1/p')
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
  done
  rm -rf "$T"
}
trap cleanup EXIT
unset REVIVE_PORT REVIVE_CKPT_DIR REVIVE_SECRET_FILE REVIVE_COORD_HOST
export REVIVE_LOG=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# expect_rc WANT CMD...: runs CMD, stdout->$T/out, stderr->$T/err
expect_rc() {
  local want=$1; shift
  "$@" >"$T/out" 2>"$T/err"; local rc=$?
  [ "$rc" -eq "$want" ] || fail "$* exited $rc, want $want; stderr: $(cat "$T/err")"
}
expect_err() { grep -q -- "$1" "$T/err" || fail "stderr lacks '$1': $(cat "$T/err")"; }
expect_out() { grep -q -- "$1" "$T/out" || fail "stdout lacks '$1': $(cat "$T/out")"; }
wait_for() {  # wait_for SECONDS CMD...: until CMD succeeds
  local n=$(( $1 * 10 )); shift
  for ((i = 0; i < n; i++)); do "$@" && return 0; sleep 0.1; done
  return 1
}
no_coordinator() { ! "$REVIVE" status --port "$PORT" --ckpt-dir "$1" >/dev/null 2>&1; }
stop_coordinator() {  # stop_coordinator DIR: SIGTERM the coordinator of DIR on $PORT, wait until gone
  local pid
  pid=$("$REVIVE" status --port "$PORT" --ckpt-dir "$1" 2>/dev/null | sed -n 's/^coordinator: pid \([0-9]*\).*/\1/p')
  [ -n "$pid" ] && kill "$pid"
  wait_for 10 no_coordinator "$1" || fail "coordinator of $1 did not stop"
}

echo "== help"
expect_rc 0 "$REVIVE" --help
for c in launch checkpoint restart status kill inspect coordinator; do
  expect_out "$c"
  "$REVIVE" "$c" --help >/dev/null 2>&1 || fail "revive $c --help"
done
expect_rc 0 "$REVIVE" launch --help
expect_out "--ckpt-dir"; expect_out "--interval"; expect_out "--no-compress"; expect_out "--fork"
"$REVIVE" no-such-command >/dev/null 2>&1 && fail "unknown subcommand accepted"

echo "== launch refuses what it cannot run"
expect_rc 2 "$REVIVE" launch --port "$PORT" --ckpt-dir "$T/ck0" -- "$STATIC"
expect_err "statically linked"
expect_rc 127 "$REVIVE" launch --port "$PORT" --ckpt-dir "$T/ck0" -- no-such-program-xyz
expect_err "no-such-program-xyz: command not found"
printf 'garbage\n' > "$T/notelf" && chmod +x "$T/notelf"
expect_rc 2 "$REVIVE" launch --port "$PORT" --ckpt-dir "$T/ck0" -- "$T/notelf"
expect_err "notelf: not an ELF executable"
REVIVE_PORT=notaport expect_rc 2 "$REVIVE" launch -- /bin/true
expect_err "REVIVE_PORT=notaport"
REVIVE_INJECT_LIB=/nonexistent.so expect_rc 2 "$REVIVE" launch --port "$PORT" --ckpt-dir "$T/ck0" -- /bin/true
expect_err "REVIVE_INJECT_LIB=/nonexistent.so"

echo "== restart: missing, empty, incomplete directories"
expect_rc 2 "$REVIVE" restart --port "$PORT" "$T/missing"
expect_err "$T/missing: No such file or directory"
mkdir -p "$T/empty"
expect_rc 2 "$REVIVE" restart --port "$PORT" "$T/empty"
expect_err "no complete checkpoint"
mkdir -p "$T/incomplete/ckpt-1" && echo x > "$T/incomplete/ckpt-1/a-1.rimg"
expect_rc 2 "$REVIVE" restart --port "$PORT" "$T/incomplete"
expect_err "no complete checkpoint"
mkdir -p "$T/badmf/ckpt-2" && echo '{"generation": 2' > "$T/badmf/ckpt-2/MANIFEST.json"
expect_rc 2 "$REVIVE" restart --port "$PORT" "$T/badmf"
expect_err "MANIFEST.json: not valid JSON"
mkdir -p "$T/lost/ckpt-1"
echo '{"generation":1,"processes":[{"upid":1,"pid":5,"host":"h","prog":"p","image":"p-1.rimg","bytes":9}]}' \
  > "$T/lost/ckpt-1/MANIFEST.json"
expect_rc 2 "$REVIVE" restart --port "$PORT" "$T/lost"
expect_err "p-1.rimg is missing"

echo "== commands without a coordinator"
mkdir -p "$T/ck0"
for c in checkpoint status kill; do
  # checkpoint: 75 = not now, ask again (the checkpoint-signal handler does); the others: 2
  expect_rc "$([ $c = checkpoint ] && echo 75 || echo 2)" "$REVIVE" "$c" --port "$PORT" --ckpt-dir "$T/ck0"
  expect_err "no coordinator is listening on 127.0.0.1:$PORT"
done

echo "== launch, checkpoint, status, kill"
export REVIVE_INJECT_LIB=$FAKE_INJECT
CK=$T/ck1
"$REVIVE" launch --port "$PORT" --ckpt-dir "$CK" --no-compress -- "$FAKE" >"$T/launch.out" 2>"$T/launch.err" &
LPID=$!
wait_for 10 grep -q '^upid=' "$T/launch.out" || fail "launched program never connected: $(cat "$T/launch.err")"
grep -q "^env LD_PRELOAD=$(readlink -f "$FAKE_INJECT")\$" "$T/launch.out" || fail "LD_PRELOAD: $(cat "$T/launch.out")"
grep -q "^env REVIVE_CKPT_DIR=$CK\$" "$T/launch.out" || fail "REVIVE_CKPT_DIR: $(cat "$T/launch.out")"
grep -q "^env REVIVE_COMPRESS=0\$" "$T/launch.out" || fail "REVIVE_COMPRESS: $(cat "$T/launch.out")"
[ "$(stat -c %a "$CK/.revive-secret")" = 600 ] || fail "secret not 0600"
expect_rc 0 "$REVIVE" checkpoint --port "$PORT" --ckpt-dir "$CK"
[ "$(cat "$T/out")" = "$CK/ckpt-1" ] || fail "checkpoint printed '$(cat "$T/out")'"
grep -q '"prog": "fake_proc"' "$CK/ckpt-1/MANIFEST.json" || fail "manifest: $(cat "$CK/ckpt-1/MANIFEST.json")"
expect_rc 0 "$REVIVE" checkpoint --port "$PORT" --ckpt-dir "$CK"
[ "$(cat "$T/out")" = "$CK/ckpt-2" ] || fail "second checkpoint printed '$(cat "$T/out")'"
expect_rc 0 "$REVIVE" status --port "$PORT" --ckpt-dir "$CK"
expect_out "processes:   1"; expect_out "fake_proc"; expect_out "generation:  2"
# Another computation's secret is refused by this coordinator.
mkdir -p "$T/ck-other" && printf 'another computation' > "$T/ck-other/.revive-secret"
chmod 600 "$T/ck-other/.revive-secret"
expect_rc 2 "$REVIVE" status --port "$PORT" --ckpt-dir "$T/ck-other"
expect_err "authentication failed"
# Restoring a process that is still running would make two of it.
REVIVE_RESTART_BIN=$FAKE_RESTART expect_rc 2 "$REVIVE" restart --port "$PORT" "$CK"
expect_err "process upid 1 is still running"
REVIVE_RESTART_BIN=$FAKE_RESTART expect_rc 2 "$REVIVE" restart --port "$PORT" "$CK/ckpt-1/fake_proc-1.rimg"
expect_err "process upid 1 is still running"
expect_rc 0 "$REVIVE" kill --port "$PORT" --ckpt-dir "$CK"
wait "$LPID"; rc=$?
[ "$rc" -eq 3 ] || fail "launch exit status $rc, want the program's 3"
wait_for 10 no_coordinator "$CK" || fail "coordinator did not exit after its last process (--exit-on-last)"

echo "== three launches racing to start the same coordinator join one computation quietly"
for i in 1 2 3; do
  "$REVIVE" launch --port "$PORT" --ckpt-dir "$T/ck6" -- "$FAKE" --exit-after 1 >"$T/race$i.out" 2>"$T/race$i.err" &
done
wait
for i in 1 2 3; do
  [ -s "$T/race$i.err" ] && fail "racing launch $i complained: $(cat "$T/race$i.err")"
done
[ "$(cat "$T"/race*.out | grep '^upid=' | sort -u | wc -l)" -eq 3 ] || fail "racing launches: $(cat "$T"/race*.out)"
wait_for 10 no_coordinator "$T/ck6" || fail "the shared coordinator did not exit after the last of three"

echo "== restart (newest generation, then one image) with the stand-in restorer"
CKR=$T/ckr
REVIVE_INJECT_LIB=$INJECT "$REVIVE" launch --port "$PORT" --ckpt-dir "$CKR" -- "$WORKER" 2000 1 >"$T/worker.out" 2>&1 &
WPID=$!
wait_for 20 bash -c "'$REVIVE' status --port $PORT --ckpt-dir '$CKR' 2>/dev/null | grep -q 'processes:   1'" ||
  fail "the real program never connected"
expect_rc 0 "$REVIVE" checkpoint --port "$PORT" --ckpt-dir "$CKR"
[ "$(cat "$T/out")" = "$CKR/ckpt-1" ] || fail "checkpoint of the real program printed '$(cat "$T/out")'"
kill -KILL "$WPID"; wait "$WPID" 2>/dev/null
wait_for 10 no_coordinator "$CKR" || fail "launch's coordinator did not exit after its program was killed"
export REVIVE_RESTART_BIN=$FAKE_RESTART
expect_rc 7 "$REVIVE" restart --port "$PORT" "$CKR"
expect_out "restored upid=1 phases=reconnect,refill,resume"
wait_for 10 no_coordinator "$CKR" || fail "restart's coordinator did not exit"
expect_rc 7 "$REVIVE" restart --port "$PORT" "$CKR/ckpt-1/$(basename "$WORKER")-1.rimg"
expect_out "restored upid=1 phases=reconnect,refill,resume"
wait_for 10 no_coordinator "$CKR" || fail "restart's coordinator did not exit"

echo "== restart: a restored program killed by a signal gives 128+N"
printf '#!/bin/sh\nkill -KILL $$\n' > "$T/die-restart" && chmod +x "$T/die-restart"
REVIVE_RESTART_BIN=$T/die-restart expect_rc 137 "$REVIVE" restart --port "$PORT" "$CKR"
stop_coordinator "$CKR"  # nobody connected to it: it would only leave after its idle limit

echo "== helpers found in the installed layout <prefix>/lib/revive"
mkdir -p "$T/prefix/bin" "$T/prefix/lib/revive"
cp "$REVIVE" "$T/prefix/bin/revive"
cp "$FAKE_INJECT" "$T/prefix/lib/revive/librevive_inject.so"
(unset REVIVE_INJECT_LIB; "$T/prefix/bin/revive" launch --port "$PORT" --ckpt-dir "$T/ck5" -- "$FAKE" --exit-after 0 \
   >"$T/out" 2>"$T/err")
expect_out "^env LD_PRELOAD=$T/prefix/lib/revive/librevive_inject.so\$"
rm "$T/prefix/lib/revive/librevive_inject.so"
(unset REVIVE_INJECT_LIB; "$T/prefix/bin/revive" launch --port "$PORT" --ckpt-dir "$T/ck5" -- "$FAKE" >"$T/out" 2>"$T/err")
expect_err "librevive_inject.so not found (looked at $T/prefix/bin/../inject/librevive_inject.so, $T/prefix/bin/../lib/revive/librevive_inject.so)"
wait_for 10 no_coordinator "$T/ck5" || fail "coordinator of the installed-layout launch did not exit"

echo "== coordinator --daemon reports a port it cannot bind"
"$REVIVE" coordinator --port "$PORT" --ckpt-dir "$T/ck2" >"$T/fg.out" 2>&1 &
CPID=$!
wait_for 10 "$REVIVE" status --port "$PORT" --ckpt-dir "$T/ck2" >/dev/null 2>&1 || fail "foreground coordinator"
expect_rc 1 "$REVIVE" coordinator --daemon --port "$PORT" --ckpt-dir "$T/ck3"
expect_err "bind 127.0.0.1:$PORT: Address already in use"
kill "$CPID"; wait "$CPID"; rc=$?
[ "$rc" -eq 0 ] || fail "coordinator exit status after SIGTERM: $rc"

echo "== two-level tree: a program behind a sub-coordinator"
CK=$T/ck4
SUBPORT=$((PORT + 1))
mkdir -p "$CK"
"$REVIVE" coordinator --port "$PORT" --ckpt-dir "$CK" >"$T/root.out" 2>&1 &
ROOT=$!
wait_for 10 "$REVIVE" status --port "$PORT" --ckpt-dir "$CK" >/dev/null 2>&1 || fail "root coordinator"
"$REVIVE" coordinator --parent "127.0.0.1:$PORT" --port "$SUBPORT" --ckpt-dir "$CK" >"$T/sub.out" 2>&1 &
SUB=$!
wait_for 10 "$REVIVE" status --port "$SUBPORT" --ckpt-dir "$CK" >/dev/null 2>&1 || fail "sub-coordinator: $(cat "$T/sub.out")"
"$REVIVE" launch --port "$SUBPORT" --ckpt-dir "$CK" -- "$FAKE" >"$T/launch4.out" 2>"$T/launch4.err" &
LPID=$!
wait_for 10 grep -q '^upid=' "$T/launch4.out" || fail "program behind the sub never connected: $(cat "$T/launch4.err")"
expect_rc 0 "$REVIVE" checkpoint --port "$PORT" --ckpt-dir "$CK"
[ "$(cat "$T/out")" = "$CK/ckpt-1" ] || fail "tree checkpoint printed '$(cat "$T/out")'"
grep -q '"prog": "fake_proc"' "$CK/ckpt-1/MANIFEST.json" || fail "tree manifest: $(cat "$CK/ckpt-1/MANIFEST.json")"
expect_rc 0 "$REVIVE" status --port "$PORT" --ckpt-dir "$CK"
expect_out "processes:   1"
expect_rc 0 "$REVIVE" kill --port "$PORT" --ckpt-dir "$CK"
wait "$LPID"; rc=$?
[ "$rc" -eq 3 ] || fail "program behind the sub: exit status $rc after kill, want 3"
kill "$ROOT"; wait "$ROOT"
wait_for 10 bash -c "! kill -0 $SUB 2>/dev/null" || fail "sub-coordinator outlived its root"
wait "$SUB" 2>/dev/null

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "all CLI tests passed"
