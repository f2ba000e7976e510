#!/usr/bin/env bash
# apps_identical.sh OUTDIR -- determinism check of the RMA test apps built by apps/build.sh OUTDIR.
# For each MPI flavour present in OUTDIR and each app variant (fft_transpose put/--get, dht
# lock_all/--lock, stencil fence/--pscw/--acc/--pscw --acc) run it twice on 4 ranks with small
# sizes and require: exit status 0, non-empty stdout, byte-identical stdout, one "iter" line per
# iteration plus a "done digest" line, and pairwise different iteration digests (a constant
# digest would check nothing).  Variants that must compute the same thing are also compared with
# each other: fft put == --get, dht lock_all == --lock, stencil fence == --pscw (with and without
# --acc).  Prints one line per case with both run times; exit 1 on any failure.
set -uo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
run_app=$here/run_app.sh
NP=4
TIMEOUT=${RMA_APP_TIMEOUT:-30}

# name|app|args   (iteration count must be the --iters value)
cases=(
  "fft|fft_transpose|--n 16 --iters 4"
  "fft-get|fft_transpose|--n 16 --iters 4 --get"
  "dht|dht|--keyspace 64 --keys 8 --iters 2"
  "dht-lock|dht|--keyspace 64 --keys 8 --iters 2 --lock"
  "stencil|stencil|--rows 32 --cols 24 --iters 4"
  "stencil-pscw|stencil|--rows 32 --cols 24 --iters 4 --pscw"
  "stencil-acc|stencil|--rows 32 --cols 24 --iters 4 --acc"
  "stencil-pscw-acc|stencil|--rows 32 --cols 24 --iters 4 --pscw --acc"
)
# pairs of cases whose output must be identical
same=("fft fft-get" "dht dht-lock" "stencil stencil-pscw" "stencil-acc stencil-pscw-acc")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 flavours=0
declare -A passed=() # "flavour.case" -> 1 when both runs passed
bad() { echo "FAIL: $*"; fail=1; }

secs() { # start-time -> elapsed seconds with 2 decimals
  local now=$EPOCHREALTIME
  awk -v a="$1" -v b="$now" 'BEGIN { printf "%.2f", b - a }'
}

# check_output FILE ITERS LABEL: structure and non-constant digests
check_output() {
  local f=$1 iters=$2 label=$3
  local n_iter n_done n_distinct
  n_iter=$(grep -c '^iter [0-9]* digest [0-9a-f]\{16\}' "$f")
  n_done=$(grep -c '^done digest [0-9a-f]\{16\}$' "$f")
  n_distinct=$(grep '^iter ' "$f" | awk '{print $4}' | sort -u | wc -l)
  [[ $n_iter -eq $iters && $n_done -eq 1 && $(wc -l <"$f") -eq $((iters + 1)) ]] ||
    { bad "$label: expected $iters iter lines and one done line, got:"; sed 's/^/    /' "$f"; return 1; }
  [[ $n_distinct -eq $iters ]] ||
    { bad "$label: iteration digests are not all different (constant digest?):"; sed 's/^/    /' "$f"; return 1; }
  return 0
}

start_all=$EPOCHREALTIME
for flavour in openmpi mpich; do
  if [[ ! -d $out/$flavour ]]; then
    echo "skip: $flavour (no $out/$flavour; its compiler was missing at build time?)"
    continue
  fi
  flavours=$((flavours + 1))
  for c in "${cases[@]}"; do
    IFS='|' read -r name app args <<<"$c"
    iters=$(sed -n 's/.*--iters \([0-9]*\).*/\1/p' <<<"$args")
    label="$flavour/$name ($app $args)"
    times=()
    ok=1
    for r in 1 2; do
      f=$tmp/$flavour.$name.$r
      t0=$EPOCHREALTIME
      # shellcheck disable=SC2086
      timeout -k 5 "$TIMEOUT" "$run_app" "$flavour" "$out" "$app" "$NP" $args >"$f" 2>"$f.err"
      rc=$?
      times+=("$(secs "$t0")s")
      if [[ $rc -ne 0 ]]; then
        bad "$label: run $r exited with status $rc$([[ $rc -eq 124 ]] && echo " (timeout ${TIMEOUT}s)")"
        tail -n 5 "$f.err" | sed 's/^/    stderr: /'
        ok=0
        break
      fi
      if [[ ! -s $f ]]; then
        bad "$label: run $r printed nothing on stdout"
        ok=0
        break
      fi
    done
    if ((ok)); then
      if ! cmp -s "$tmp/$flavour.$name.1" "$tmp/$flavour.$name.2"; then
        bad "$label: the two runs printed different output:"
        diff "$tmp/$flavour.$name.1" "$tmp/$flavour.$name.2" | sed 's/^/    /'
        ok=0
      elif ! check_output "$tmp/$flavour.$name.1" "$iters" "$label"; then
        ok=0
      fi
    fi
    if ((ok)); then
      passed[$flavour.$name]=1
      echo "ok:   $label  [${times[*]}]"
    fi
  done
  for p in "${same[@]}"; do
    read -r a b <<<"$p"
    fa=$tmp/$flavour.$a.1 fb=$tmp/$flavour.$b.1
    [[ -n ${passed[$flavour.$a]:-} && -n ${passed[$flavour.$b]:-} ]] || continue
    if cmp -s "$fa" "$fb"; then
      echo "ok:   $flavour: $a and $b print the same digests"
    else
      bad "$flavour: $a and $b should print the same digests:"
      diff "$fa" "$fb" | sed 's/^/    /'
    fi
  done
done

# the same program must print the same digests under both MPIs
if [[ -d $out/openmpi && -d $out/mpich ]]; then
  for c in "${cases[@]}"; do
    IFS='|' read -r name _ _ <<<"$c"
    fa=$tmp/openmpi.$name.1 fb=$tmp/mpich.$name.1
    [[ -n ${passed[openmpi.$name]:-} && -n ${passed[mpich.$name]:-} ]] || continue
    if cmp -s "$fa" "$fb"; then
      echo "ok:   $name: Open MPI and MPICH print the same digests"
    else
      bad "$name: Open MPI and MPICH print different digests:"
      diff "$fa" "$fb" | sed 's/^/    /'
    fi
  done
fi

((flavours > 0)) || bad "no app build found in $out (run apps/build.sh $out)"
echo "apps_identical: $([[ $fail -eq 0 ]] && echo PASS || echo FAIL) in $(secs "$start_all")s"
exit "$fail"
