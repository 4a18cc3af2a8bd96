#!/usr/bin/env bash
# A one-node Slurm on this machine, for the cluster test tier (`make test-cluster`). Run as root.
#
#   tools/local_slurm.sh start    install what is missing, write the configs, start the daemons,
#                                 wait until the node is idle and accounting (sacct) answers
#   tools/local_slurm.sh stop     cancel its jobs, stop exactly the daemons `start` started
#                                 (by their pid files) and remove its folder
#   tools/local_slurm.sh status   the daemons, sinfo and squeue
#   tools/local_slurm.sh running  exit status 0 when a cluster `start` started is up
#   tools/local_slurm.sh conf     the slurm.conf path (export SLURM_CONF=$(... conf))
#   tools/local_slurm.sh logs     the tail of every daemon log
#
# Missing Debian packages (slurm-wlm, munge, slurmdbd, mariadb-server: Slurm 22.05 on Debian 12)
# are installed with apt-get, with service start-up blocked while they install; they stay
# installed after `stop`. Nothing under /etc is written: configs, munge key, database, state,
# pid files and logs live in LOCAL_SLURM_DIR, and clients find the cluster through SLURM_CONF.
# No systemd: every daemon is started directly. Settings (environment):
#
#   LOCAL_SLURM_DIR        its folder (default /tmp/bench-local-slurm)
#   LOCAL_SLURM_CPUS       CPUs the node offers (default: all, as slurmd -C detects them)
#   LOCAL_SLURM_MEM_MB     memory the node offers in MB (default: all, as slurmd -C detects it)
#   LOCAL_SLURM_NICE       nice value of slurmd, inherited by every job (default 0)
#   LOCAL_SLURM_PORT       first of four TCP ports on 127.0.0.1: slurmctld, slurmd, slurmdbd,
#                          mariadbd (default 16817; away from Slurm's own 6817-6819 and 3306)
set -euo pipefail

DIR=${LOCAL_SLURM_DIR:-/tmp/bench-local-slurm}
CLUSTER=benchlocal
NODE=localhost
PARTITION=local
PORT=${LOCAL_SLURM_PORT:-16817}
CTLD_PORT=$PORT
SLURMD_PORT=$((PORT + 1))
DBD_PORT=$((PORT + 2))
DB_PORT=$((PORT + 3))
PACKAGES=(slurm-wlm munge slurmdbd mariadb-server)
# Start order; `stop` goes backwards.
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd)
READY_TIMEOUT_S=90

CONF=$DIR/etc/slurm.conf
export SLURM_CONF=$CONF

say() { echo "local_slurm: $*" >&2; }
die() { say "error: $*"; exit 1; }

require_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (it installs packages and starts daemons)"
}

pid_of() {  # the live pid of daemon $1 from its pid file, if it is still that daemon
    local file=$DIR/run/$1.pid pid
    [[ -s $file ]] || return 1
    pid=$(tr -dc '0-9' <"$file")
    [[ -n $pid && -r /proc/$pid/comm && $(cat "/proc/$pid/comm") == "$1" ]] || return 1
    echo "$pid"
}

wait_for() {  # wait_for <seconds> <what> <command...>: poll until the command succeeds
    local seconds=$1 what=$2 deadline output
    shift 2
    deadline=$((SECONDS + seconds))
    until output=$("$@" 2>&1); do
        ((SECONDS < deadline)) || die "$what not ready after ${seconds}s: $* says:" \
            "$(tail -n 3 <<<"$output") (logs: $0 logs)"
        sleep 0.5
    done
}

install_packages() {
    local missing=() package blocker=/usr/sbin/policy-rc.d
    for package in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$package")
    done
    ((${#missing[@]})) || return 0
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get (Debian) to install them"
    say "installing ${missing[*]}"
    # Packages must not start their own daemons (we start ours): policy-rc.d exit 101 says so.
    local made_blocker=0
    if [[ ! -e $blocker ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$blocker"
        chmod 755 "$blocker"
        made_blocker=1
    fi
    local status=0
    {
        DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                "${missing[@]}"
    } >"$DIR/log/apt.log" 2>&1 || status=$?
    ((made_blocker)) && rm -f "$blocker"
    ((status == 0)) || { tail -n 20 "$DIR/log/apt.log" >&2; die "apt-get failed ($status)"; }
}

detect_resources() {  # sets CPUS and MEM_MB from slurmd -C, capped by the LOCAL_SLURM_* settings
    local line
    line=$(slurmd -C 2>/dev/null | head -n 1)
    CPUS=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$line")
    MEM_MB=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$line")
    CPUS=${CPUS:-$(nproc)}
    MEM_MB=${MEM_MB:-$(($(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo) / 1024))}
    CPUS=${LOCAL_SLURM_CPUS:-$CPUS}
    MEM_MB=${LOCAL_SLURM_MEM_MB:-$MEM_MB}
}

write_configs() {
    local db_password=$1
    cat >"$CONF" <<EOF
# Written by tools/local_slurm.sh: a one-node test cluster on 127.0.0.1.
ClusterName=$CLUSTER
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire also delays a requeued job's restart (default 120 s).
AuthInfo=socket=$DIR/run/munge.socket,cred_expire=15
CredType=cred/munge
StateSaveLocation=$DIR/state/slurmctld
SlurmdSpoolDir=$DIR/state/slurmd
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# No cgroups (containers, no systemd): processes tracked by parentage, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
MpiDefault=none
# Accounting through slurmdbd: sacct answers for finished jobs (submitit polls it).
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
# Connections to slurmdbd take their munge socket from here, not from AuthInfo.
AccountingStoragePass=$DIR/run/munge.socket
JobCompType=jobcomp/none
# Quick turnover for tests: schedule every second, drop finished jobs after 5 s, 5 s between
# SIGTERM and SIGKILL. Time limits are exact (OverTimeLimit=0); slurmctld enforces them (and
# sends --signal warnings) on its 30 s timer, so a 1-minute job ends 60-90 s after it starts.
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2,sched_min_interval=100000
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MinJobAge=5
KillWait=5
OverTimeLimit=0
InactiveLimit=0
MessageTimeout=10
SlurmdTimeout=60
ReturnToService=2
JobRequeue=1
# The node as configured here (LOCAL_SLURM_CPUS may offer fewer CPUs than the machine has).
SlurmdParameters=config_overrides
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    cat >"$DIR/etc/slurmdbd.conf" <<EOF
# Written by tools/local_slurm.sh.
AuthType=auth/munge
AuthInfo=socket=$DIR/run/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$db_password
StorageLoc=slurm_acct_db
EOF
    chmod 600 "$DIR/etc/slurmdbd.conf"
}

start_munged() {
    dd if=/dev/urandom of="$DIR/etc/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/etc/munge.key"
    munged --force --key-file="$DIR/etc/munge.key" --socket="$DIR/run/munge.socket" \
        --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
        --seed-file="$DIR/state/munged.seed"
    wait_for 20 munged munge --socket="$DIR/run/munge.socket" -n
}

sql() { mariadb --no-defaults --socket="$DIR/run/mariadbd.sock" -u root "$@"; }

start_mariadbd() {
    local password=$1
    mariadb-install-db --no-defaults --datadir="$DIR/state/mysql" --user=root \
        --auth-root-authentication-method=socket --skip-test-db >"$DIR/log/mariadb-install.log" 2>&1 \
        || { tail -n 20 "$DIR/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
    # mariadbd stays in the foreground: detach it into its own session; it writes its pid file.
    setsid -f mariadbd --no-defaults --user=root --datadir="$DIR/state/mysql" \
        --socket="$DIR/run/mariadbd.sock" --pid-file="$DIR/run/mariadbd.pid" \
        --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
        --log-error="$DIR/log/mariadbd.log" --innodb-buffer-pool-size=64M \
        </dev/null >/dev/null 2>&1
    wait_for 60 mariadbd sql -e "SELECT 1"
    sql -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
        CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$password';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
}

node_state() { sinfo -h -n "$NODE" -o %T 2>/dev/null; }

node_idle() { [[ $(node_state) == idle ]]; }

start() {
    require_root
    if pid_of slurmctld >/dev/null; then
        say "already running (SLURM_CONF=$CONF)"
        return 0
    fi
    [[ ! -e $DIR ]] || die "$DIR exists from an earlier start; run '$0 stop' first"
    local started=$SECONDS
    mkdir -p "$DIR"/{etc,run,log,state/slurmctld,state/slurmd}
    chmod 700 "$DIR"
    # A failed start undoes itself.
    trap 'say "start failed; stopping what it started"; stop_daemons; trap - EXIT' EXIT
    install_packages
    detect_resources
    local password
    password=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
    write_configs "$password"
    start_munged
    start_mariadbd "$password"
    slurmdbd
    wait_for 60 slurmdbd sacctmgr -n list cluster
    sacctmgr -i -Q add cluster "$CLUSTER" >/dev/null
    slurmctld
    wait_for 30 slurmctld scontrol ping
    nice -n "${LOCAL_SLURM_NICE:-0}" slurmd -N "$NODE"
    local deadline=$((SECONDS + READY_TIMEOUT_S))
    until node_idle; do
        if [[ $(node_state) == *down* || $(node_state) == *drain* ]]; then
            scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
        fi
        ((SECONDS < deadline)) || die "node $NODE is '$(node_state)', not idle, after ${READY_TIMEOUT_S}s"
        sleep 0.5
    done
    wait_for 30 "accounting (sacct)" sacct -n -X
    trap - EXIT
    say "ready in $((SECONDS - started))s: node $NODE with $CPUS CPUs, ${MEM_MB} MB," \
        "partition $PARTITION; export SLURM_CONF=$CONF"
}

cancel_jobs() {  # cancel this cluster's jobs and wait until none is left
    pid_of slurmctld >/dev/null || return 0
    scancel --quiet --full --user=root >/dev/null 2>&1 || true
    local deadline=$((SECONDS + 30))
    while [[ -n $(squeue -h -o %i 2>/dev/null) ]] && ((SECONDS < deadline)); do
        sleep 0.5
    done
}

kill_job_steps() {  # slurmstepd processes of this cluster left behind (their env names CONF)
    local proc
    for proc in /proc/[0-9]*; do
        [[ $(cat "$proc/comm" 2>/dev/null) == slurmstepd ]] || continue
        if tr '\0' '\n' <"$proc/environ" 2>/dev/null | grep -qx "SLURM_CONF=$CONF"; then
            kill -KILL "${proc#/proc/}" 2>/dev/null || true
        fi
    done
}

stop_daemon() {
    local name=$1 pid deadline
    pid=$(pid_of "$name") || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    deadline=$((SECONDS + 30))
    while [[ -e /proc/$pid ]] && ((SECONDS < deadline)); do
        sleep 0.2
    done
    if [[ -e /proc/$pid ]]; then
        say "$name ($pid) ignored SIGTERM for 30s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
}

stop_daemons() {
    local index
    cancel_jobs
    for ((index = ${#DAEMONS[@]} - 1; index >= 0; index--)); do
        stop_daemon "${DAEMONS[index]}"
    done
    kill_job_steps
}

stop() {
    require_root
    [[ -d $DIR ]] || { say "nothing to stop ($DIR does not exist)"; return 0; }
    local started=$SECONDS
    stop_daemons
    rm -rf "$DIR"
    say "stopped in $((SECONDS - started))s; $DIR removed"
}

status() {
    local name pid
    for name in "${DAEMONS[@]}"; do
        if pid=$(pid_of "$name"); then echo "$name: running ($pid)"; else echo "$name: not running"; fi
    done
    pid_of slurmctld >/dev/null || return 0
    sinfo
    squeue
}

logs() {
    local file
    for file in "$DIR"/log/*.log; do
        [[ -e $file ]] || continue
        echo "== $file"
        tail -n 30 "$file"
    done
}

main() {
    case ${1:-} in
        start) start ;;
        stop) stop ;;
        status) status ;;
        running) pid_of slurmctld >/dev/null ;;
        conf) echo "$CONF" ;;
        logs) logs ;;
        *) echo "usage: $0 start|stop|status|running|conf|logs" >&2; exit 2 ;;
    esac
}

# On one line, so that bash has read it before main runs (an edit of this file meanwhile is
# harmless).
main "$@"; exit $?
