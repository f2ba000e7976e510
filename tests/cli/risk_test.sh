#!/usr/bin/env bash
# `revive risk`: P_cf and Daly/Young intervals with good input (values from core/resilience, checked
# against hand-computed ones in tests/core/resilience_test.cc), and bad input → exit 2 with a message
# naming the option.
set -u
revive=$1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Daly for δ = 60 s, M = 24 h: 3180.06 s; Young 3219.94 s.
out=$("$revive" risk --interval --ckpt-cost 60 --mtbf 86400) || fail "interval: exit $?"
grep -q 'Daly (higher order): 3180.06 s' <<<"$out" || fail "interval text: $out"
grep -q 'Young (first order): 3219.94 s' <<<"$out" || fail "interval text: $out"
out=$("$revive" risk --interval --ckpt-cost 300 --mtbf 100 --json) || fail "interval json: exit $?"
python3 - "$out" <<'PY' || fail "interval json: $out"
import json, sys
j = json.loads(sys.argv[1])
assert j["daly_s"] == 100 and j["daly_is_mtbf"] is True, j
PY

# No t-awareness: P_cf = Σ (1 − e^{−λ_j}); node-level awareness lowers it; rack too, further.
none=$("$revive" risk --group-size 20 --level rack:40:0.01 --level node:1400:0.5 --json) || fail "none: exit $?"
node=$("$revive" risk --group-size 20 --level rack:40:0.01 --level node:1400:0.5 --aware-up-to node --json) ||
  fail "node: exit $?"
rack=$("$revive" risk --group-size 20 --level rack:40:0.01 --level node:1400:0.5 --aware-up-to rack --json) ||
  fail "rack: exit $?"
python3 - "$none" "$node" "$rack" <<'PY' || fail "p_cf json"
import json, math, sys
none, node, rack = (json.loads(a) for a in sys.argv[1:])
want = (1 - math.exp(-0.01)) + (1 - math.exp(-0.5))
assert abs(none["p_cf"] - want) < 1e-12, (none["p_cf"], want)
assert [l["name"] for l in none["levels"]] == ["rack", "node"], none   # outermost first, as given
assert node["levels"][1]["aware"] and not node["levels"][0]["aware"], node
assert none["p_cf"] > node["p_cf"] > rack["p_cf"] > 0, (none["p_cf"], node["p_cf"], rack["p_cf"])
PY
out=$("$revive" risk --group-size 20 --level node:1400:0.5 --period-days 7) || fail "text: exit $?"
grep -q '^P_cf per 7 days: ' <<<"$out" || fail "text: $out"

# Bad input: exit 2, the message names the option.
bad() {  # expected-word args...
  local want=$1
  shift
  local err
  err=$("$revive" risk "$@" 2>&1 >/dev/null)
  local rc=$?
  [ "$rc" = 2 ] || fail "risk $*: exit $rc, want 2"
  grep -q -- "$want" <<<"$err" || fail "risk $*: message '$err' does not name $want"
}
bad --group-size --group-size 1 --level node:10:1
bad --group-size --group-size abc --level node:10:1
bad --group-size --level node:10:1
bad "--level node" --group-size 4 --level node:10:-0.5
bad "--level node" --group-size 4 --level node:ten:1
bad --level --group-size 4 --level node10
bad --level --group-size 4 --level node:10:1 --level node:5:1
bad --aware-up-to --group-size 4 --level node:10:1 --aware-up-to rack
bad --aware-up-to --group-size 4 --level rack:2:1 --level node:10:1 --aware-up-to rack
bad --parity --group-size 4 --parity 0 --level node:10:1
bad --period-days --group-size 4 --level node:10:1 --period-days -1
bad --ckpt-cost --interval --ckpt-cost -1 --mtbf 3
bad --ckpt-cost --interval --mtbf 3
bad --mtbf --interval --ckpt-cost 1 --mtbf 0
bad --interval --interval --ckpt-cost 1 --mtbf 3 --level node:10:1

if [ "$fails" = 0 ]; then echo "risk_test: all passed"; else echo "risk_test: $fails failed"; exit 1; fi
