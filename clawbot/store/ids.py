"""Row ids: unique, time-ordered names for jobs, turns and the like."""

from __future__ import annotations

import random
import time


def new_id(prefix: str) -> str:
    """Unique and time-ordered (microseconds, then 24 random bits, like a UUIDv7), so a new
    row lands at the end of its id index rather than on a random page of it. An id is a
    name, not a secret: the bits come from ``random`` (reseeded in a forked child), which
    unlike ``secrets`` costs no system call."""
    return f"{prefix}_{time.time_ns() // 1000:013x}{random.getrandbits(24):06x}"
