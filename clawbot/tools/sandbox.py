"""The shell's sandbox: bubblewrap (``bwrap``) running a command with only its allowed roots.

Inside, the workspace folders the session may reach are mounted at ``/workspace`` (read-write
only where it may write), the system's program folders read-only, a handful of files from
``/etc`` that programs need, a fresh ``/tmp``, a minimal ``/dev`` and ``/proc``. Every
namespace is unshared, the network too unless it is granted, so the command sees neither the
host's files, nor its processes, nor its network; it holds no capability, even when clawbot
runs as root; ``--die-with-parent`` and the PID namespace take everything it started down
with it.

Whether bubblewrap works is found out once per process by running ``true`` in a sandbox: an
installed ``bwrap`` may still be refused user namespaces (a container, a locked-down kernel),
and then the shell runs unsandboxed and its risk is ``unsafe``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

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
    """A host folder shown inside the sandbox at ``target``, writable or read-only."""

    source: Path
    target: str
    write: bool


@dataclass(frozen=True)
class Bubblewrap:
    """A working ``bwrap`` and how to wrap a command in it."""

    executable: str

    def wrap(
        self, argv: Iterable[str], *, mounts: Iterable[Mount], cwd: str, network: bool
    ) -> list[str]:
        """The ``bwrap`` command line that runs ``argv`` in ``cwd`` (a path inside)."""
        args = [self.executable, "--die-with-parent", "--new-session", "--unshare-all"]
        args += ["--cap-drop", "ALL"]  # run by root, bwrap would otherwise keep them
        if network:
            args.append("--share-net")
        args += _system_mounts(network=network)
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", INSIDE_WORKSPACE]
        # Outer folders first, so a writable folder inside a read-only one is mounted over it.
        for mount in sorted(mounts, key=lambda m: m.target.count("/")):
            args += ["--bind" if mount.write else "--ro-bind", str(mount.source), mount.target]
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
    probe = found.wrap(["true"], mounts=(), cwd="/", network=False)
    try:
        done = subprocess.run(
            probe,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=PROBE_TIMEOUT,
            env={"PATH": "/usr/bin:/bin"},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return found if done.returncode == 0 else None
