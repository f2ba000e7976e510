#!/bin/sh
# Usage: bench/vpid/run.sh BUILD_DIR [ROUNDS] [N_FORK]
# Virtual-pid wrappers: getpid, kill(self, 0), waitpid(WNOHANG) and fork+_exit+waitpid, native (the
# limit), under librevive_inject.so without a table (every wrapper passes through; fork also pays the
# proctree fork wrapper) and with a virtual-pid table mapped (this process registered under another
# id, 200 other entries), alternating, ROUNDS rounds (each a median of 5 batches); prints the
# medians over the rounds and their ratios.
set -e
B=${1:?build dir}; R=${2:-7}; N=${3:-200}
prog=$B/bench/vpid/vpid_bench
lib=$B/src/inject/librevive_inject.so
out=$(mktemp)
i=0
while [ "$i" -lt "$R" ]; do
  echo "native $(env -u LD_PRELOAD REVIVE_LOG=0 "$prog" "$N")" >> "$out"
  echo "library $(LD_PRELOAD=$lib REVIVE_LOG=0 "$prog" "$N")" >> "$out"
  echo "table $(REVIVE_LOG=0 "$prog" --table "$lib" "$N")" >> "$out"
  i=$((i + 1))
done
awk '
  function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  { m = $1; n[m]++; for (c = 2; c <= 5; c++) v[m, c, n[m]] = $c }
  END {
    split("getpid_ns kill(self,0)_ns waitpid(WNOHANG)_ns fork+wait_us", name, " ")
    for (c = 2; c <= 5; c++) {
      for (k = 1; k <= n["native"]; k++) a[k] = v["native", c, k]; x = med(a, n["native"])
      for (k = 1; k <= n["library"]; k++) l[k] = v["library", c, k]; z = med(l, n["library"])
      for (k = 1; k <= n["table"]; k++) b[k] = v["table", c, k]; y = med(b, n["table"])
      printf "%-22s native %7.1f  library %7.1f  library+table %7.1f  ratio to native %.2f, to library %.2f\n",
             name[c - 1], x, z, y, y / x, y / z
    }
  }' "$out"
rm -f "$out"
