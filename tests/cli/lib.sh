# Sourced by tests/cli/*_test.sh: a scratch directory ($tmp), a coordinator port below the ephemeral range
# ($port: no outgoing connection of another test takes it meanwhile), fail(), and a cleanup on exit that
# kills what runs on that port and the test's own programs (pkill -f patterns in cleanup_patterns), then
# runs the test's extra_cleanup function if it defines one. KEEP=1 keeps $tmp.
tmp=$(mktemp -d)
port=$((20000 + RANDOM % 12000))
cleanup_patterns=()
cleanup() {
  pkill -9 -f "(revive|coordinator).*--port $port( |$)" 2>/dev/null || true
  local p
  for p in "${cleanup_patterns[@]}"; do pkill -9 -f "$p" 2>/dev/null || true; done
  if declare -F extra_cleanup >/dev/null; then extra_cleanup || true; fi
  if [ -n "${KEEP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
