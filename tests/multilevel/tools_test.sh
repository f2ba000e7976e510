#!/usr/bin/env bash
# revive ls / verify / rebuild / flush on a multi-level checkpoint of ml_app: 6 ranks on 3 simulated hosts
# (h0: ranks 0 1, h1: ranks 2 3, h2: ranks 4 5), killed after step 17 (versions v1..v4 at steps 0 5 10 15).
#   tools_test.sh REVIVE_BIN ML_APP
set -euo pipefail
REVIVE=$1
ML_APP=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

run() {  # run the app on 6 ranks, rank r on host h$((r/2))
  mpiexec -n 6 sh -c 'r=${OMPI_COMM_WORLD_RANK:-$PMI_RANK}; REVIVE_HOST=h$((r/2)) exec "$@"' sh "$ML_APP" "$@"
}
DIR=$T/global/mlapp
export REVIVE_LOCAL_PATH=$T/local REVIVE_GROUP_SIZE=3

# Reference: uninterrupted, global level only.
REVIVE_CP_PATH=$T/ref run 30 5 >"$T/ref.out" 2>"$T/ref.err" || fail "reference run"

set +e
REVIVE_LEVELS="L1+L2+L3,L4@2" REVIVE_CP_PATH=$T/global run 30 5 17 >"$T/crash.out" 2>"$T/crash.err"
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "the crashing run exited 0"

# 1. ls: v4 complete at L1, L2 and L3.
"$REVIVE" ls "$DIR" --json >"$T/ls1.json"
v4() { python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
v=[x for x in d['versions'] if x['version']==4][0]
print($2)" "$1"; }
[ "$(v4 "$T/ls1.json" "v['local']['L1']['complete'] and v['local']['L2']['complete'] and v['local']['L3']['complete'] and v['local']['restorable']")" = True ] \
  || { cat "$T/ls1.json"; fail "v4 not complete at L1/L2/L3"; }
"$REVIVE" ls "$DIR" >"$T/ls1.txt" || fail "ls (table)"
grep -q '^v4 ' "$T/ls1.txt" || { cat "$T/ls1.txt"; fail "table lacks v4"; }

# Backup of the local pieces, then host h1 is lost.
cp -a "$T/local" "$T/backup"
rm -rf "$T/local/h1"
"$REVIVE" ls "$DIR" --json >"$T/ls2.json"
[ "$(v4 "$T/ls2.json" "(not v['local']['L1']['complete']) and v['local']['restorable'] and 'h1' not in v['local']['hosts']")" = True ] \
  || { cat "$T/ls2.json"; fail "after losing h1, ls should say L1 incomplete but restorable"; }

# 2. verify: only missing pieces, nothing damaged; the newest version is restorable (exit 0).
"$REVIVE" verify "$DIR" --json >"$T/verify1.json" || { cat "$T/verify1.json"; fail "verify after losing h1 exited non-zero"; }
[ "$(v4 "$T/verify1.json" "len(v['damaged'])==0 and len(v['missing'])>0 and v['local']['restorable']")" = True ] \
  || { cat "$T/verify1.json"; fail "verify should report only missing pieces"; }
[ "$(v4 "$T/verify1.json" "any('/h1/' in m['file'] and m['file'].endswith('/v-4/rank-2') for m in v['missing'])")" = True ] \
  || { cat "$T/verify1.json"; fail "verify does not name h1's rank-2"; }

# One flipped byte in a surviving parity piece: verify names that file.
pfile=$(ls "$T"/local/h0/*/v-4/parity-0)
python3 - "$pfile" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[len(b) // 2] ^= 0x5a
open(p, 'wb').write(bytes(b))
PY
"$REVIVE" verify "$DIR" --version 4 >"$T/verify2.txt" || true
grep -q "damaged: $pfile" "$T/verify2.txt" || { cat "$T/verify2.txt"; fail "verify does not name the damaged parity file"; }

# 3. rebuild: the missing and damaged pieces come back; verify is clean; data pieces are byte-identical.
"$REVIVE" rebuild "$DIR" --version 4 >"$T/rebuild.txt" || { cat "$T/rebuild.txt"; fail "rebuild"; }
grep -q "rebuilt rank 2's own copy" "$T/rebuild.txt" || { cat "$T/rebuild.txt"; fail "rebuild did not restore rank 2"; }
"$REVIVE" verify "$DIR" --version 4 --json >"$T/verify3.json" || { cat "$T/verify3.json"; fail "verify after rebuild"; }
[ "$(v4 "$T/verify3.json" "len(v['damaged'])==0 and len(v['missing'])==0 and v['local']['restorable']")" = True ] \
  || { cat "$T/verify3.json"; fail "verify is not clean after rebuild"; }
for f in "$T"/backup/*/*/v-4/rank-* "$T"/backup/*/*/v-4/parity-*; do
  case $f in *.meta) continue ;; esac
  rel=${f#"$T"/backup/}
  cmp -s "$f" "$T/local/$rel" || fail "rebuilt $rel differs from the original"
done

# 4. flush v4 to L4 (refused while v4 is complete there unless it is removed first), then restart from L4.
if "$REVIVE" ls "$DIR" --json | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if [v for v in d['versions'] if v['version']==4][0]['L4']['complete'] else 1)"; then
  if "$REVIVE" flush "$DIR" --version 4 2>"$T/flush0.err"; then fail "flush of a version complete at L4 was not refused"; fi
  grep -q "already complete" "$T/flush0.err" || fail "refusal does not say why"
fi
rm -rf "$DIR/v-4"
"$REVIVE" flush "$DIR" --version 4 >"$T/flush.txt" || { cat "$T/flush.txt"; fail "flush"; }
"$REVIVE" ls "$DIR" --json >"$T/ls3.json"
[ "$(v4 "$T/ls3.json" "v['L4']['complete'] and v['L4']['ranks']==6")" = True ] || { cat "$T/ls3.json"; fail "v4 not complete at L4 after flush"; }
"$REVIVE" verify "$DIR" --version 4 --json >"$T/verify4.json" || fail "verify after flush"
[ "$(v4 "$T/verify4.json" "v['L4']['restorable']")" = True ] || { cat "$T/verify4.json"; fail "flushed v4 does not verify at L4"; }

# A corrupted meta is named and otherwise ignored.
meta=$(ls "$T"/local/h2/*/v-3/rank-2.meta)
echo "garbage" >"$meta"
"$REVIVE" ls "$DIR" --json >"$T/ls4.json" || fail "ls with a corrupted meta"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if any(sys.argv[2] in p for p in d['problems']) else 1)" \
  "$T/ls4.json" "$meta" || { cat "$T/ls4.json"; fail "ls does not name the corrupted meta"; }
"$REVIVE" verify "$DIR" >"$T/verify5.txt" || { cat "$T/verify5.txt"; fail "verify with a corrupted meta of an old version"; }
grep -q "ignored: .*$meta" "$T/verify5.txt" || { cat "$T/verify5.txt"; fail "verify does not name the corrupted meta"; }

# Restart from L4 only (no local pieces visible): the flushed v4 must be a faithful checkpoint.
REVIVE_LEVELS="L4" REVIVE_LOCAL_PATH=$T/no-local REVIVE_CP_PATH=$T/global run 30 5 >"$T/restart.out" 2>"$T/restart.err" || { cat "$T/restart.err"; fail "restart from L4"; }
diff "$T/ref.out" "$T/restart.out" || fail "restart output differs from the uninterrupted run"
grep -q "ml_app: restarted at step 16" "$T/restart.err" || { cat "$T/restart.err"; fail "did not restart at step 16"; }
grep -q "restarting from version 4 .*(global level)" "$T/restart.err" || { cat "$T/restart.err"; fail "did not restart from the flushed L4 version"; }

# Reed-Solomon (m = 2) without partner copies: two of the three hosts lost. No surviving piece names the
# lost ranks' hosts, so rebuild needs --host-of; with it, every piece comes back byte for byte.
RS=$T/rs
set +e
REVIVE_PARITY=2 REVIVE_LEVELS="L1+L3" REVIVE_LOCAL_PATH=$RS/local REVIVE_CP_PATH=$RS/global run 30 5 17 >/dev/null 2>&1
set -e
cp -a "$RS/local" "$RS/backup"
rm -rf "$RS/local/h1" "$RS/local/h2"
"$REVIVE" ls "$RS/global/mlapp" --local "$RS/local" | grep '^v4 .*restorable' >/dev/null || fail "RS: v4 not restorable from one host"
if "$REVIVE" rebuild "$RS/global/mlapp" --local "$RS/local" 2>"$RS/rebuild.err"; then fail "RS: rebuild without hosts succeeded"; fi
grep -q -- "--host-of" "$RS/rebuild.err" || { cat "$RS/rebuild.err"; fail "RS: rebuild does not say how to name the hosts"; }
"$REVIVE" rebuild "$RS/global/mlapp" --local "$RS/local" --host-of 2=h1 --host-of 3=h1 --host-of 4=h2 --host-of 5=h2 \
  >"$RS/rebuild.txt" || { cat "$RS/rebuild.txt"; fail "RS: rebuild"; }
"$REVIVE" verify "$RS/global/mlapp" --local "$RS/local" --version 4 --json >"$RS/verify.json" || fail "RS: verify"
[ "$(v4 "$RS/verify.json" "len(v['damaged'])==0 and len(v['missing'])==0")" = True ] || { cat "$RS/verify.json"; fail "RS: verify not clean"; }
for f in "$RS"/backup/*/*/v-4/*; do
  rel=${f#"$RS"/backup/}
  cmp -s "$f" "$RS/local/$rel" || fail "RS: rebuilt $rel differs from the original"
done

# Nothing restorable left: verify exits 1.
rm -rf "$T/local"
rm -f "$DIR"/v-*/MANIFEST
if "$REVIVE" verify "$DIR" >"$T/verify6.txt"; then cat "$T/verify6.txt"; fail "verify exited 0 with nothing restorable"; fi
echo "tools_test: ok"
