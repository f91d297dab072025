"""The keeper of one unsandboxed shell command: run as a script by ``clawbot.tools.host_shell``.

``python reaper.py CONTROL_FD PROGRAM ARG...`` starts the program (``bash -c <command>``) as
its child and stays its parent. It is a *child subreaper*, so every process the command
starts, however it detaches (``setsid``, ``nohup``, a double fork), stays its descendant;
when the command ends, or when clawbot closes ``CONTROL_FD`` (its timeout, a stopped turn,
clawbot itself gone), it kills them all and only then exits, with the command's status.

The command runs without privileges: ``no_new_privs`` (set-user-ID programs such as ``sudo``
raise nothing) and no capability, even when clawbot runs as root, so it can neither read
clawbot's memory or environment nor gain what clawbot holds. Standard library only, and
nothing imported from clawbot: it starts with ``python -I -S`` for every command.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import select
import signal
import sys

PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAPABILITY_VERSION_3 = 0x20080522
LAST_CAPABILITY = 63
"""Past the kernel's last capability PR_CAPBSET_DROP answers EINVAL, which ends the loop."""
POLL_MS = 50
"""How often the command is looked at where the kernel has no pidfd (before Linux 5.3)."""
CANNOT_START = 126


class CapabilityHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapabilitySets(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, value: int = 0) -> None:
    if _libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"prctl({option}): {os.strerror(number)}")


def drop_privileges() -> None:
    """Give up every capability for good (the bounding set too, so a program run as root
    gains none back) and set ``no_new_privs``: nothing this process runs gains a right."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    for capability in range(LAST_CAPABILITY + 1):
        try:
            prctl(PR_CAPBSET_DROP, capability)
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                break  # past the last capability this kernel knows
            if exc.errno == errno.EPERM:
                break  # no CAP_SETPCAP: an unprivileged user, whose programs gain none
            raise
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError as exc:
        if exc.errno != errno.EINVAL:  # a kernel without ambient capabilities (before 4.3)
            raise
    header = CapabilityHeader(CAPABILITY_VERSION_3, 0)
    nothing = (CapabilitySets * 2)()
    if _libc.capset(ctypes.byref(header), nothing) != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"capset: {os.strerror(number)}")


def children() -> list[int]:
    """This process's children, read from /proc (a stray reparented here counts too)."""
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == me:
            found.append(int(name))
    return found


def end_all() -> None:
    """Kill every child until none is left: a killed child's own children are reparented
    here (the subreaper), so each round reaches one generation further down."""
    while kids := children():
        for pid in kids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)  # one of them is gone (or was a zombie already)
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return


def start(argv: list[str], control: int) -> int:
    pid = os.fork()
    if pid == 0:  # the command
        try:
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            drop_privileges()
            os.execv(argv[0], argv)
        except BaseException as exc:
            os.write(2, f"could not start {argv[0]}: {exc}\n".encode())
        os._exit(CANNOT_START)
    return pid


def wait(pid: int, control: int) -> int | None:
    """The command's wait status, or None when clawbot closed the control pipe first."""
    poller = select.poll()
    poller.register(control, select.POLLIN)
    wait_ms: int | None = None
    try:
        poller.register(os.pidfd_open(pid), select.POLLIN)  # readable once it has exited
    except OSError:
        wait_ms = POLL_MS
    while True:
        for fd, _ in poller.poll(wait_ms):
            if fd == control and not os.read(control, 64):
                return None
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status


def exit_like(status: int | None) -> None:
    """Exit as the command did: its exit code, or killed by its signal (so clawbot reports
    ``killed by signal N`` as it would for the command itself)."""
    if status is None:
        os._exit(1)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if number not in (signal.SIGKILL, signal.SIGSTOP):  # these take no handler
            signal.signal(number, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.waitstatus_to_exitcode(status))


def main(argv: list[str]) -> None:
    control = int(argv[1])
    os.set_inheritable(control, False)  # the command never holds it
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        status = wait(start(argv[2:], control), control)
    finally:
        end_all()
    exit_like(status)


if __name__ == "__main__":
    main(sys.argv)
