#!/usr/bin/env bash
# A private Slurm for one test: slurm_env.sh DIR -- COMMAND...
# Starts munged (its own key and socket), slurmctld and a slurmd per node (as root) with state, spool, logs and
# config under DIR and ports nobody else uses, waits until `sinfo` shows the nodes idle, runs COMMAND with
# SLURM_CONF pointing at that cluster, then stops exactly the daemons it started and exits with COMMAND's
# status. Exit 77 (a skip) only when Slurm or munge is not installed and scripts/deps.sh cannot install
# it, or when not root; any other failure to start is an error (exit 1) with the daemons' logs.
#
# cred_expire (AuthInfo) is also how long a requeued job waits before it may start again: 120 s by
# default, 5 s here (SLURM_ENV_CRED_EXPIRE) so a requeue test stays short.
#
# SLURM_ENV_NODES nodes (default 2), all on this host: one slurmd each (`slurmd -N NAME`), each with its
# own port (NodeName ... Port=), spool, pid and log file (%n), named rv<pid>n1, rv<pid>n2, ... so Slurm
# shows them compressed (rv123n[1-2]) as a real cluster's would be. CPUs=2 each, oversubscribed.
set -u
DIR=${1:?usage: slurm_env.sh DIR -- COMMAND...}
shift
[ "${1:-}" = "--" ] && shift
HERE=$(cd "$(dirname "$0")" && pwd)

skip() { echo "slurm_env: SKIP: $*" >&2; exit 77; }
die() { echo "slurm_env: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root (slurmd runs jobs as their users; munged's key)"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  bash "$HERE/../../scripts/deps.sh" >&2 || true
  command -v slurmctld >/dev/null && command -v munged >/dev/null ||
    skip "slurm-wlm/munge are not installed and scripts/deps.sh could not install them"
fi

rm -rf "$DIR"
mkdir -p "$DIR"/{state,spool,log,munge}
DIR=$(cd "$DIR" && pwd)
NODES=${SLURM_ENV_NODES:-2}
PREFIX=rv$$n
NODE_LIST=$(seq -f "$PREFIX%g" -s, 1 "$NODES")
PIDS=()

stop() {
  # Jobs first, while slurmd can still end them (their processes are children of slurmstepd, which slurmd
  # started for us): the cluster is ours, so every job in it is the test's.
  if [ -n "${SLURM_CONF:-}" ] && [ -n "$(timeout 3 squeue -h -o %i 2>/dev/null)" ]; then
    timeout 3 scancel --full $(timeout 3 squeue -h -o %i) 2>/dev/null
    for _ in $(seq 50); do [ -z "$(timeout 3 squeue -h -t R,CG -o %i 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  # Our daemons only, by the pids we started; slurmctld/slurmd first (they use munge), then munged.
  local i
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -TERM "${PIDS[i]}" 2>/dev/null; done
  for _ in $(seq 50); do
    local alive=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
}
trap stop EXIT
trap 'exit 143' TERM INT

# Ports: free ones the kernel picks (bound and released; Slurm binds them a moment later).
read -r CTLD_PORT SLURMD_PORTS < <(python3 -c '
import socket, sys
s=[socket.socket() for _ in range(1 + int(sys.argv[1]))]
for x in s: x.bind(("127.0.0.1",0))
print(s[0].getsockname()[1], ",".join(str(x.getsockname()[1]) for x in s[1:]))' "$NODES")

# munge: a key of our own and our own socket, so no other munged (or test) is involved. munged refuses
# to run as root without --force; the key must be private to its owner.
dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
chmod 711 "$DIR/munge"  # clients reach the socket through it
chmod 400 "$DIR/munge/munge.key"
MUNGE_SOCK=$DIR/munge/munge.socket
munged --force -F --socket="$MUNGE_SOCK" --key-file="$DIR/munge/munge.key" --log-file="$DIR/log/munged.log" \
  --pid-file="$DIR/munge/munged.pid" --seed-file="$DIR/munge/seed" >"$DIR/log/munged.out" 2>&1 &
PIDS+=($!)

CPUS=2
cat >"$DIR/slurm.conf" <<CONF
ClusterName=rv$$
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK,cred_expire=${SLURM_ENV_CRED_EXPIRE:-5}
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
KillWait=2
MessageTimeout=5
SlurmctldTimeout=10
SlurmdTimeout=30
BatchStartTimeout=2
InactiveLimit=0
MinJobAge=60
JobRequeue=1
$(i=0; for p in ${SLURMD_PORTS//,/ }; do
  i=$((i + 1))
  echo "NodeName=$PREFIX$i NodeAddr=127.0.0.1 NodeHostname=$PREFIX$i Port=$p CPUs=$CPUS State=UNKNOWN"
done)
PartitionName=rv Nodes=$NODE_LIST Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF=$DIR/slurm.conf
for _ in $(seq 50); do [ -S "$MUNGE_SOCK" ] && break; sleep 0.1; done
[ -S "$MUNGE_SOCK" ] || { cat "$DIR/log/munged.out" "$DIR/log/munged.log" >&2; die "munged did not start"; }

slurmctld -D -i -f "$SLURM_CONF" >"$DIR/log/slurmctld.out" 2>&1 &
PIDS+=($!)
for n in ${NODE_LIST//,/ }; do
  slurmd -D -N "$n" -f "$SLURM_CONF" >"$DIR/log/slurmd-$n.out" 2>&1 &
  PIDS+=($!)
done

t0=$(date +%s.%N)
state=""
end=$((SECONDS + 30))
while ((SECONDS < end)); do
  state=$(timeout 2 sinfo -h -n "$NODE_LIST" -o %t 2>/dev/null | sort -u | tr '\n' ' ' | sed 's/ $//')
  [ "$state" = idle ] && break
  for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null || { state="a daemon (pid $p) exited"; break 2; }; done
  sleep 0.1
done
if [ "$state" != idle ]; then
  for f in "$DIR"/log/*; do echo "== $f" >&2; tail -20 "$f" >&2; done
  die "nodes $NODE_LIST are not idle after 30 s (state '$state')"
fi
echo "slurm_env: nodes $NODE_LIST idle after $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s (ctld port $CTLD_PORT, slurmd ports $SLURMD_PORTS)" >&2
export SLURM_ENV_DIR=$DIR SLURM_ENV_NODES=$NODE_LIST
"$@"
