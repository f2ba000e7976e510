#!/bin/bash
# Usage: bench/proctree/restart_ns.sh BUILD_DIR [ROUNDS]
# What a restart in a pid namespace of its own costs (docs/process-trees.md): a 2-process tree
# (until_file) is checkpointed and killed once; then the same checkpoint is restarted ROUNDS times each
# way, interleaved: as root in the current pid namespace (REVIVE_PIDNS=0: the limit, pids recreated
# where we are), as root in a new pid namespace (REVIVE_PIDNS=1), and, when run as root and user
# revive-test exists (tests/rootless creates it), as that ordinary user (user + pid namespace). Each
# restart's wall time runs from the command to the restored tree's exit (it exits as soon as it runs).
# Prints the medians and the ratios to the first.
set -e
B=$(cd "${1:?build dir}" && pwd); R=${2:-7}
rv=$B/src/cli/revive
prog=$B/bench/proctree/until_file
export REVIVE_INJECT_LIB=$B/src/inject/librevive_inject.so REVIVE_RESTART_BIN=$B/src/restart/revive-restart REVIVE_LOG=0
w=$(mktemp -d /tmp/restart_ns.XXXXXX); chmod 755 "$w"
port=$((20000 + $$ % 10000))
user=
if [ "$(id -u)" = 0 ] && id -u revive-test >/dev/null 2>&1; then user=revive-test; chown revive-test "$w"; fi
as() { if [ -n "$user" ]; then runuser -u "$user" -- "$@"; else "$@"; fi; }
mkdir "$w/run"; [ -n "$user" ] && chown revive-test "$w/run"
# The stop file is outside the program's working directory: the files plugin moves aside what was born
# there after the checkpoint (docs/plugins.md "files").
cd "$w/run"
# The tree is the user's when there is one, so all three ways restart the same images.
as env REVIVE_INJECT_LIB="$REVIVE_INJECT_LIB" "$rv" launch --port "$port" --ckpt-dir "$w/ck" -- "$prog" "$w/stop" \
  >/dev/null 2>&1 &
for i in $(seq 100); do as "$rv" status --port "$port" --ckpt-dir "$w/ck" 2>/dev/null | grep -q "processes: *2" && break; sleep 0.05; done
as "$rv" checkpoint --port "$port" --ckpt-dir "$w/ck" >/dev/null || { echo "restart_ns.sh: checkpoint failed" >&2; exit 1; }
as "$rv" kill --port "$port" --ckpt-dir "$w/ck" >/dev/null 2>&1 || true
wait || true
as touch "$w/stop"
timeit() {  # timeit WHO ENV: one restart, seconds
  local t0 t1
  t0=$(date +%s.%N)
  if [ "$1" = user ]; then as env "$2" timeout 60 "$rv" restart --port "$port" "$w/ck" >"$w/out" 2>&1
  else env "$2" timeout 60 "$rv" restart --port "$port" "$w/ck" >"$w/out" 2>&1; fi
  local rc=$?
  t1=$(date +%s.%N)
  [ $rc = 0 ] || { echo "restart ($1 $2) exited $rc: $(cat "$w/out")" >&2; exit 1; }
  echo "$t1 - $t0" | bc -l
  # The next restart needs the coordinator gone (it exits with its last process).
  for i in $(seq 100); do "$rv" status --port "$port" --ckpt-dir "$w/ck" >/dev/null 2>&1 || break; sleep 0.02; done
}
: > "$w/times"
for r in $(seq "$R"); do
  echo "root-here $(timeit root REVIVE_PIDNS=0)" >> "$w/times"
  echo "root-pidns $(timeit root REVIVE_PIDNS=1)" >> "$w/times"
  if [ -n "$user" ]; then
    echo "user-userns $(timeit user REVIVE_PIDNS=)" >> "$w/times"
    t0=$(date +%s.%N); as true; t1=$(date +%s.%N)  # what runuser itself adds to the user's restart
    echo "runuser $(echo "$t1 - $t0" | bc -l)" >> "$w/times"
  fi
done
awk 'function med(s,   a, n, i, j, t) { n = split(s, a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  { v[$1] = v[$1] " " $2 }
  END { for (k in v) m[k] = med(v[k])
        printf "restart of a 2-process tree, command to exit, median of %d:\n", '"$R"'
        printf "  root, pids recreated here (the limit)  %6.1f ms\n", m["root-here"] * 1000
        printf "  root, new pid namespace                %6.1f ms  ratio %.2f\n", m["root-pidns"] * 1000, m["root-pidns"] / m["root-here"]
        if ("user-userns" in m) {
          u = m["user-userns"] - m["runuser"]
          printf "  ordinary user, user + pid namespace    %6.1f ms  ratio %.2f (runuser itself, %.1f ms, taken out)\n",
                 u * 1000, u / m["root-here"], m["runuser"] * 1000 } }' "$w/times"
cd /; rm -rf "$w"
