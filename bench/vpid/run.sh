#!/bin/sh
# Usage: bench/vpid/run.sh BUILD_DIR [ROUNDS] [N_FORK]
# Virtual-pid wrappers: getpid, kill(self, 0), waitpid(WNOHANG), fork+_exit+waitpid, libc's
# syscall(SYS_getpid) and open+read+close of /proc/self/stat (rewritten under a table), native (the
# limit), under librevive_inject.so without a table (every wrapper passes through; fork also pays the
# proctree fork wrapper) and with a virtual-pid table mapped (this process registered under another
# id, 200 other entries), and under `revive launch` (a coordinator: what a user's program sees, where
# every fork child joins the computation before fork returns), alternating, ROUNDS rounds (each a
# median of 5 batches); prints the medians over the rounds and their ratios to native.
set -e
B=${1:?build dir}; R=${2:-7}; N=${3:-200}
prog=$B/bench/vpid/vpid_bench
lib=$B/src/inject/librevive_inject.so
revive=$B/src/cli/revive
out=$(mktemp)
ck=$(mktemp -d)
i=0
while [ "$i" -lt "$R" ]; do
  echo "native $(env -u LD_PRELOAD REVIVE_LOG=0 "$prog" "$N")" >> "$out"
  echo "library $(LD_PRELOAD=$lib REVIVE_LOG=0 "$prog" "$N")" >> "$out"
  echo "table $(REVIVE_LOG=0 "$prog" --table "$lib" "$N")" >> "$out"
  echo "launch $(REVIVE_INJECT_LIB=$lib REVIVE_LOG=0 "$revive" launch --ckpt-dir "$ck" -- "$prog" "$N")" >> "$out"
  i=$((i + 1))
done
awk '
  function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  { m = $1; n[m]++; for (c = 2; c <= 7; c++) v[m, c, n[m]] = $c }
  END {
    split("getpid_ns kill(self,0)_ns waitpid(WNOHANG)_ns fork+wait_us syscall(getpid)_ns /proc/self/stat_us", name, " ")
    for (c = 2; c <= 7; c++) {
      for (k = 1; k <= n["native"]; k++) a[k] = v["native", c, k]; x = med(a, n["native"])
      for (k = 1; k <= n["library"]; k++) l[k] = v["library", c, k]; z = med(l, n["library"])
      for (k = 1; k <= n["table"]; k++) b[k] = v["table", c, k]; y = med(b, n["table"])
      for (k = 1; k <= n["launch"]; k++) u[k] = v["launch", c, k]; w = med(u, n["launch"])
      printf "%-20s native %7.1f  library %7.1f (%.2fx)  library+table %7.1f (%.2fx)  revive launch %7.1f (%.2fx)\n",
             name[c - 1], x, z, z / x, y, y / x, w, w / x
    }
  }' "$out"
rm -rf "$out" "$ck"
