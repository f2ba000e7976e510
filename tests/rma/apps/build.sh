#!/usr/bin/env bash
# build.sh OUTDIR -- build the RMA test apps (fft_transpose, dht, stencil, many_wins) for both MPIs:
#   OUTDIR/openmpi/<app>  with Open MPI's wrapper (mpicc.openmpi, else mpicc; override: MPICC_OPENMPI)
#   OUTDIR/mpich/<app>    with mpicc.mpich (override: MPICC_MPICH)
# A flavour whose compiler is missing is skipped with a message on stderr. Exits 1 if a compile
# fails or if no flavour could be built.
set -uo pipefail
[[ $# -eq 1 ]] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
apps=(fft_transpose dht stencil many_wins)
cflags=(-std=c99 -O2 -g -Wall -Wextra)

ompi_cc=${MPICC_OPENMPI:-}
if [[ -z $ompi_cc ]]; then
  if command -v mpicc.openmpi >/dev/null 2>&1; then ompi_cc=mpicc.openmpi; else ompi_cc=mpicc; fi
fi
mpich_cc=${MPICC_MPICH:-mpicc.mpich}

built=0 failed=0
for flavour in openmpi mpich; do
  if [[ $flavour == openmpi ]]; then cc=$ompi_cc; else cc=$mpich_cc; fi
  if ! command -v "$cc" >/dev/null 2>&1; then
    echo "build.sh: skipping $flavour: compiler '$cc' not found" >&2
    continue
  fi
  mkdir -p "$out/$flavour" || exit 1
  for app in "${apps[@]}"; do
    if "$cc" "${cflags[@]}" -o "$out/$flavour/$app" "$here/$app.c"; then
      :
    else
      echo "build.sh: FAILED to build $app for $flavour with $cc" >&2
      failed=1
    fi
  done
  built=$((built + 1))
  echo "build.sh: built ${apps[*]} for $flavour ($cc) in $out/$flavour"
done
((failed == 0)) || exit 1
((built > 0)) || { echo "build.sh: no MPI compiler found" >&2; exit 1; }
exit 0
