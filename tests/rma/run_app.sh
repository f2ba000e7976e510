#!/usr/bin/env bash
# run_app.sh FLAVOUR OUTDIR APP NP [app args...] -- run one RMA test app (built by
# apps/build.sh OUTDIR) on NP ranks with the right launcher; exec's the launcher, so its exit
# status and stdout are the app's.
#   openmpi: mpirun --allow-run-as-root --oversubscribe --mca osc ucx
#            (osc rdma, the default, segfaults in MPI_Compare_and_swap; osc sm cannot do
#            MPI_Win_create; osc pt2pt deadlocks in dht; override with RMA_OSC=...)
#   mpich:   mpiexec.mpich
# If REVIVE_RMA_PRELOAD is set, the ranks (not the launcher) get LD_PRELOAD=$REVIVE_RMA_PRELOAD, after
# RMA_PRELOAD_FIRST if that is set too (libasan.so for a sanitizer build of the library: docs/rma.md).
# Every environment variable whose name starts with REVIVE_ is passed to the ranks
# (-x NAME for Open MPI, -genv NAME VALUE for MPICH).  RMA_LAUNCH_ARGS adds launcher options.
set -euo pipefail
if [[ $# -lt 4 ]]; then
  echo "usage: $0 openmpi|mpich OUTDIR APP NP [app args...]" >&2
  exit 2
fi
flavour=$1 outdir=$2 app=$3 np=$4
shift 4
case $flavour in
  openmpi | mpich) ;;
  *) echo "run_app.sh: unknown flavour '$flavour' (openmpi or mpich)" >&2; exit 2 ;;
esac
bin=$outdir/$flavour/$(basename "$app")
[[ -x $bin ]] || { echo "run_app.sh: no executable $bin (run apps/build.sh $outdir)" >&2; exit 2; }

revive_vars=()
while IFS= read -r name; do
  [[ -n $name ]] && revive_vars+=("$name")
done < <(compgen -e | grep '^REVIVE_' || true)
# shellcheck disable=SC2206
extra=(${RMA_LAUNCH_ARGS:-})
[[ -n ${REVIVE_RMA_PRELOAD:-} && -n ${RMA_PRELOAD_FIRST:-} ]] && REVIVE_RMA_PRELOAD="$RMA_PRELOAD_FIRST:$REVIVE_RMA_PRELOAD"

case $flavour in
  openmpi)
    launcher=mpirun
    command -v mpirun.openmpi >/dev/null 2>&1 && launcher=mpirun.openmpi
    args=(--allow-run-as-root --oversubscribe -np "$np" --mca osc "${RMA_OSC:-ucx}")
    [[ -n ${REVIVE_RMA_PRELOAD:-} ]] && args+=(-x "LD_PRELOAD=$REVIVE_RMA_PRELOAD")
    for v in "${revive_vars[@]}"; do args+=(-x "$v"); done
    exec "$launcher" "${args[@]}" "${extra[@]}" "$bin" "$@"
    ;;
  mpich)
    args=(-n "$np")
    [[ -n ${REVIVE_RMA_PRELOAD:-} ]] && args+=(-genv LD_PRELOAD "$REVIVE_RMA_PRELOAD")
    for v in "${revive_vars[@]}"; do args+=(-genv "$v" "${!v}"); done
    # Loopback only: the suite's netns tests add and remove interfaces here, and UCX's init fails
    # ("No such device") when one goes while it lists them (tests/mpich_cr/mpich_cr.py).
    export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo}
    exec mpiexec.mpich "${args[@]}" "${extra[@]}" "$bin" "$@"
    ;;
esac
