# Sourced by tests/cli/*_test.sh: a scratch directory ($tmp), a coordinator port below the ephemeral range
# ($port: no outgoing connection of another test takes it meanwhile), fail(), and a cleanup on exit that
# kills what runs on that port and the test's own programs (pkill -f patterns in cleanup_patterns), then
# runs the test's extra_cleanup function if it defines one. KEEP=1 keeps $tmp. hold_port/release_port:
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
