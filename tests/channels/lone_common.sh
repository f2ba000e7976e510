# Sourced by the channels scripts that restart images without a coordinator (lone_restart_test.sh,
# pty_lone_test.sh) with their arguments REVIVE INJECT RESTART WORKDIR: empties WORKDIR and goes there, sets
# the engine's variables, a free coordinator port ($cport) and pids (killed on exit).
set -uo pipefail
revive=$1 inject=$2 restart_bin=$3 work=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
export REVIVE_INJECT_LIB=$inject REVIVE_RESTART_BIN=$restart_bin REVIVE_LOCAL_DIRS=
unset REVIVE_PORT REVIVE_CKPT_DIR REVIVE_SECRET_FILE
cport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null' EXIT

# standalone_refused TAG PATTERN PROG.py [ARGS...]: runs PROG.py (it
# prints "fd FD PID", sleeps 2 s, prints "done") under the engine without a coordinator, asks for a
# standalone checkpoint (the checkpoint signal) and requires it refused: PATTERN ({pid} and {fd} replaced)
# in TAG.err, no image under TAG/, and the program ran on. Uses the caller's $inject, $work, pids and fail.
standalone_refused() {
  local tag=$1 pattern=$2 fd pid
  shift 2
  LD_PRELOAD=$inject REVIVE_CKPT_DIR=$work/$tag python3 "$@" > "$tag.out" 2> "$tag.err" &
  pids+=($!)
  for _ in $(seq 100); do grep -q '^fd' "$tag.out" 2>/dev/null && break; sleep 0.05; done
  read -r _ fd pid < "$tag.out"
  kill -s SIGRTMAX-2 "$pid"
  wait "$pid"
  pattern=${pattern//\{pid\}/$pid}
  pattern=${pattern//\{fd\}/$fd}
  grep -q "$pattern" "$tag.err" || fail "the standalone checkpoint did not refuse fd $fd"
  ! ls "$tag"/ckpt-*/*.rimg > /dev/null 2>&1 || fail "the refused standalone checkpoint wrote an image"
  grep -q '^done$' "$tag.out" || fail "the program did not run on after the refused checkpoint"
  echo "standalone: refused fd $fd"
}
