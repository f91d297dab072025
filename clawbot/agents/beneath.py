"""Paths opened beneath one open folder, so a link swapped in mid-way cannot lead out of it.

Checking a path and then opening it again by name is a race: between the two, anyone who may
write inside the folder (a subagent's shell, beside its parent) can swap a folder on the path
for a link to anywhere on the host, and the second look follows it. ``O_NOFOLLOW`` guards only
the last name, and ``mkdir(parents=True)`` follows every link on the way.

So nothing here looks a name up twice. The folder is opened once (:meth:`Beneath.open`) and
every path below it is resolved from that descriptor:

- where the kernel has ``openat2`` (Linux 5.6+), in one call with ``RESOLVE_BENEATH |
  RESOLVE_NO_SYMLINKS``: the kernel refuses any link and any way above the folder;
- otherwise (an older kernel, or a seccomp filter that refuses the call), and whenever a path
  holds a link, one name at a time: each folder is opened with ``O_NOFOLLOW | O_DIRECTORY``
  relative to the one before it, and the last name is used with ``dir_fd`` the same way.

A link met on the way is read (``readlink`` relative to its folder) and its target walked
the same way, from the folder that holds it, or from the root for an absolute target that
names a place inside it; a target outside, or ``..`` above the root, is refused (``EXDEV``),
and so are more than ``MAX_LINKS`` links in one path (``ELOOP``), as the kernel does. Every
time a link changes where the path leads, the caller's ``check`` sees the new path (relative
to the root, as the walk will follow it) before anything is opened or created there.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TypeVar

T = TypeVar("T")

MAX_LINKS = 40
"""Links followed in one path before it counts as a loop (the kernel's own limit)."""
HERE = "."
"""The root itself, as a relative path."""

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_RESOLVE = 0x08 | 0x04
"""``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS``: nothing above the folder, no link at all."""
_LINK_ERRORS = (errno.ELOOP, errno.ENOTDIR)
"""What opening a link with ``O_NOFOLLOW`` gives (``ENOTDIR`` with ``O_DIRECTORY``)."""
_OPENAT2_NUMBERS = dict.fromkeys(
    ("x86_64", "amd64", "aarch64", "arm64", "armv7l", "armv8l", "i386", "i686", "riscv64",
     "ppc64le", "ppc64", "s390x", "loongarch64"),
    437,
)  # fmt: skip
"""``openat2``'s number: 437 wherever the unified table of new system calls is used (not on
alpha, ia64 or mips, which fall back to the walk)."""

Check = Callable[[str], None]
"""Called with the path (relative to the root, ``/``-separated, ``.`` for the root) a walk is
about to open or create; raises to refuse it."""


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


@dataclass
class _Kernel:
    """The ``openat2`` system call, or None where it cannot be used (found out once)."""

    number: int | None
    syscall: Callable[..., int] | None = field(default=None, repr=False)
    usable: bool | None = None

    def openat2(self, dir_fd: int, path: str, flags: int, mode: int) -> int | None:
        """An open descriptor, None when the call is unavailable; OSError when it fails."""
        if self.usable is None:
            self.usable = self._works(dir_fd)
        if not self.usable:
            return None
        return self._call(dir_fd, path, flags, mode)

    def _works(self, dir_fd: int) -> bool:
        """Whether ``openat2`` opens ``.`` here: not on a kernel older than 5.6, or where a
        seccomp filter (a container's) refuses calls it does not know."""
        if self.number is None:
            return False
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        self.syscall = libc.syscall
        try:
            os.close(self._call(dir_fd, HERE, _DIRECTORY, 0))
        except OSError:
            return False
        return True

    def _call(self, dir_fd: int, path: str, flags: int, mode: int) -> int:
        assert self.syscall is not None and self.number is not None
        how = _OpenHow(flags, mode if flags & os.O_CREAT else 0, _RESOLVE)
        fd = self.syscall(
            ctypes.c_long(self.number),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(os.fsencode(path)),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        return int(fd)


KERNEL = _Kernel(_OPENAT2_NUMBERS.get(platform.machine()) if sys.platform == "linux" else None)
"""The one ``openat2`` of this process (a test may set ``KERNEL.usable = False`` to walk)."""


class NotOpenable(OSError):
    """A named pipe or socket nobody reads (``ENXIO`` opening it to write), with what
    ``lstat`` says it is, so the caller can name it."""

    def __init__(self, info: os.stat_result) -> None:
        super().__init__(errno.ENXIO, os.strerror(errno.ENXIO))
        self.info = info


def split(relative: str) -> list[str]:
    """The names of a ``/``-separated path (``.`` and empty names dropped, ``..`` kept)."""
    return [name for name in relative.split("/") if name not in ("", HERE)]


class Beneath:
    """A folder opened once; every path below it is resolved from its descriptor.

    Use as a context manager (the descriptor is closed at its end).
    """

    def __init__(self, fd: int, host_path: str) -> None:
        self.fd = fd
        self.host_path = host_path

    @classmethod
    def open(cls, root: Path) -> Beneath:
        """``root`` (an absolute, resolved path) opened as the folder to stay beneath."""
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return cls(fd, str(root))

    def __enter__(self) -> Beneath:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        os.close(self.fd)

    # what the file tools do ----------------------------------------------------------------

    def open_file(
        self,
        relative: str,
        flags: int,
        *,
        check: Check | None = None,
        make_parents: bool = False,
    ) -> int:
        """``relative`` opened with ``flags`` (plus ``O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC``),
        its missing folders made first when ``make_parents``; NotOpenable for a pipe or
        socket nobody reads."""
        flags |= os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

        def use(dir_fd: int, name: str) -> int:
            try:
                return os.open(name, flags, 0o666, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno == errno.ENXIO:
                    raise NotOpenable(os.stat(name, dir_fd=dir_fd, follow_symlinks=False)) from None
                raise

        return self._resolve(relative, flags, use, check=check, make_parents=make_parents)

    def open_folder(self, relative: str, *, check: Check | None = None, make: bool = False) -> int:
        """A descriptor of the folder ``relative`` (for ``os.scandir``), made with every
        missing folder above it when ``make``."""

        def use(dir_fd: int, name: str) -> int:
            return _open_or_make(name, dir_fd, make=make)

        return self._resolve(relative, _DIRECTORY, use, check=check, make_parents=make)

    def look(self, relative: str, *, check: Check) -> None:
        """Walk ``relative`` as far as it exists, so ``check`` sees where it leads (through
        every link on it) without opening or creating anything: FileNotFoundError where it
        stops existing, EXDEV where it leads out."""

        def use(dir_fd: int, name: str) -> None:
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))  # follow it

        self._resolve(relative, None, use, check=check, make_parents=False)

    # the walk ------------------------------------------------------------------------------

    def _resolve(
        self,
        relative: str,
        flags: int | None,
        use: Callable[[int, str], T],
        *,
        check: Check | None,
        make_parents: bool,
    ) -> T | int:
        """``use(folder descriptor, last name)`` on the path by the walk, or an ``openat2``
        of it with ``flags`` where the kernel can (None: always walk)."""
        names = split(relative)
        if flags is not None and ".." not in names:
            if check is not None:
                check("/".join(names) or HERE)
            try:
                fd = KERNEL.openat2(self.fd, "/".join(names) or HERE, flags, 0o666)
            except OSError:
                fd = None  # a link on the way, a missing folder, a pipe: the walk says which
            if fd is not None:
                return fd
        return _Walk(self, check, make_parents).run(names, use)


class _Walk:
    """One resolution: the folders opened so far, from the root down (the root's descriptor
    is the caller's and is never closed here), and the links followed."""

    def __init__(self, root: Beneath, check: Check | None, make_parents: bool) -> None:
        self.root = root
        self.check = check
        self.make_parents = make_parents
        self.folders: list[tuple[int, str]] = []
        self.links = 0

    @property
    def here(self) -> int:
        return self.folders[-1][0] if self.folders else self.root.fd

    def run(self, names: list[str], use: Callable[[int, str], T]) -> T:
        try:
            pending = self._checked(names)
            while True:
                while len(pending) > 1:
                    name = pending.pop(0)
                    if name == "..":
                        self._up()
                        continue
                    try:
                        fd = _open_or_make(name, self.here, make=self.make_parents)
                    except OSError as exc:  # a link: walk its target instead of it
                        pending = self._checked(self._instead(name, exc) + pending)
                    else:
                        self.folders.append((fd, name))
                last = pending[0] if pending else HERE
                if last == "..":
                    self._up()
                    pending = []
                    continue
                try:
                    return use(self.here, last)
                except OSError as exc:
                    pending = self._checked(self._instead(last, exc))
        finally:
            for fd, _ in self.folders:
                os.close(fd)

    def _instead(self, name: str, error: OSError) -> list[str]:
        """What to walk instead of ``name``, which failed with ``error``: the names its link
        leads through, from where the walk stands (from the root for an absolute target
        inside it), or ``name`` again when it was a link but no longer is (swapped back
        meanwhile). ``error`` itself when it is not about a link; EXDEV for a link that
        leads out, ELOOP past ``MAX_LINKS`` (every look again counts too)."""
        if error.errno not in _LINK_ERRORS:
            raise error
        self.links += 1
        if self.links > MAX_LINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
        try:
            target = os.readlink(name, dir_fd=self.here)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            mode = os.stat(name, dir_fd=self.here, follow_symlinks=False).st_mode
            if error.errno == errno.ENOTDIR and not (stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                raise error from None  # a file where a folder is needed
            return [name]  # swapped meanwhile: look again
        if not target.startswith("/"):
            return split(target)
        inside = self.root.host_path.rstrip("/")
        if target != inside and not target.startswith(inside + "/"):
            raise OSError(errno.EXDEV, "the link leads outside")
        self._close_to_root()
        return split(target[len(inside) :])

    def _checked(self, pending: list[str]) -> list[str]:
        """``pending`` (names still to walk), once ``check`` has seen where they lead."""
        if self.check is None:
            return pending
        where = [name for _, name in self.folders]
        for name in pending:
            if name != "..":
                where.append(name)
            elif where:
                where.pop()
            else:
                raise OSError(errno.EXDEV, "the path climbs above the root")
        self.check("/".join(where) or HERE)
        return pending

    def _up(self) -> None:
        if not self.folders:
            raise OSError(errno.EXDEV, "the path climbs above the root")
        os.close(self.folders.pop()[0])

    def _close_to_root(self) -> None:
        while self.folders:
            os.close(self.folders.pop()[0])


def _open_or_make(name: str, dir_fd: int, *, make: bool) -> int:
    """The folder ``name`` in ``dir_fd``, never through a link (``ENOTDIR`` for one), made
    first when missing and ``make``."""
    for _ in range(MAX_LINKS):
        try:
            return os.open(name, _DIRECTORY, dir_fd=dir_fd)
        except FileNotFoundError:
            if not make:
                raise
        with contextlib.suppress(FileExistsError):  # made meanwhile: open it again
            os.mkdir(name, 0o777, dir_fd=dir_fd)
    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
