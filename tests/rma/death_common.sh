# Shared by rank_death.sh and rank_rebuild.sh (sourced, with the script's "$@"): checks the arguments
# OUTDIR BUILD, skips (77) without the Open MPI apps or the library, makes $tmp (removed at exit, with the
# launcher $launcher killed if still running), and defines bad() (records a failure in $fail).
[[ $# -eq 2 ]] || { echo "usage: $0 OUTDIR BUILD" >&2; exit 2; }
out=$1 build=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lib=$build/src/rma/librevive_rma.so
[[ -x $out/openmpi/fft_transpose && -f $lib ]] || { echo "skip: no Open MPI apps in $out or no $lib"; exit 77; }
tmp=$(mktemp -d "/tmp/revive-rma-$(basename "$0" .sh)-test-XXXXXX")
launcher=
trap '[[ -n $launcher ]] && kill -9 "$launcher" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
