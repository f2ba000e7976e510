#!/usr/bin/env bash
# same_result.sh CMD_A... -- CMD_B...   Passes when both commands succeed and print the same stdout
# (e.g. heat2d on 1 and on 2 ranks: the field must not depend on the decomposition).
set -uo pipefail
a=(); while (($#)) && [[ $1 != -- ]]; do a+=("$1"); shift; done; shift
out_a=$("${a[@]}") || { echo "first command failed"; exit 1; }
out_b=$("$@") || { echo "second command failed"; exit 1; }
echo "$out_a"
[[ -n $out_a && $out_a == "$out_b" ]] || { echo "outputs differ:"; echo "$out_b"; exit 1; }
