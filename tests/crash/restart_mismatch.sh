#!/usr/bin/env bash
# restart_mismatch.sh WORKDIR REGEX FIRST_CMD... -- SECOND_CMD...
#   Runs FIRST_CMD (which writes checkpoints into WORKDIR), then SECOND_CMD, a restart with an incompatible
#   configuration. Passes only if SECOND_CMD fails (non-zero, no crash signal) and its stderr matches REGEX
#   (the message must name the checkpoint and the reason). Commands may use @DIR@ for WORKDIR.
set -uo pipefail
work=$1; regex=$2; shift 2
first=(); while (($#)) && [[ $1 != -- ]]; do first+=("${1//@DIR@/$work}"); shift; done; shift
second=(); for a in "$@"; do second+=("${a//@DIR@/$work}"); done
rm -rf "$work"; mkdir -p "$work"
"${first[@]}" >/dev/null 2>"$work/first.err" || { echo "first run failed:"; cat "$work/first.err"; exit 1; }
"${second[@]}" >/dev/null 2>"$work/second.err"; st=$?
cat "$work/second.err"
((st != 0)) || { echo "the incompatible restart succeeded"; exit 1; }
((st < 128)) || { echo "the incompatible restart crashed (status $st)"; exit 1; }
grep -Eq "$regex" "$work/second.err" || { echo "message does not match: $regex"; exit 1; }
rm -rf "$work"
