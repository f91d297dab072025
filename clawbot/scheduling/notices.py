"""What a person is told when clawbot gives up on their messages.

A failure notice quotes an excerpt of every message it gives up on: one notice may stand for a
``[Backlog]`` turn of several, and in a direct chat nothing else says which request failed,
so without the quotes the person cannot tell what to send again. Each excerpt is a Markdown
code span, so the platform renderers show the person's words as they were typed (a ``*`` or a
``[link]: url`` in them cannot turn into markup or vanish)."""

from __future__ import annotations

from collections.abc import Sequence

from clawbot.scheduling.backlog import asked_in, shorten
from clawbot.store import Store

QUOTE_CHARS = 100
"""An excerpt's length: enough to recognise a message, short enough for a list of them."""
GAVE_UP_ERROR = "gave up after "
"""How the stored error of a job failed for running out of attempts begins."""


async def asked_of(store: Store, session_key: str, job_id: str) -> list[str]:
    """The people's messages a job's turn answers, read back from its stored input (a turn
    recovered after a crash, a notice sent again): what its failure notice quotes."""
    return asked_in(await store.injections.turn(session_key, job_id))


def quote(text: str) -> str:
    """An excerpt of ``text`` as a Markdown code span (fenced by a backtick run longer than
    any inside it, padded where the excerpt starts or ends with a backtick)."""
    excerpt = shorten(text, QUOTE_CHARS)
    fence = "`"
    while fence in excerpt:
        fence += "`"
    if excerpt.startswith("`") or excerpt.endswith("`"):
        excerpt = f" {excerpt} "
    return f"{fence}{excerpt}{fence}"


def gave_up_notice(asked: Sequence[str], attempts: int) -> str:
    """Interrupted (a crash, a kill) each of ``attempts`` times it was worked on."""
    what, it, end = _about(asked)
    times = "" if attempts == 1 else f" {attempts} times"
    return (
        f"Sorry, I could not finish {what}: clawbot was interrupted{times} while working on "
        f"{it}. Please send {it} again{end}"
    )


def deadline_notice(asked: Sequence[str], limit: str) -> str:
    what, _, end = _about(asked)
    return (
        f"Sorry, answering {what} took longer than {limit} (the turn deadline), so I stopped. "
        f"Ask again, perhaps in smaller steps{end}"
    )


def failure_notice(asked: Sequence[str], reason: str | None = None) -> str:
    """Anything else: ``reason`` says what went wrong, if it is the person's to know."""
    what, it, end = _about(asked)
    why = f": {reason}" if reason else " because something went wrong on my side"
    return f"Sorry, I could not finish {what}{why}. Please send {it} again{end}"


def _about(asked: Sequence[str]) -> tuple[str, str, str]:
    """How a notice names what it gives up on: the object, its pronoun, and how the notice
    ends (a full stop, or a colon and the numbered quotes). Without a message to quote (an
    internal turn, a job from before the quotes were kept) it says "your request"."""
    if not asked:
        return "your request", "it", "."
    if len(asked) == 1:
        return f"your message {quote(asked[0])}", "it", "."
    listing = "".join(f"\n{n}. {quote(text)}" for n, text in enumerate(asked, 1))
    return f"{len(asked)} of your messages", "them", f":{listing}"
