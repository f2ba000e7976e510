#!/usr/bin/env bash
# mpich_test.sh SRC_ROOT WORKDIR LIBREVIVE — proves revive_mpi builds and runs with MPICH, not only with the
# Open MPI the rest of the build uses: compiles src/mpi and mpi_ckpt_test with mpicxx.mpich against the
# already-built librevive.so (which has no MPI in it), then runs the roundtrip and delete scenarios with
# mpiexec.mpich -n 2, in file-per-rank and in shared-file (MPI-IO, ROMIO here) mode.
set -euo pipefail
# Loopback only for UCX: the suite's netns tests add and remove interfaces here, and UCX's init fails
# ("No such device") when one goes while it lists them (tests/mpich_cr/mpich_cr.py).
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
src=$1; work=$2; lib=$3
rm -rf "$work"; mkdir -p "$work"
mpicxx.mpich -std=c++20 -O1 -Wall -Wextra -DMPICH_SKIP_MPICXX=1 -I"$src/include" -I"$src/src" \
  "$src/src/mpi/mpi_comm.cc" "$src/src/mpi/datatype_item.cc" "$src/src/mpi/mpi_shared_file.cc" \
  "$src/tests/mpi/mpi_ckpt_test.cc" \
  "$lib" -Wl,-rpath,"$(dirname "$lib")" -o "$work/mpi_ckpt_test_mpich" || { echo "mpicxx.mpich: build failed"; exit 1; }
# The binary must really be an MPICH program.
# grep without -q: -q exits at the first match, ldd then dies of SIGPIPE and pipefail fails the test.
ldd "$work/mpi_ckpt_test_mpich" | grep libmpich >/dev/null || { echo "not linked against MPICH"; exit 1; }
for mode in "" mpiio; do
  for s in roundtrip delete; do
    st=0
    log="$work/$s$mode.log"
    mpiexec.mpich -n 2 "$work/mpi_ckpt_test_mpich" "$work/ckpt-$s$mode" "$s" $mode >"$log" 2>&1 || st=$?
    cat "$log"
    ((st == 0)) && grep -q "^$s: PASS" "$log" || { echo "MPICH $s ${mode:-files} scenario failed (status $st)"; exit 1; }
  done
  grep -q 'falling back to an older version' "$work/delete$mode.log" || { echo "fallback was not reported ($mode)"; exit 1; }
done
rm -rf "$work"
