#!/usr/bin/env bash
# A single-host Slurm for `cotenant sweep --emit slurm` (docs/sweep.md) and the
# sweep_slurm test: Debian's slurm-wlm (slurmctld + slurmd) and munge on this machine.
#
#   scripts/slurm-local.sh          install if absent, configure, start, wait until the node is idle
#   scripts/slurm-local.sh stop     stop slurmd, slurmctld and munged (the ones this script started)
#   scripts/slurm-local.sh status   print sinfo
#
# Runs as root (SlurmUser=root, no systemd needed: the daemons are started directly and
# their pid files kept under /run). Idempotent: a second start finds the daemons running
# and only waits for the node; a changed slurm.conf restarts them. The node gets the
# machine's CPU count (override with SLURM_LOCAL_CPUS=N: array tasks of one CPU each then
# run N at a time) and a partition `local`, the default. Logs: /var/log/slurm/.
set -Eeuo pipefail
trap 'status=$?; echo "error: ${BASH_SOURCE[0]} line $LINENO: \`$BASH_COMMAND\` failed (exit $status)" >&2' ERR

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
RUN=/run/cotenant-slurm
HOST=$(hostname -s)
CPUS=${SLURM_LOCAL_CPUS:-$(nproc)}
WAIT_S=${SLURM_LOCAL_WAIT_S:-60}

say() { echo "slurm-local: $*"; }

need_root() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "error: scripts/slurm-local.sh installs packages and starts daemons: run it as root" >&2
    exit 1
  fi
}

# running NAME: whether the pid in $RUN/NAME.pid is alive.
running() {
  local pidfile=$RUN/$1.pid
  [[ -s $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

# stop_daemon NAME: sends TERM to the pid this script recorded, waits up to 10 s.
stop_daemon() {
  local name=$1 pid
  if running "$name"; then
    pid=$(cat "$RUN/$name.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    say "stopped $name (pid $pid)"
  fi
  rm -f "$RUN/$name.pid"
}

install() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
    && command -v sbatch >/dev/null; then
    return
  fi
  say "installing slurm-wlm and munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null
}

write_conf() {
  mkdir -p "$CONF_DIR" /var/spool/slurmctld /var/spool/slurmd /var/log/slurm "$RUN"
  local new
  new=$(cat <<CONF
# Written by cotenant's scripts/slurm-local.sh: one node, this host, root.
ClusterName=cotenant-local
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
ReturnToService=2
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MaxArraySize=100001
MaxJobCount=200000
MinJobAge=60
InactiveLimit=0
KillWait=10
Waittime=0
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
)
  if [[ -f $CONF ]] && [[ $(cat "$CONF") == "$new" ]]; then
    return 1
  fi
  printf '%s\n' "$new" >"$CONF"
  say "wrote $CONF ($HOST, $CPUS CPUs)"
  return 0
}

start_munge() {
  if [[ ! -s /etc/munge/munge.key ]]; then
    say "creating /etc/munge/munge.key"
    if command -v mungekey >/dev/null; then
      mungekey --create --force >/dev/null
    else
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
  fi
  # munged refuses keys and directories that others can read or write.
  chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge 2>/dev/null || true
  chmod 0700 /etc/munge
  chmod 0400 /etc/munge/munge.key
  mkdir -p /run/munge
  chown munge:munge /run/munge
  chmod 0755 /run/munge
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    return
  fi
  rm -f /run/munge/munge.socket.2 /run/munge/munged.pid
  runuser -u munge -- munged --pid-file=/run/munge/munged.pid
  cp /run/munge/munged.pid "$RUN/munged.pid"
  say "started munged (pid $(cat "$RUN/munged.pid"))"
}

start() {
  need_root
  install
  mkdir -p "$RUN"
  local changed=0
  write_conf && changed=1
  start_munge
  if [[ $changed -eq 1 ]]; then
    stop_daemon slurmd
    stop_daemon slurmctld
  fi
  if ! running slurmctld; then
    # -i: ignore state left by an earlier configuration of this throwaway cluster.
    slurmctld -i
    for _ in $(seq 50); do running slurmctld && break; sleep 0.2; done
    running slurmctld || { echo "error: slurmctld did not start; see /var/log/slurm/slurmctld.log" >&2; tail -5 /var/log/slurm/slurmctld.log >&2 || true; exit 1; }
    say "started slurmctld (pid $(cat "$RUN/slurmctld.pid"))"
  fi
  if ! running slurmd; then
    slurmd
    for _ in $(seq 50); do running slurmd && break; sleep 0.2; done
    running slurmd || { echo "error: slurmd did not start; see /var/log/slurm/slurmd.log" >&2; tail -5 /var/log/slurm/slurmd.log >&2 || true; exit 1; }
    say "started slurmd (pid $(cat "$RUN/slurmd.pid"))"
  fi
  local state="" waited=0
  while ((waited < WAIT_S * 2)); do
    state=$(sinfo -h -n "$HOST" -o '%T' 2>/dev/null | head -1 || true)
    case $state in
      idle|mixed|allocated) say "node $HOST is $state ($CPUS CPUs); partition local"; sinfo; return 0 ;;
      down*|drain*|fail*) scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
    waited=$((waited + 1))
  done
  echo "error: node $HOST not idle after ${WAIT_S} s (state: ${state:-no answer}); see /var/log/slurm/" >&2
  exit 1
}

stop() {
  need_root
  stop_daemon slurmd
  stop_daemon slurmctld
  stop_daemon munged
}

case ${1:-start} in
  start) start ;;
  stop) stop ;;
  status) sinfo ;;
  *) echo "usage: scripts/slurm-local.sh [start|stop|status]" >&2; exit 2 ;;
esac
