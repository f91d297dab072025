"""The shell's sandbox: bubblewrap (``bwrap``) running a command with only its allowed roots.

Inside, the workspace folders the session may reach are mounted at ``/workspace`` (read-write
only where it may write), the system's program folders read-only, a handful of files from
``/etc`` that programs need, a fresh ``/tmp``, a minimal ``/dev`` and ``/proc``. Every
namespace is unshared, the network too unless it is granted, so the command sees neither the
host's files, nor its processes, nor its network; it holds no capability, even when clawbot
runs as root; ``--die-with-parent`` and the PID namespace take everything it started down
with it, and ``run_in_sandbox`` returns only once all of that is gone.

The workspace's folders come as descriptors, opened beneath its root and checked
(``clawbot.tools.shell``), and bwrap mounts each by its descriptor (``--bind-fd``): never a
name looked up again, which a folder swapped for a link meanwhile would lead out.

Whether bubblewrap works is found out once per process by running ``true`` in a sandbox with
a folder mounted by its descriptor: an installed ``bwrap`` may still be refused user
namespaces (a container, a locked-down kernel), or be too old for ``--bind-fd`` (before
0.10), and then the shell is not offered, unless the operator allows commands on the host
(``clawbot.tools.host_shell``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from clawbot.tools.processes import GONE_CHECK_SECONDS, GONE_CHECKS, Outcome, run_command

INSIDE_WORKSPACE = "/workspace"
"""Where the workspace appears inside the sandbox (its host path is never shown)."""
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
"""Program folders mounted read-only (or re-made as the same links, on merged-/usr systems)."""
ETC_FILES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "ssl",
    "ca-certificates",
)
"""What of ``/etc`` programs need to start; never passwd, shadow or the host's configuration."""
NETWORK_ETC_FILES = ("resolv.conf", "hosts", "nsswitch.conf", "gai.conf", "host.conf")
PROBE_TIMEOUT = 10.0
INSTALL_HINT = (
    "install bubblewrap (Debian, Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    "bubblewrap)"
)


@dataclass(frozen=True)
class Mount:
    """A host folder, open as ``fd``, shown inside the sandbox at ``target``, writable or
    read-only. bubblewrap mounts the folder the descriptor holds (``--bind-fd``), never a
    path looked up again, so what is mounted is what was opened and checked."""

    fd: int
    target: str
    write: bool


@dataclass(frozen=True)
class Bubblewrap:
    """A working ``bwrap`` and how to wrap a command in it."""

    executable: str

    def wrap(
        self,
        argv: Iterable[str],
        *,
        mounts: Iterable[Mount],
        cwd: str,
        network: bool,
        info_fd: int | None = None,
    ) -> list[str]:
        """The ``bwrap`` command line that runs ``argv`` in ``cwd`` (a path inside);
        ``info_fd``: where bwrap writes the sandbox's ``child-pid`` (see ``run_in_sandbox``)."""
        args = [self.executable, "--die-with-parent", "--new-session", "--unshare-all"]
        if info_fd is not None:
            args += ["--info-fd", str(info_fd)]
        args += ["--cap-drop", "ALL"]  # run by root, bwrap would otherwise keep them
        if network:
            args.append("--share-net")
        args += _system_mounts(network=network)
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", INSIDE_WORKSPACE]
        # Outer folders first, so a writable folder inside a read-only one is mounted over it.
        for mount in sorted(mounts, key=lambda m: m.target.count("/")):
            args += ["--bind-fd" if mount.write else "--ro-bind-fd", str(mount.fd), mount.target]
        args += ["--chdir", cwd, "--", *argv]
        return args


@functools.lru_cache(maxsize=2)
def _system_mounts(*, network: bool) -> tuple[str, ...]:
    """The host's program folders and /etc files, read-only: looked at once per process
    (they do not move while it runs), not at every command."""
    args: list[str] = []
    for name in SYSTEM_DIRS:
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ETC_FILES + (NETWORK_ETC_FILES if network else ()):
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return tuple(args)


@functools.lru_cache(maxsize=1)
def find_bubblewrap() -> Bubblewrap | None:
    """A ``bwrap`` that can run a sandbox here, or None (not installed, or refused)."""
    executable = shutil.which("bwrap")
    if executable is None:
        return None
    found = Bubblewrap(executable)
    # A folder mounted by its descriptor, as every command's are: a bwrap too old to know
    # --ro-bind-fd fails here, once, rather than at every command.
    folder = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    mount = Mount(folder, INSIDE_WORKSPACE, write=False)
    probe = found.wrap(["true"], mounts=(mount,), cwd="/", network=False)
    try:
        done = subprocess.run(
            probe,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=PROBE_TIMEOUT,
            env={"PATH": "/usr/bin:/bin"},
            pass_fds=(folder,),
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        os.close(folder)
    return found if done.returncode == 0 else None


async def run_in_sandbox(
    sandbox: Bubblewrap,
    argv: list[str],
    *,
    mounts: Iterable[Mount],
    cwd: str,
    network: bool,
    env: dict[str, str],
    timeout: float,
    limit: int,
) -> Outcome:
    """Run ``argv`` in the sandbox, and return once every process it started is gone.

    When the command ends, the sandbox's init (PID 1 of its namespace) exits and the kernel
    kills everything else in the namespace, but bwrap itself may exit before they are gone:
    so the init's host pid is read from bwrap's ``--info-fd`` and waited for (its exit
    completes only once its namespace is empty). The mounts' descriptors stay the caller's
    to close."""
    mounts = tuple(mounts)
    info, info_for_bwrap = os.pipe()
    os.set_blocking(info, False)
    wrapped = sandbox.wrap(argv, mounts=mounts, cwd=cwd, network=network, info_fd=info_for_bwrap)

    init: list[int | None] = []  # read once: the first time the command has ended

    async def sandbox_gone() -> None:
        if not init:
            init.append(_init_pid(info))
        await _gone(init[0])

    try:
        return await run_command(
            wrapped,
            cwd=None,
            env=env,
            timeout=timeout,
            limit=limit,
            pass_fds=(info_for_bwrap, *(mount.fd for mount in mounts)),
            after_exit=sandbox_gone,
        )
    finally:
        os.close(info)
        os.close(info_for_bwrap)


def _init_pid(info: int) -> int | None:
    """The sandbox's init as bwrap wrote it at the start (None if it never started)."""
    try:
        written = os.read(info, 64 * 1024)
    except BlockingIOError:
        return None
    try:
        pid = json.loads(written)["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) else None


async def _gone(pid: int | None) -> None:
    """Wait, briefly, until ``pid`` has exited (gone, or a zombie nobody reaps)."""
    for _ in range(GONE_CHECKS if pid is not None else 0):
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                state = stat.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            return
        if state in (b"Z", b"X"):
            return
        await asyncio.sleep(GONE_CHECK_SECONDS)
