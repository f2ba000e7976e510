#!/bin/bash
# Test "hosts" on one machine: N network namespaces joined by veth pairs to one bridge in the root
# namespace. Used by tests/hosts, tests/scale and bench/distributed.
#
#   scripts/netns.sh up N     namespaces ${REVIVE_NETNS_PREFIX}1..N (default prefix rvh), addresses
#                             10.77.0.<i+1>/24, bridge ${PREFIX}br0 = 10.77.0.1 (where the coordinator binds)
#   scripts/netns.sh down     removes every namespace, veth and the bridge with that prefix
#   scripts/netns.sh check    exit 0 if namespaces can be made here, else prints why and exits 77
#
# Idempotent: `up` removes leftovers with the same prefix first. The address range can be moved with
# REVIVE_NETNS_NET (default 10.77.0; it must be a /24 nobody else uses on this machine).
set -u
PREFIX=${REVIVE_NETNS_PREFIX:-rvh}
NET=${REVIVE_NETNS_NET:-10.77.0}
BR=${PREFIX}br0

die() { echo "netns.sh: $*" >&2; exit 1; }

check() {
  if [ "$(id -u)" != 0 ]; then echo "netns.sh: needs root (network namespaces, veth, bridge)"; return 77; fi
  command -v ip >/dev/null || { echo "netns.sh: iproute2 'ip' not installed"; return 77; }
  local probe=${PREFIX}probe$$
  if ! ip netns add "$probe" 2>/tmp/netns-probe.$$; then
    echo "netns.sh: cannot create a network namespace: $(cat /tmp/netns-probe.$$)"; rm -f /tmp/netns-probe.$$
    return 77
  fi
  rm -f /tmp/netns-probe.$$
  ip netns del "$probe"
  return 0
}

down() {
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}[0-9]+$"); do
    ip netns del "$ns" 2>/dev/null
  done
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${PREFIX}v[0-9]+$"); do
    ip link del "$l" 2>/dev/null
  done
  ip link del "$BR" 2>/dev/null
  return 0
}

up() {
  local n=$1
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 250 ] || die "up N: N must be 1..250, got '$n'"
  check >/dev/null || { check; exit 77; }
  down
  ip link add "$BR" type bridge || die "cannot create bridge $BR"
  # A bridge takes the lowest MAC address of its ports unless one was set: deleting a "host" (its veth) could
  # change it, and the other hosts' ARP entries for the bridge's address would then point nowhere for tens of
  # seconds (revive run's host-loss test lost hosts that way). Setting its own address keeps it.
  ip link set "$BR" address "$(cat /sys/class/net/"$BR"/address)" || die "cannot fix the address of $BR"
  ip addr add "$NET.1/24" dev "$BR" || die "cannot address $BR"
  ip link set "$BR" up || die "cannot bring $BR up"
  for i in $(seq 1 "$n"); do
    local ns=${PREFIX}$i
    ip netns add "$ns" || die "cannot create namespace $ns"
    ip link add "${PREFIX}v$i" type veth peer name eth0 netns "$ns" || die "cannot create veth for $ns"
    ip link set "${PREFIX}v$i" master "$BR" up || die "cannot attach ${PREFIX}v$i to $BR"
    ip -n "$ns" addr add "$NET.$((i + 1))/24" dev eth0 || die "cannot address eth0 in $ns"
    ip -n "$ns" link set eth0 up || die "cannot bring eth0 up in $ns"
    ip -n "$ns" link set lo up || die "cannot bring lo up in $ns"
  done
  # No ping on these machines: a TCP connect that is refused (or accepted) proves the route works.
  local REACH='import socket,sys
s=socket.socket(); s.settimeout(1)
try: s.connect((sys.argv[1], 9))
except ConnectionRefusedError: pass
except OSError: sys.exit(1)'
  # Wait until every namespace reaches the bridge (veth/bridge ports need a moment to forward).
  for i in $(seq 1 "$n"); do
    local ok=0
    for _ in $(seq 1 50); do
      if ip netns exec "${PREFIX}$i" python3 -c "$REACH" "$NET.1" 2>/dev/null; then ok=1; break; fi
      sleep 0.1
    done
    [ $ok = 1 ] || die "${PREFIX}$i cannot reach $NET.1"
  done
  echo "netns.sh: $n namespaces ${PREFIX}1..${PREFIX}$n, bridge $BR $NET.1"
}

case "${1:-}" in
  up) up "${2:-2}" ;;
  down) down ;;
  check) check; exit $? ;;
  *) echo "usage: netns.sh up N | down | check" >&2; exit 2 ;;
esac
