"""Safe file names for what people send: a name chosen by a sender never picks the folder a
file lands in, hides it, or names a device.

A sent name may hold folders (``../../.ssh/authorized_keys``, ``C:\\x``), NULs and other
control characters, right-to-left overrides that disguise an extension, a leading dot, a
Windows device name (``CON``, ``NUL.txt``), or be empty or too long. What is left is its last
part, printable, without leading dots, within ``MAX_NAME_BYTES``, its extension kept.
"""

from __future__ import annotations

import unicodedata

MAX_NAME_BYTES = 120
"""Well under the 255 bytes file systems allow, leaving room for a ``-2`` and ``.txt``."""
FALLBACK = "file"
RESERVED = frozenset(
    {"con", "prn", "aux", "nul"} | {f"com{n}" for n in range(10)} | {f"lpt{n}" for n in range(10)}
)
"""Names Windows gives to devices, whatever the extension (``nul.txt`` too)."""
_UNSAFE = frozenset('<>:"|?*/\\')


def safe_name(sent: str) -> str:
    """``sent`` as a plain file name of one folder (see the module)."""
    last = sent.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    kept = "".join(
        "_" if ch in _UNSAFE or not ch.isprintable() or unicodedata.category(ch) == "Cf" else ch
        for ch in unicodedata.normalize("NFC", last)
    )
    name = kept.strip().lstrip(".").rstrip(". ")
    if not name or set(name) <= {"_", "."}:
        return FALLBACK
    if name.split(".", 1)[0].strip().lower() in RESERVED:
        name = f"_{name}"
    return _shortened(name)


def numbered(name: str, number: int) -> str:
    """The ``number``-th name to try when ``name`` is taken: ``report-2.pdf``."""
    if number < 2:
        return name
    stem, dot, suffix = name.rpartition(".")
    if not dot or not stem:
        return f"{name}-{number}"
    return f"{stem}-{number}.{suffix}"


def _shortened(name: str) -> str:
    if len(name.encode()) <= MAX_NAME_BYTES:
        return name
    stem, dot, suffix = name.rpartition(".")
    if not dot or not stem or len(suffix.encode()) > 16:
        stem, suffix = name, ""
    room = MAX_NAME_BYTES - len(suffix.encode()) - (1 if suffix else 0)
    cut = stem.encode()[:room].decode(errors="ignore")
    return f"{cut}.{suffix}" if suffix else cut
