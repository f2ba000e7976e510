#!/usr/bin/env bash
# mpich_ml.sh SRC_ROOT WORKDIR LIBREVIVE PYTHON — multi-level storage with MPICH: builds src/mpi and ml_app
# with mpicxx.mpich against the already-built librevive.so (no MPI inside), then runs three ml_test.py
# scenarios (XOR rebuild, Reed-Solomon rebuild, a corrupted partner copy set aside) with mpiexec.mpich.
set -euo pipefail
# Loopback only for UCX: the suite's netns tests add and remove interfaces here, and UCX's init fails
# ("No such device") when one goes while it lists them (tests/mpich_cr/mpich_cr.py).
export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
src=$1; work=$2; lib=$3; py=$4
rm -rf "$work"; mkdir -p "$work"
mpicxx.mpich -std=c++20 -O1 -Wall -Wextra -DMPICH_SKIP_MPICXX=1 -I"$src/include" -I"$src/src" \
  "$src/src/mpi/mpi_comm.cc" "$src/src/mpi/datatype_item.cc" "$src/src/mpi/mpi_shared_file.cc" \
  "$src/tests/multilevel/ml_app.cc" \
  "$lib" -Wl,-rpath,"$(dirname "$lib")" -o "$work/ml_app_mpich" || { echo "mpicxx.mpich: build failed"; exit 1; }
ldd "$work/ml_app_mpich" | grep libmpich >/dev/null || { echo "not linked against MPICH"; exit 1; }
for s in xor rs bad_partner; do
  "$py" "$src/tests/multilevel/ml_test.py" "$work/ml_app_mpich" "$(command -v mpiexec.mpich)" "$work/$s" "$s"
done
rm -rf "$work"
