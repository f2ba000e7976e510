# Sourced by tests/cli/*_test.sh: a scratch directory ($tmp), a coordinator port below the ephemeral range
# ($port: no outgoing connection of another test takes it meanwhile), fail(), and a cleanup on exit that
# kills what runs on that port and the test's own programs (pkill -f patterns in cleanup_patterns), then
# runs the test's extra_cleanup function if it defines one; lines/wait_lines. KEEP=1 keeps $tmp. hold_port/release_port:
# another program listening on $lport (a second port, chosen from $port) for a restore to meet.
tmp=$(mktemp -d)
port=$((20000 + RANDOM % 12000))
cleanup_patterns=()
cleanup() {
  pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
  local p
  for p in "${cleanup_patterns[@]}"; do pkill -9 -f "$p" 2>/dev/null || true; done
  [ -n "${hold:-}" ] && kill "$hold" 2>/dev/null
  if declare -F extra_cleanup >/dev/null; then extra_cleanup || true; fi
  if [ -n "${KEEP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
# lines FILE: its line count (0 while it does not exist). wait_lines FILE COUNT [TRIES]: until it has
# COUNT lines (the program is past that point), 0.05 s per try (default 300), else fail.
lines() { [ -f "$1" ] && wc -l <"$1" || echo 0; }
wait_lines() {
  for _ in $(seq "${3:-300}"); do [ "$(lines "$1")" -ge "$2" ] && return 0; sleep 0.05; done
  fail "$1 did not reach $2 lines"
}
lport=$((20000 + (port - 20000 + 6000) % 12000))
hold=
hold_port() {
  python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); print("held", flush=True); time.sleep(60)' \
    "$lport" >"$tmp/hold.out" &
  hold=$!
  for _ in $(seq 100); do [ -s "$tmp/hold.out" ] && break; sleep 0.05; done
}
release_port() {
  kill "$hold"
  wait "$hold" 2>/dev/null || true
  hold=
}
# Checkpoints the computation on $port into $ck, then SIGKILLs all of it: the launcher (pid $1), the
# programs matching pkill pattern $2, and the coordinator.
checkpoint_and_kill() {
  "$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"$tmp/ck.out" 2>&1 || { cat "$tmp/ck.out" "$tmp/launch.err"; fail "checkpoint"; }
  kill -9 "$1" 2>/dev/null || true
  pkill -9 -f "$2" || true
  wait "$1" 2>/dev/null || true
  pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
}
# A restart through the wrapper $tmp/wrap.sh (which SIGKILLs one restorer $1 s in) must fail within 15 s
# (timed from its start: a wait for a previous restart's coordinator counts) and say "the restart was
# ended: <$2>" (a grep pattern); $3 names the case in failures. Sets $took (seconds).
restart_must_end() {
  local die=$1 pattern=$2 what=$3 rc start
  start=$(date +%s.%N)
  set +e
  DIE_AFTER=$die REVIVE_RESTART_BIN=$tmp/wrap.sh timeout 30 "$rv" restart --port "$port" "$ck" >/dev/null 2>"$tmp/ended.err"
  rc=$?
  set -e
  took=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}")
  [ "$rc" != 124 ] || { cat "$tmp/ended.err"; tail -20 "$ck/coordinator.log"; fail "$what (killed after $die s) waited for ever (30 s timeout)"; }
  [ "$rc" != 0 ] || fail "$what (killed after $die s) succeeded although a process was killed"
  awk "BEGIN{exit !($took < 15)}" || { cat "$tmp/ended.err"; fail "$what (killed after $die s) took $took s (waited for the previous coordinator?)"; }
  grep -q "the restart was ended: $pattern" "$tmp/ended.err" ||
    { cat "$tmp/ended.err"; tail -20 "$ck/coordinator.log"; fail "$what (killed after $die s) does not name the killed process"; }
}
# Writes $tmp/wrap.sh, a stand-in for revive-restart ($rr) that, for the process whose pid at the checkpoint
# was $1, sleeps $DIE_AFTER s and dies of SIGKILL before it restores anything (no report); the others run
# $rr. Sets $kimg and $kupid: that process's image name and upid in the newest manifest of $ck.
make_kill_wrapper() {
  local man
  man=$(ls -d "$ck"/ckpt-*/MANIFEST.json | sort -V | tail -1)
  read -r kimg kupid < <(python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
p = [p for p in m["processes"] if int(p["pid"]) == int(sys.argv[2])][0]
print(p["image"], p["upid"])' "$man" "$1")
  cat >"$tmp/wrap.sh" <<WRAP
#!/bin/sh
for a; do last=\$a; done
case "\$last" in */$kimg) sleep \$DIE_AFTER; kill -9 \$\$;; esac
exec "$rr" "\$@"
WRAP
  chmod +x "$tmp/wrap.sh"
}
# Runs $tmp/prog.py (argument: a node-local directory) as two copies (REVIVE_LAUNCH_INDEX 0 and 1): the
# uninterrupted reference in $tmp/ref, then `revive launch -n 2` in $tmp/run with $tmp/run/nodetmp as the
# node-local directory, checkpointing into $ck ($launcher: its pid); returns once both copies wrote 8
# lines of $tmp/run/$1 and $tmp/run/$2. Sets $py (not a pyenv shim: its bash and env would be restored too).
launch_two_copies() {
  py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3)
  mkdir -p "$tmp/ref/nodetmp" "$tmp/run/nodetmp"
  (cd "$tmp/ref" && REVIVE_LAUNCH_INDEX=0 "$py" "$tmp/prog.py" "$tmp/ref/nodetmp" & cd "$tmp/ref" && REVIVE_LAUNCH_INDEX=1 "$py" "$tmp/prog.py" "$tmp/ref/nodetmp"; wait)
  export REVIVE_LOCAL_DIRS=$tmp/run/nodetmp TMPDIR=$tmp/run/nodetmp
  ck=$tmp/ck
  (cd "$tmp/run" && exec "$rv" launch -n 2 --port "$port" --ckpt-dir "$ck" -- "$py" "$tmp/prog.py" "$tmp/run/nodetmp") \
    >"$tmp/launch.out" 2>"$tmp/launch.err" &
  launcher=$!
  for _ in $(seq 100); do
    [ "$(cat "$tmp/run/$1" 2>/dev/null | wc -l)" -ge 8 ] && [ "$(cat "$tmp/run/$2" 2>/dev/null | wc -l)" -ge 8 ] && break
    sleep 0.05
  done
}

# held_port_restarts KIND TAKEN STILL PATTERN...: the flow of the port-taken tests (cli.port_taken,
# cli.udp_port_taken). "$py" "$tmp/prog.py" PORT DIR runs once as a reference (port $lport+1, logs in
# $tmp/ref), then under revive launch on $lport (logs in $tmp/run); checkpointed after 10 client lines,
# killed (with the programs matching each PATTERN); "$tmp/holder.py" PORT COUNTFILE takes $lport (prints
# "held"; writes its count of the computation's KIND to COUNTFILE); restarted, checkpointed again 8 lines
# later, killed, restarted to the end while the holder keeps the port. The program's stderr must match
# TAKEN after restart 1 and STILL after restart 2 (grep patterns), the holder must have counted nothing,
# and the client and server logs must equal the reference's.
held_port_restarts() {
  local kind=$1 taken=$2 still=$3 p r1 before f
  shift 3
  mkdir "$tmp/ref" "$tmp/run"
  "$py" "$tmp/prog.py" "$((lport + 1))" "$tmp/ref"
  export REVIVE_LOCAL_DIRS=
  ck=$tmp/ck
  "$rv" launch --port "$port" --ckpt-dir "$ck" -- "$py" "$tmp/prog.py" "$lport" "$tmp/run" >"$tmp/launch.out" 2>"$tmp/launch.err" &
  local launcher=$!
  wait_lines "$tmp/run/client" 10
  "$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"$tmp/ck.out" 2>&1 || { cat "$tmp/ck.out" "$tmp/launch.err"; fail "checkpoint 1"; }
  sleep 0.5
  kill -9 "$launcher" 2>/dev/null || true
  for p in "$@"; do pkill -9 -f "$p" || true; done
  wait "$launcher" 2>/dev/null || true
  pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
  "$py" "$tmp/holder.py" "$lport" "$tmp/holder.count" >"$tmp/holder.out" 2>&1 &
  for _ in $(seq 100); do [ -s "$tmp/holder.out" ] && break; sleep 0.05; done
  [ "$(cat "$tmp/holder.out")" = held ] || { cat "$tmp/holder.out"; fail "the holder could not take port $lport"; }
  # Restart 1, checkpointed again 8 client lines in and killed.
  timeout 60 "$rv" restart --port "$port" "$ck" >"$tmp/restart1.out" 2>"$tmp/restart1.err" &
  r1=$!
  before=$(lines "$tmp/run/client")
  wait_lines "$tmp/run/client" $((before + 8))
  "$rv" checkpoint --port "$port" --ckpt-dir "$ck" >"$tmp/ck2.out" 2>&1 || { cat "$tmp/ck2.out" "$tmp/restart1.err"; fail "checkpoint 2 (after restart 1)"; }
  sleep 0.5
  for p in "$@"; do pkill -9 -f "$p" || true; done
  wait "$r1" 2>/dev/null || true
  pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
  # The warning goes where the program's stderr went (its file, restored).
  grep -q "$taken" "$tmp/launch.err" ||
    { cat "$tmp/restart1.err" "$tmp/launch.err"; fail "restart 1 does not say that the port was taken and where it went"; }
  [ ! -s "$tmp/holder.count" ] || fail "the holder of port $lport got $(cat "$tmp/holder.count") $kind of the computation (restart 1)"
  # Restart 2: the holder still has the port; the socket moved again, the client follows.
  timeout 60 "$rv" restart --port "$port" "$ck" >"$tmp/restart2.out" 2>"$tmp/restart2.err" ||
    { tail -20 "$tmp/restart2.err"; tail -20 "$ck/coordinator.log"; fail "restart 2"; }
  [ ! -s "$tmp/holder.count" ] || fail "the holder of port $lport got $(cat "$tmp/holder.count") $kind of the computation (restart 2)"
  grep -q "$still" "$tmp/launch.err" || { cat "$tmp/launch.err"; fail "restart 2 does not say that the port is still taken"; }
  for f in client server; do
    cmp "$tmp/ref/$f" "$tmp/run/$f" || { diff "$tmp/ref/$f" "$tmp/run/$f" | head; fail "$f differs after the restarts"; }
  done
}

# udp_holder: writes "$tmp/holder.py" PORT COUNTFILE for held_port_restarts: binds UDP PORT on every
# address without SO_REUSEADDR (the port is its alone), prints "held", counts the datagrams it gets into
# COUNTFILE and answers each with "HOLDER".
udp_holder() {
  cat >"$tmp/holder.py" <<'HOLD'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("held", flush=True)
n = 0
while True:
    data, src = s.recvfrom(64)
    n += 1
    open(sys.argv[2], "w").write("%d\n" % n)
    s.sendto(b"HOLDER", src)
HOLD
}

# udp_server: writes "$tmp/udpserve.py", whose serve(recv, reply, d) answers requests "<n>" with
# "<n> <n*n>" until "end" (recv() -> (bytes, source); reply(bytes, source)), logging each new request
# with a running total into d/server (a repeated one is answered again, logged once); returns the log.
udp_server() {
  cat >"$tmp/udpserve.py" <<'SERVE'
import os
def serve(recv, reply, d):
    log = open(os.path.join(d, "server"), "w")
    total, seen = 0, set()
    while True:
        data, src = recv()
        if data == b"end":
            return log
        n = int(data)
        if n not in seen:
            seen.add(n)
            total += n
            log.write("request %d, total %d\n" % (n, total))
            log.flush()
        reply(b"%d %d" % (n, n * n), src)
SERVE
}
