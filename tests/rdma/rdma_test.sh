#!/bin/bash
# Driver for the rdma ctest tests: runs unmodified ibverbs-utils and the softverbs test programs against
# softverbs (LD_LIBRARY_PATH=$SV_LIB) and asserts on exit codes and output.
#   rdma_test.sh pingpong NAME UTIL [ARGS...]   server + client on this host
#   rdma_test.sh netns NAME [ARGS...]           ibv_rc_pingpong, server and client in two network namespaces
#   rdma_test.sh prog NAME PROGRAM [ARGS...]    one test program
#   rdma_test.sh ids NAME SV_IDS                identifiers differ between processes/runs/daemons
#   rdma_test.sh devinfo NAME                   ibv_devices / ibv_devinfo
#   rdma_test.sh kill NAME SV_KILL              a program killed mid-transfer: peer error, daemon cleanup
# Each test has its own daemon (softverbsd, the "HCA") per network namespace, with its socket and the LID
# registry in a private directory ($SOFTVERBS_DIR), so tests running in parallel never share one. The
# daemon is started explicitly (--foreground) and must hold no objects once the programs are gone;
# the ids test lets the library start daemons on demand instead.
# Environment: SV_LIB (directory holding our libibverbs.so.1), SV_DAEMON (softverbsd), SV_WORK (scratch
# directory). Exit 77 = skipped (with the reason on stdout).
set -u
mode=$1 name=$2
shift 2
: "${SV_LIB:?}" "${SV_WORK:?}"
W=$SV_WORK/$name
rm -rf "$W"
mkdir -p "$W/reg"
export LD_LIBRARY_PATH=$SV_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SOFTVERBS_DIR=$W/reg # private daemon sockets and LID registry: parallel tests do not see each other
SVD=${SV_DAEMON:-$SV_LIB/softverbsd}
export SOFTVERBSD_IDLE_S=${SOFTVERBSD_IDLE_S:-5} # a daemon started on demand does not outlive the test long
daemons=()
DSOCK=

# start_daemon [NETNS]: this test's daemon (in NETNS); its socket path in $DSOCK
start_daemon() {
	local ns=${1:-} i
	local -a x=()
	[ -n "$ns" ] && x=(ip netns exec "$ns")
	DSOCK=$("${x[@]}" "$SVD" --socket-path) || fail "softverbsd --socket-path"
	"${x[@]}" "$SVD" --foreground --idle 0 >"$W/daemon${ns:+-$ns}.out" 2>&1 &
	daemons+=($!)
	for i in $(seq 200); do
		"$SVD" --stats "$DSOCK" >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	fail "softverbsd did not start (socket $DSOCK)"
}

# the daemon at socket $1 holds nothing once its programs are gone (cleanup on close and on death)
check_clean() {
	local i st
	for i in $(seq 40); do
		st=$("$SVD" --stats "$1" 2>&1)
		grep -q '^clients 0$' <<<"$st" && grep -q '^objects 0$' <<<"$st" && return 0
		sleep 0.05
	done
	fail "daemon $1 still holds objects: $(echo $st)"
}

# a process that runs (a zombie whose parent has not reaped it yet does not)
alive() {
	local s
	s=$(ps -o stat= -p "$1" 2>/dev/null)
	[ -n "$s" ] && [ "${s#Z}" = "$s" ]
}

stop_daemons() {
	local p
	for p in "${daemons[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	daemons=()
}
trap stop_daemons EXIT

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
	start_daemon
	run_pair "" "" 127.0.0.1 "$util" "$@"
	check_clean "$DSOCK"
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
	cleanup() {
		stop_daemons
		ip netns del "$A" 2>/dev/null
		ip netns del "$B" 2>/dev/null
	}
	trap cleanup EXIT
	trap 'exit 1' INT TERM
	ip link add "va$tag" type veth peer name "vb$tag" || fail "veth"
	ip link set "va$tag" netns "$A" && ip link set "vb$tag" netns "$B" || fail "moving veth"
	ip -n "$A" addr add "$net.1/24" dev "va$tag" && ip -n "$B" addr add "$net.2/24" dev "vb$tag" || fail "addresses"
	for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
	ip -n "$A" link set "va$tag" up && ip -n "$B" link set "vb$tag" up || fail "link up"
	echo "namespaces $A ($net.1) and $B ($net.2)"
	start_daemon "$A" # one daemon ("host") per namespace
	SA=$DSOCK
	start_daemon "$B"
	SB=$DSOCK
	[ "$SA" != "$SB" ] || fail "both namespaces got the daemon socket $SA"
	# by LID (registry entry carries the namespace's address) and by GID (address encoded in the GID)
	run_pair "$A" "$B" "$net.1" ibv_rc_pingpong "$@"
	run_pair "$A" "$B" "$net.1" ibv_rc_pingpong -g 0 -e "$@"
	grep -q "GID fe80::" "$W/server.out" || fail "no GID in the -g run"
	check_clean "$SA"
	check_clean "$SB"
	echo "PASS: ibv_rc_pingpong across network namespaces (LID and GID addressing)"
	;;
prog)
	prog=$1
	shift
	start_daemon
	timeout 50 "$prog" "$@" >"$W/prog.out" 2>&1
	rc=$?
	cat "$W/prog.out"
	[ "$rc" = 0 ] || fail "$(basename "$prog") exited $rc"
	grep -q PASS "$W/prog.out" || fail "no PASS line"
	check_clean "$DSOCK"
	;;
kill)
	prog=$1
	start_daemon
	timeout 50 "$prog" "$SVD" "$DSOCK" >"$W/prog.out" 2>&1
	rc=$?
	cat "$W/prog.out"
	[ "$rc" = 0 ] || fail "$(basename "$prog") exited $rc"
	grep -q PASS "$W/prog.out" || fail "no PASS line"
	check_clean "$DSOCK"
	echo "PASS: killed program's objects destroyed by the daemon, its peer got an error completion"
	;;
ids)
	# Daemons started on demand by the library (no daemon yet: the first device open starts one).
	# Runs 1 and 2 at the same time and run 3 after them use one daemon (one "host"): node GUID, LID
	# and GID are the host's and stay; QP numbers and keys are new for every run. Run 4 comes after
	# that daemon exited (idle): a new "host boot", so GUID, LID and GID change too.
	ids=$1
	export SOFTVERBSD_IDLE_S=1
	sock=$("$SVD" --socket-path)
	[ ! -e "$sock" ] || fail "a daemon socket exists already: $sock"
	"$ids" 600 >"$W/ids1.out" 2>&1 &
	p1=$!
	"$ids" 600 >"$W/ids2.out" 2>&1 &
	p2=$!
	wait $p1 || fail "sv_ids failed"
	wait $p2 || fail "sv_ids failed"
	st=$("$SVD" --stats "$sock") || fail "no daemon at $sock after run 1"
	dpid=$(sed -n 's/^pid //p' <<<"$st")
	[ -n "$dpid" ] && [ "$(ps -o ppid= -p "$dpid" | tr -d ' ')" != "$$" ] || fail "the daemon is a child of the test"
	[ "$(ps -o sid= -p "$dpid" | tr -d ' ')" != "$(ps -o sid= -p $$ | tr -d ' ')" ] ||
		fail "the daemon is in the session of the program that started it"
	"$ids" >"$W/ids3.out" 2>&1 || fail "sv_ids failed"
	for i in $(seq 100); do # the daemon exits when idle for SOFTVERBSD_IDLE_S
		[ -e "$sock" ] || alive "$dpid" || break
		sleep 0.05
	done
	[ ! -e "$sock" ] || fail "the idle daemon did not remove its socket"
	alive "$dpid" && fail "the idle daemon $dpid still runs"
	"$ids" >"$W/ids4.out" 2>&1 || fail "sv_ids failed"
	cat "$W"/ids?.out
	for field in qpn lkey rkey; do
		vals=$(cat "$W"/ids?.out | grep -o "$field=[^ ]*" | sort)
		[ "$(echo "$vals" | wc -l)" = 4 ] || fail "missing $field values"
		[ "$(echo "$vals" | uniq | wc -l)" = 4 ] || fail "$field repeats between runs: $(echo "$vals" | tr '\n' ' ')"
	done
	for field in guid lid gid; do
		v1=$(grep -o "$field=[^ ]*" "$W/ids1.out")
		v2=$(grep -o "$field=[^ ]*" "$W/ids2.out")
		v3=$(grep -o "$field=[^ ]*" "$W/ids3.out")
		v4=$(grep -o "$field=[^ ]*" "$W/ids4.out")
		[ -n "$v1" ] && [ "$v1" = "$v2" ] && [ "$v1" = "$v3" ] || fail "$field differs within one daemon: $v1 $v2 $v3"
		[ -n "$v4" ] && [ "$v4" != "$v1" ] || fail "$field did not change with a new daemon: $v1 $v4"
	done
	for i in $(seq 100); do
		[ -e "$sock" ] || break
		sleep 0.05
	done
	echo "PASS: qpn, lkey and rkey differ between 4 runs (2 concurrent, 2 sequential); guid, lid and gid are"
	echo "      the daemon's (the host's): equal for runs 1-3 on one daemon, new with a new daemon (run 4)"
	;;
devinfo)
	need_util ibv_devinfo
	start_daemon
	ibv_devices >"$W/devices.out" 2>&1 || fail "ibv_devices failed"
	grep -q softverbs_0 "$W/devices.out" || fail "ibv_devices does not list softverbs_0"
	ibv_devinfo -v >"$W/devinfo.out" 2>&1 || fail "ibv_devinfo failed"
	for want in 'hca_id:.*softverbs_0' 'state:.*PORT_ACTIVE' 'link_layer:.*InfiniBand' 'active_mtu:.*4096' \
		'port_lid:' 'GID\[  0\]:.*fe80:'; do
		grep -Eq "$want" "$W/devinfo.out" || fail "ibv_devinfo output lacks /$want/"
	done
	grep -E 'hca_id|node_guid|state:|port_lid|link_layer|GID' "$W/devinfo.out"
	check_clean "$DSOCK"
	echo "PASS: ibv_devices and ibv_devinfo"
	;;
*)
	echo "unknown mode $mode"
	exit 2
	;;
esac
