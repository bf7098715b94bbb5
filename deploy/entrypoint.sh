#!/bin/sh
# Image entrypoint: `IMAGE gateway ...`, `IMAGE worker ...` run `codepool gateway|worker ...`.
#
# A worker started as root first prepares what nsjail needs inside a container, then execs the
# worker (which stays root: it maps each slot to its own unprivileged uid):
#  1. A clean procfs. Container runtimes mask parts of /proc, and the kernel then refuses to
#     mount a new procfs inside a new user namespace ("too revealing"). A second, unmasked procfs
#     mounted anywhere lifts that; its directory is 0700 so that nothing else uses it.
#  2. A writable cgroup v2 tree. The runtime mounts the container's cgroup namespace read-only;
#     the worker delegates memory and pids limits to its slots below its own cgroup.
# Both need CAP_SYS_ADMIN (granted to the worker pod only). A step that fails is reported and
# skipped: the worker then says exactly what it could not set up.
set -eu

run_dir="${CODEPOOL_RUN_DIR:-/run/codepool}"

say() { printf 'codepool-entrypoint: %s\n' "$*" >&2; }

mount_clean_proc() {
    proc_dir="$run_dir/fullproc"
    if mountpoint -q "$proc_dir/proc" 2>/dev/null; then
        return 0
    fi
    if ! { mkdir -p "$proc_dir/proc" && chmod 0700 "$proc_dir" \
        && mount -t proc -o nosuid,nodev,noexec proc "$proc_dir/proc"; }; then
        say "could not mount a clean procfs at $proc_dir/proc; jails that mount /proc will fail"
    fi
}

make_cgroup_writable() {
    [ -f /sys/fs/cgroup/cgroup.controllers ] || return 0  # cgroup v1: nothing to do here
    [ -w /sys/fs/cgroup/cgroup.procs ] && return 0
    if ! mount -o remount,rw /sys/fs/cgroup; then
        say "could not remount /sys/fs/cgroup read-write; jail limits fall back to rlimits"
    fi
}

if [ "${1:-}" = worker ] && [ "$(id -u)" -eq 0 ]; then
    mount_clean_proc
    make_cgroup_writable
fi
exec codepool "$@"
