#!/usr/bin/env bash
# build_prog.sh FLAVOR OUT SRC: compiles one test program of tests/mpi_transparent with FLAVOR's wrapper
# compiler (openmpi: mpicc.openmpi/mpicxx.openmpi/mpif90.openmpi, falling back to mpicc/mpicxx/mpif90;
# mpich: mpicc.mpich/mpicxx.mpich/mpif90.mpich), the language taken from SRC's suffix, and checks with
# ldd that OUT really links that MPI (the unsuffixed wrappers are alternatives that may point elsewhere).
# Used by progs/CMakeLists.txt; also runs by hand: build_prog.sh mpich /tmp/p2p p2p.c
set -euo pipefail
flavor=$1; out=$2; src=$3
case "$src" in
  *.c) lang=cc; flags=(-std=gnu11 -O2 -g -Wall -Wextra -Wno-stringop-overflow -pthread) ;;
  *.cpp) lang=cxx; flags=(-std=c++17 -O2 -g -Wall -Wextra -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1) ;;
  *.f90) lang=f90; flags=(-O2 -g -Wall) ;;
  *) echo "build_prog.sh: unknown language: $src" >&2; exit 2 ;;
esac
# gfortran writes module files to the current directory: keep them out of the source tree.
mkdir -p "$(dirname "$out")"
cd "$(dirname "$out")"
case "$flavor" in
  openmpi) want=libmpi.so; candidates=("mpi$lang.openmpi" "mpi$lang") ;;
  mpich) want=libmpich; candidates=("mpi$lang.mpich") ;;
  *) echo "build_prog.sh: flavor is openmpi or mpich, not $flavor" >&2; exit 2 ;;
esac
wrapper=
for c in "${candidates[@]}"; do
  if command -v "$c" >/dev/null; then wrapper=$c; break; fi
done
[ -n "$wrapper" ] || { echo "build_prog.sh: no ${candidates[*]} for $flavor" >&2; exit 1; }
"$wrapper" "${flags[@]}" -o "$out.tmp" "$src"
# grep without -q: with -q, ldd may die of SIGPIPE and pipefail would fail the build.
if ! ldd "$out.tmp" | grep "$want" >/dev/null; then
  echo "build_prog.sh: $wrapper built $out without $want: not a $flavor program" >&2
  rm -f "$out.tmp"
  exit 1
fi
mv "$out.tmp" "$out"
