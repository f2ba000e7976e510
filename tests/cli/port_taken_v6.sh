#!/usr/bin/env bash
# port_taken_v6.sh REVIVE: port_taken_test.sh over an IPv6 address of an interface (fd00::5), not ::1, in a
# network namespace of its own (root: exits 77, skipped, where one cannot be made).
set -euo pipefail
here=$(dirname "$(realpath "$0")")
rv=$(realpath "$1")
if ! unshare -n true 2>/dev/null; then
  echo "SKIP: cannot make a network namespace here (needs root)"
  exit 77
fi
exec unshare -n bash -c 'ip link set lo up && ip -6 addr add fd00::5/128 dev lo nodad &&
  ADDR=fd00::5 exec bash "$0" "$1"' "$here/port_taken_test.sh" "$rv"
