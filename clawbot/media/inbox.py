"""Where the documents people send are saved: the ``inbox/`` folder of the agent's own
folder in the workspace (``inbox/`` for ``main``, ``agents/<id>/inbox/`` for another agent),
so its ``file_read`` reaches them.

Every name is made safe first (:mod:`clawbot.media.names`), and the file is created beneath
the workspace's open root (:mod:`clawbot.agents.beneath`), never by a name looked up twice,
with ``O_EXCL``: a file already there (or a link swapped in by a subagent's shell) is never
written through; the next free name (``report-2.pdf``) is used instead.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

from clawbot.agents.beneath import Beneath
from clawbot.errors import InputError
from clawbot.media.names import numbered
from clawbot.security.reach import WHOLE

INBOX = "inbox"
MAX_TRIES = 100
"""Names tried (``report.pdf`` .. ``report-100.pdf``) before the inbox counts as full."""

Check = Callable[[str], None]


def inbox_of(home: str) -> str:
    """The inbox folder of an agent's own folder (``.`` for the whole workspace)."""
    return INBOX if home == WHOLE else f"{home}/{INBOX}"


def save(root: Path, folder: str, name: str, data: bytes, check: Check) -> str:
    """Write ``data`` as a new file named ``name`` (or the next free name) in ``folder``
    beneath ``root``, its folders made; the workspace path it got. ``check`` sees each path
    before it is created (the session's reach). Blocking: run it on a worker thread."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    with Beneath.open(root) as beneath:
        for number in range(1, MAX_TRIES + 1):
            path = f"{folder}/{numbered(name, number)}"
            try:
                fd = beneath.open_file(path, flags, check=check, make_parents=True)
            except FileExistsError:
                continue
            except OSError as exc:
                raise _failure(name, exc) from None
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            return path
    raise InputError(f"could not save {name}: {folder} already holds {MAX_TRIES} files so named")


def _failure(name: str, exc: OSError) -> InputError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return InputError(f"could not save {name}: the disk is full")
    if exc.errno == errno.EXDEV:
        return InputError(f"could not save {name}: the inbox folder leads out of the workspace")
    return InputError(f"could not save {name}: {(exc.strerror or type(exc).__name__).lower()}")
