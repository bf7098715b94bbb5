"""Sessions inside the jail: a host (pid 1) that spawns live interpreters, and their loop.

A session is a long-lived process forked from the warm host, whose globals survive from one
cell to the next. The worker talks to each session directly: the host receives the session's
descriptors from the worker (SCM_RIGHTS on a SOCK_SEQPACKET control socket), forks the
session onto them, and the session sends a pidfd of itself back so that the worker can watch
and kill it. A session forks copies of itself on request (one per rollout of a GRPO group):
each copy gets descriptors the worker made for it, and is double-forked so that the host
(pid 1) becomes its parent and reaps it.

Host protocol, one JSON message per seqpacket: ``open`` (with 3 fds: control socket, stdout
and stderr pipe ends), ``kill`` (a session's process group), ``exit_status``.
Session protocol, length-prefixed frames on its control socket: ``cell`` -> report,
``fork`` (then one 1-byte message with 3 fds per copy) -> ``{"ok": true}``.
"""

import contextlib
import io
import json
import os
import selectors
import signal
import socket
import sys

from .child import cpu_and_rss, enter_workload, new_namespace, run_code
from .framing import HEADER, read_frame, write_frame

MAX_HOST_MESSAGE_BYTES = 65536
MAX_REMEMBERED_EXITS = 4096
REAP_INTERVAL_S = 0.2


# --- the host --------------------------------------------------------------------------------


def host_main(ctrl, ready):
    """Serves open/kill/exit_status requests until the worker closes the control socket."""
    exits = {}
    sel = selectors.DefaultSelector()
    sel.register(ctrl, selectors.EVENT_READ)
    ctrl.send(json.dumps(ready).encode())
    while True:
        if sel.select(REAP_INTERVAL_S):
            data, fds, _, _ = socket.recv_fds(ctrl, MAX_HOST_MESSAGE_BYTES, 8)
            if not data:
                return
            reply = _host_request(json.loads(data), fds, ctrl, exits)
            ctrl.send(json.dumps(reply).encode())
        _reap(exits)


def _host_request(request, fds, ctrl, exits):
    op = request.get("op")
    if op == "open" and len(fds) == 3:
        return {"ok": True, "pid": _spawn_session(fds, request["limits"], ctrl)}
    for fd in fds:
        os.close(fd)
    if op == "kill":
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(OSError):
                kill(request["pid"], signal.SIGKILL)
        return {"ok": True}
    if op == "exit_status":
        _reap(exits)
        return {"ok": True, "exit_code": exits.pop(request["pid"], None)}
    return {"ok": False, "error": f"unknown request {op!r}"}


def _spawn_session(fds, limits, host_ctrl):
    pid = os.fork()
    if pid == 0:
        try:
            host_ctrl.close()
            control_fd, out_w, err_w = fds
            _become_session(out_w, err_w)
            enter_workload(limits)
            session_loop(socket.socket(fileno=control_fd), new_namespace())
        finally:
            os._exit(1)
    for fd in fds:
        os.close(fd)
    return pid


def _reap(exits):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        exits[pid] = os.waitstatus_to_exitcode(status)
        if len(exits) > MAX_REMEMBERED_EXITS:
            del exits[next(iter(exits))]


# --- a session -------------------------------------------------------------------------------


def _become_session(out_w, err_w):
    """Own process group (so the worker can end everything it started), fresh std streams."""
    os.setsid()
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    for fd in (devnull, out_w, err_w):
        os.close(fd)


def _hello(sock):
    """Tells the worker this session's pid, with a pidfd it can poll and signal."""
    pidfd = os.pidfd_open(os.getpid())
    body = json.dumps({"pid": os.getpid()}).encode()
    socket.send_fds(sock, [HEADER.pack(len(body)) + body], [pidfd])
    os.close(pidfd)


def session_loop(sock, namespace):
    """Runs cells in ``namespace`` and forks copies on request. Never returns."""
    _hello(sock)
    fd = sock.fileno()
    while True:
        request = read_frame(fd)
        if request is None:
            os._exit(0)
        if request["op"] == "cell":
            write_frame(fd, _run_cell(request, namespace))
        elif request["op"] == "fork":
            _fork_copies(sock, request["n"], namespace)
            write_frame(fd, {"ok": True})


def _run_cell(cell, namespace):
    sys.stdin = io.StringIO(cell["stdin"])
    cpu_before_s, _ = cpu_and_rss()
    exit_code, memory_error = run_code(cell["code"], cell["echo_last_expr"], namespace)
    sys.stdout.flush()
    sys.stderr.flush()
    cpu_after_s, max_rss_bytes = cpu_and_rss()
    return {
        "exit_code": exit_code,
        "memory_error": memory_error,
        "cpu_s": cpu_after_s - cpu_before_s,
        "max_rss_bytes": max_rss_bytes,
    }


def _fork_copies(sock, n, namespace):
    copies = [socket.recv_fds(sock, 1, 3)[1] for _ in range(n)]
    sys.stdout.flush()
    sys.stderr.flush()
    for index in range(len(copies)):
        pid = os.fork()
        if pid == 0:
            if os.fork() == 0:  # the grandchild is the copy; the host becomes its parent
                _become_copy(sock, copies, index, namespace)
            os._exit(0)
        os.waitpid(pid, 0)
    for fds in copies:
        for fd in fds:
            os.close(fd)


def _become_copy(sock, copies, index, namespace):
    try:
        for other, fds in enumerate(copies):
            if other != index:
                for fd in fds:
                    os.close(fd)
        sock.close()
        control_fd, out_w, err_w = copies[index]
        _become_session(out_w, err_w)
        session_loop(socket.socket(fileno=control_fd), namespace)
    finally:
        os._exit(1)
