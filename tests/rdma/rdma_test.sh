#!/bin/bash
# Driver for the rdma ctest tests: runs unmodified ibverbs-utils and the softverbs test programs against
# softverbs (LD_LIBRARY_PATH=$SV_LIB) and asserts on exit codes and output.
#   rdma_test.sh pingpong NAME UTIL [ARGS...]   server + client on this host
#   rdma_test.sh netns NAME [ARGS...]           ibv_rc_pingpong, server and client in two network namespaces
#   rdma_test.sh prog NAME PROGRAM [ARGS...]    one test program
#   rdma_test.sh ids NAME SV_IDS                identifiers differ between processes/runs
#   rdma_test.sh devinfo NAME                   ibv_devices / ibv_devinfo
# Environment: SV_LIB (directory holding our libibverbs.so.1), SV_WORK (scratch directory).
# Exit 77 = skipped (with the reason on stdout).
set -u
mode=$1 name=$2
shift 2
: "${SV_LIB:?}" "${SV_WORK:?}"
W=$SV_WORK/$name
rm -rf "$W"
mkdir -p "$W/reg"
export LD_LIBRARY_PATH=$SV_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SOFTVERBS_DIR=$W/reg # private LID registry: tests running in parallel do not see each other

fail() {
	echo "FAIL: $*"
	for f in "$W"/*.out; do
		[ -f "$f" ] && { echo "----- $f"; cat "$f"; }
	done
	exit 1
}

need_util() {
	command -v "$1" >/dev/null 2>&1 && return 0
	echo "SKIP: $1 not installed (apt-get install -y ibverbs-utils)"
	exit 77
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])' 2>/dev/null ||
		echo $((20000 + RANDOM % 30000))
}

# wait until something listens on TCP port $1 (optionally inside netns $2)
wait_listen() {
	local i
	if ! command -v ss >/dev/null 2>&1; then
		sleep 1 # no ss(8): give the server time to listen
		return 0
	fi
	for i in $(seq 200); do
		if [ -n "${2:-}" ]; then
			ip netns exec "$2" ss -Htln "sport = :$1" 2>/dev/null | grep -q . && return 0
		else
			ss -Htln "sport = :$1" 2>/dev/null | grep -q . && return 0
		fi
		sleep 0.05
	done
	return 1
}

# both sides must exit 0 and print the result lines; the exchanged addresses must match
check_pair() {
	local srv=$1 cli=$2 s
	for s in "$srv" "$cli"; do
		grep -Eq '^[0-9]+ bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec$' "$s" || fail "no 'bytes in ... seconds' line in $s"
		grep -Eq '^[0-9]+ iters in [0-9.]+ seconds = [0-9.]+ usec/iter$' "$s" || fail "no 'iters in' line in $s"
	done
	# the server's remote address is the client's local address and vice versa
	local sl cl sr cr
	sl=$(grep -m1 'local address' "$srv" | grep -o 'LID 0x[0-9a-f]*, QPN 0x[0-9a-f]*')
	cl=$(grep -m1 'local address' "$cli" | grep -o 'LID 0x[0-9a-f]*, QPN 0x[0-9a-f]*')
	sr=$(grep -m1 'remote address' "$srv" | grep -o 'LID 0x[0-9a-f]*, QPN 0x[0-9a-f]*')
	cr=$(grep -m1 'remote address' "$cli" | grep -o 'LID 0x[0-9a-f]*, QPN 0x[0-9a-f]*')
	[ -n "$sl" ] && [ "$sl" = "$cr" ] && [ "$cl" = "$sr" ] || fail "address exchange mismatch: '$sl' '$cr' / '$cl' '$sr'"
	[ "$sl" != "$cl" ] || fail "server and client report the same LID/QPN: $sl"
	grep -h -E 'address|bytes in|iters in' "$srv" | sed 's/^/server: /'
	grep -h -E 'address|bytes in|iters in' "$cli" | sed 's/^/client: /'
}

# run_pair NETNS_SERVER NETNS_CLIENT SERVER_ADDR UTIL ARGS...  (empty netns = this one)
run_pair() {
	local nss=$1 nsc=$2 addr=$3 util=$4
	shift 4
	local try port spid src crc
	local -a xs=() xc=()
	[ -n "$nss" ] && xs=(ip netns exec "$nss")
	[ -n "$nsc" ] && xc=(ip netns exec "$nsc")
	for try in 1 2 3; do
		port=$(free_port)
		"${xs[@]}" env LD_LIBRARY_PATH="$LD_LIBRARY_PATH" SOFTVERBS_DIR="$SOFTVERBS_DIR" \
			timeout 25 "$util" -p "$port" "$@" >"$W/server.out" 2>&1 &
		spid=$!
		if ! wait_listen "$port" "$nss"; then
			kill "$spid" 2>/dev/null
			wait "$spid" 2>/dev/null
			grep -q "Couldn't listen" "$W/server.out" && continue
			fail "$util server never listened on port $port"
		fi
		"${xc[@]}" env LD_LIBRARY_PATH="$LD_LIBRARY_PATH" SOFTVERBS_DIR="$SOFTVERBS_DIR" \
			timeout 25 "$util" -p "$port" "$@" "$addr" >"$W/client.out" 2>&1
		crc=$?
		wait "$spid"
		src=$?
		[ "$src" = 0 ] && [ "$crc" = 0 ] || fail "$util $*: server exit $src, client exit $crc"
		check_pair "$W/server.out" "$W/client.out"
		return 0
	done
	fail "could not find a free port"
}

case $mode in
pingpong)
	util=$1
	shift
	need_util "$util"
	run_pair "" "" 127.0.0.1 "$util" "$@"
	case " $* " in
	*" -t "*) # completion timestamps through ibv_create_cq_ex / ibv_wc_read_completion_ts
		grep -q '^Average receive completion clock cycles = ' "$W/client.out" || fail "no timestamp statistics" ;;
	esac
	echo "PASS: $util $*"
	;;
netns)
	need_util ibv_rc_pingpong
	if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
		echo "SKIP: 'ip netns' is not available (needs root and iproute2)"
		exit 77
	fi
	tag=$$$RANDOM
	tag=${tag: -6}
	A=svA$tag B=svB$tag
	net=10.$((200 + RANDOM % 50)).$((RANDOM % 250))
	if ! ip netns add "$A" 2>"$W/netns.out" || ! ip netns add "$B" 2>>"$W/netns.out"; then
		ip netns del "$A" 2>/dev/null
		echo "SKIP: cannot create network namespaces: $(cat "$W/netns.out")"
		exit 77
	fi
	cleanup() { ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null; }
	trap cleanup EXIT
	trap 'exit 1' INT TERM
	ip link add "va$tag" type veth peer name "vb$tag" || fail "veth"
	ip link set "va$tag" netns "$A" && ip link set "vb$tag" netns "$B" || fail "moving veth"
	ip -n "$A" addr add "$net.1/24" dev "va$tag" && ip -n "$B" addr add "$net.2/24" dev "vb$tag" || fail "addresses"
	for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
	ip -n "$A" link set "va$tag" up && ip -n "$B" link set "vb$tag" up || fail "link up"
	echo "namespaces $A ($net.1) and $B ($net.2)"
	# by LID (registry entry carries the namespace's address) and by GID (address encoded in the GID)
	run_pair "$A" "$B" "$net.1" ibv_rc_pingpong "$@"
	run_pair "$A" "$B" "$net.1" ibv_rc_pingpong -g 0 -e "$@"
	grep -q "GID fe80::" "$W/server.out" || fail "no GID in the -g run"
	echo "PASS: ibv_rc_pingpong across network namespaces (LID and GID addressing)"
	;;
prog)
	prog=$1
	shift
	timeout 50 "$prog" "$@" >"$W/prog.out" 2>&1
	rc=$?
	cat "$W/prog.out"
	[ "$rc" = 0 ] || fail "$(basename "$prog") exited $rc"
	grep -q PASS "$W/prog.out" || fail "no PASS line"
	;;
ids)
	ids=$1
	unset SOFTVERBS_DIR # the default registry, /tmp/softverbs
	# two processes at the same time (two devices open at once), then two more, one after the other
	"$ids" 600 >"$W/ids1.out" 2>&1 &
	p1=$!
	"$ids" 600 >"$W/ids2.out" 2>&1 &
	p2=$!
	wait $p1 || fail "sv_ids failed"
	wait $p2 || fail "sv_ids failed"
	"$ids" >"$W/ids3.out" 2>&1 || fail "sv_ids failed"
	"$ids" >"$W/ids4.out" 2>&1 || fail "sv_ids failed"
	cat "$W"/ids?.out
	for field in guid lid qpn lkey rkey gid; do
		vals=$(cat "$W"/ids?.out | grep -o "$field=[^ ]*" | sort)
		[ "$(echo "$vals" | wc -l)" = 4 ] || fail "missing $field values"
		[ "$(echo "$vals" | uniq | wc -l)" = 4 ] || fail "$field repeats between runs: $(echo "$vals" | tr '\n' ' ')"
	done
	echo "PASS: guid, lid, qpn, lkey, rkey and gid differ between 4 processes (2 concurrent, 2 sequential)"
	;;
devinfo)
	need_util ibv_devinfo
	ibv_devices >"$W/devices.out" 2>&1 || fail "ibv_devices failed"
	grep -q softverbs_0 "$W/devices.out" || fail "ibv_devices does not list softverbs_0"
	ibv_devinfo -v >"$W/devinfo.out" 2>&1 || fail "ibv_devinfo failed"
	for want in 'hca_id:.*softverbs_0' 'state:.*PORT_ACTIVE' 'link_layer:.*InfiniBand' 'active_mtu:.*4096' \
		'port_lid:' 'GID\[  0\]:.*fe80:'; do
		grep -Eq "$want" "$W/devinfo.out" || fail "ibv_devinfo output lacks /$want/"
	done
	grep -E 'hca_id|node_guid|state:|port_lid|link_layer|GID' "$W/devinfo.out"
	echo "PASS: ibv_devices and ibv_devinfo"
	;;
*)
	echo "unknown mode $mode"
	exit 2
	;;
esac
