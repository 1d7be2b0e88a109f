#!/usr/bin/env bash
# A real single-node Slurm (Debian's slurm-wlm) with accounting, for the Slurm tests.
#
#   bash scripts/local_slurm.sh start   # idempotent; prints "LOCAL SLURM READY" when usable
#   bash scripts/local_slurm.sh stop    # stops only the daemons this script started (PID files)
#   bash scripts/local_slurm.sh status
#
# Runs as root, without systemd. Knobs (environment):
#   LOCAL_SLURM_STATE   state, logs, DB, PID files       (default /var/tmp/scalelab-slurm)
#   LOCAL_SLURM_CPUS    CPUs the node advertises; may exceed the real count (default: nproc)
#   LOCAL_SLURM_WAIT    seconds to wait for the node to turn idle          (default 90)
#
# Facts this relies on (found on these machines):
# - sacct needs slurmdbd (+ MariaDB); without it submitit never sees CANCELLED/killed jobs.
# - AuthInfo=cred_expire=5 + sched_interval=2: a requeued job reruns in seconds, not 120 s.
# - preempt_send_user_signal: partition preemption sends the job's --signal (submitit's
#   USR2), so Checkpointable jobs checkpoint and requeue instead of being SIGTERM'd.
# - empty "Key=" values are fatal; slurmdbd.conf must be 0600 and owned by SlurmUser.
set -euo pipefail

STATE=${LOCAL_SLURM_STATE:-/var/tmp/scalelab-slurm}
CPUS=${LOCAL_SLURM_CPUS:-$(nproc)}
WAIT=${LOCAL_SLURM_WAIT:-90}
PIDS=$STATE/pids
say() { echo "[local_slurm] $*"; }
fail() { echo "[local_slurm] error: $*" >&2; exit 1; }
running() { [ -s "$PIDS/$1.pid" ] && kill -0 "$(cat "$PIDS/$1.pid")" 2>/dev/null; }

install_packages() {
  local missing=()
  for pair in munged:munge slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client \
              slurmdbd:slurmdbd mariadbd:mariadb-server; do
    command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
  done
  [ ${#missing[@]} = 0 ] && return
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  local policy=/usr/sbin/policy-rc.d own_policy=0
  # keep the packages' maintainer scripts from starting daemons (no systemd here)
  if [ ! -e $policy ]; then printf '#!/bin/sh\nexit 101\n' >$policy; chmod +x $policy; own_policy=1; fi
  apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null
  apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  [ $own_policy = 1 ] && rm -f $policy
  return 0
}

start_munge() {
  mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
  [ -s /etc/munge/munge.key ] || head -c 1024 /dev/urandom >/etc/munge/munge.key
  chown munge:munge /etc/munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge
  chmod 700 /etc/munge && chmod 400 /etc/munge/munge.key
  if running munged || (munge -n | unmunge) >/dev/null 2>&1; then return; fi
  rm -f /run/munge/munge.socket.2*
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
  for _ in $(seq 50); do [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
  cp /run/munge/munged.pid "$PIDS/munged.pid"
  (munge -n | unmunge) >/dev/null || fail "munge does not answer"
}

start_accounting() {
  local db=$STATE/db sock=$STATE/db/mysqld.sock
  mkdir -p "$db/data" /run/mysqld && chown -R mysql:mysql "$db" /run/mysqld
  if ! running mariadbd; then
    [ -d "$db/data/mysql" ] || mariadb-install-db --user=mysql --datadir="$db/data" \
      --auth-root-authentication-method=socket --skip-test-db >"$STATE/log/mariadb-install.log" 2>&1 \
      || fail "mariadb-install-db failed ($STATE/log/mariadb-install.log)"
    setsid mariadbd --user=mysql --datadir="$db/data" --socket="$sock" --pid-file="$db/mariadbd.pid" \
      --skip-networking --innodb-buffer-pool-size=64M --log-error="$db/mariadb.err" </dev/null >/dev/null 2>&1 &
    for _ in $(seq 300); do mariadb --socket="$sock" -e 'select 1' >/dev/null 2>&1 && break; sleep 0.1; done
    mariadb --socket="$sock" -e 'select 1' >/dev/null 2>&1 || fail "MariaDB did not start ($db/mariadb.err)"
    cp "$db/mariadbd.pid" "$PIDS/mariadbd.pid"
  fi
  mariadb --socket="$sock" -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'scalelab';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
  cat >/etc/slurm/slurmdbd.conf <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=$SLURM_USER
LogFile=$STATE/log/slurmdbd.log
PidFile=$PIDS/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=scalelab
EOF
  chown "$SLURM_USER" /etc/slurm/slurmdbd.conf && chmod 600 /etc/slurm/slurmdbd.conf
  if ! running slurmdbd; then
    MYSQL_UNIX_PORT=$sock setsid slurmdbd </dev/null >>"$STATE/log/slurmdbd.out" 2>&1
    for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/6819) 2>/dev/null && return; sleep 0.1; done
    fail "slurmdbd does not listen ($STATE/log/slurmdbd.log)"
  fi
}

write_slurm_conf() {
  local mem; mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
  cat >/etc/slurm/slurm.conf <<EOF
# written by scalelab scripts/local_slurm.sh
ClusterName=scalelab
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=$SLURM_USER
AuthType=auth/munge
CredType=cred/munge
AuthInfo=cred_expire=5
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$PIDS/slurmctld.pid
SlurmdPidFile=$PIDS/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
SlurmctldParameters=preempt_send_user_signal
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobRequeue=1
KillWait=5
MinJobAge=600
InactiveLimit=0
Waittime=0
MaxArraySize=1001
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
JobAcctGatherType=jobacct_gather/none
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE GraceTime=30
PartitionName=high Nodes=ALL Default=NO MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
EOF
  chmod 644 /etc/slurm/slurm.conf
}

start() {
  [ "$(id -u)" = 0 ] || fail "must run as root"
  local t0=$SECONDS
  install_packages
  HOST=$(hostname -s)
  getent hosts "$HOST" >/dev/null || echo "127.0.0.1 $HOST" >>/etc/hosts
  SLURM_USER=slurm; id slurm >/dev/null 2>&1 || SLURM_USER=root
  mkdir -p "$STATE"/{ctld,d,log,pids,db} /etc/slurm
  chown "$SLURM_USER" "$STATE/ctld" "$STATE/log" "$PIDS"
  start_munge
  start_accounting
  write_slurm_conf
  if running slurmctld; then scontrol reconfigure >/dev/null 2>&1 || true
  else setsid slurmctld -i </dev/null >>"$STATE/log/slurmctld.out" 2>&1; fi
  running slurmd || setsid slurmd </dev/null >>"$STATE/log/slurmd.out" 2>&1
  for _ in $(seq 100); do sacctmgr -n show cluster >/dev/null 2>&1 && break; sleep 0.2; done
  sacctmgr -n -P show cluster format=cluster 2>/dev/null | grep -qx scalelab \
    || sacctmgr -i add cluster scalelab >/dev/null 2>&1 || true
  local deadline=$((SECONDS + WAIT)) st=""
  while :; do
    st=$(sinfo -h -n "$HOST" -o %T 2>/dev/null | head -1 || true)
    case "$st" in idle | mixed | allocated) break ;; esac
    case "$st" in drain* | down* | inval*) scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;; esac
    [ $SECONDS -lt $deadline ] || { tail -n 20 "$STATE/log/slurmctld.log" >&2 || true; fail "node not idle after ${WAIT}s ('$st')"; }
    sleep 0.3
  done
  sinfo
  echo "LOCAL SLURM READY in $((SECONDS - t0))s (state $STATE)"
}

stop() {
  if running slurmctld && command -v squeue >/dev/null; then
    local jobs; jobs=$(squeue -h -o %i 2>/dev/null || true)
    [ -n "$jobs" ] && scancel $jobs 2>/dev/null
    for _ in $(seq 50); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
  fi
  for d in slurmd slurmctld slurmdbd mariadbd munged; do
    running "$d" || { rm -f "$PIDS/$d.pid"; continue; }
    local pid; pid=$(cat "$PIDS/$d.pid")
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    rm -f "$PIDS/$d.pid"
    say "stopped $d (pid $pid)"
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) for d in munged mariadbd slurmdbd slurmctld slurmd; do
            running "$d" && echo "$d: running ($(cat "$PIDS/$d.pid"))" || echo "$d: stopped"; done ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
