"""The web console served for a test: a bot (approvals supervised, as shipped) with the
console listening on 127.0.0.1 on a free port, and an operator who logged in with the
printed URL (its cookie sent by hand: httpx keeps a Secure cookie for https only)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from clawbot.app import Clawbot
from clawbot.clock import Clock
from clawbot.console.auth import COOKIE
from clawbot.console.context import ConsoleContext
from clawbot.console.logtail import LogTail
from clawbot.console.server import ConsoleServer
from clawbot.messages import TextBlock, TranscriptEntry
from clawbot.routing.sessions import Session
from clawbot.scheduling.jobs import TurnJob
from clawbot.settings import Settings
from clawbot.store import new_id
from clawbot.testing import MemoryChannel, ScriptedModel


@dataclass
class Site:
    bot: Clawbot
    server: ConsoleServer
    login_url: str

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"


def console_settings(tmp_path: Path, model: ScriptedModel, **fields: Any) -> Settings:
    fields.setdefault("autonomy", "supervised")
    fields.setdefault("shell_unsandboxed", "allow-host-access")
    return Settings(
        home=tmp_path / "home",
        model=model.model_string,
        retry_backoff=0,
        _env_file=None,  # type: ignore[call-arg]
        **fields,
    )


@contextlib.asynccontextmanager
async def console_for(settings: Settings, *, clock: Clock | None = None) -> AsyncIterator[Site]:
    """A bot on ``settings`` with its console served on a free port of 127.0.0.1 (telling
    the time by ``clock`` when given)."""
    async with await Clawbot.open(settings) as bot:
        bot.connect(MemoryChannel())
        context = ConsoleContext(
            settings=bot.settings,
            store=bot.store,
            agents=bot.agents,
            approvals=bot.approvals,
            logs=LogTail(),
            poll_seconds=0.05,
            **({"clock": clock} if clock is not None else {}),
        )
        server = ConsoleServer(context, host="127.0.0.1", port=0)
        url = await server.start()
        try:
            yield Site(bot, server, url)
        finally:
            await server.stop()


@pytest.fixture
async def site(tmp_path: Path, scripted: ScriptedModel) -> AsyncIterator[Site]:
    async with console_for(console_settings(tmp_path, scripted)) as served:
        yield served


@contextlib.asynccontextmanager
async def logged_in(site: Site) -> AsyncIterator[httpx.AsyncClient]:
    """A client with the operator's cookie, as the login URL set it."""
    async with httpx.AsyncClient(base_url=site.base) as client:
        response = await client.get(site.login_url)
        cookie = response.cookies.get(COOKIE)
        assert response.status_code == 303 and cookie
        client.headers["cookie"] = f"{COOKIE}={cookie}"
        yield client


def csrf_of(html: str) -> str:
    """The CSRF token a page's forms carry."""
    return html.split('name="csrf" value="', 1)[1].split('"', 1)[0]


async def conversation(
    bot: Clawbot, key: str, texts: list[str], *, agent_id: str = "main", owner: str | None = None
) -> Session:
    """A stored session whose transcript holds ``texts``, user and assistant in turn."""
    channel, _, chat_id = key.partition(":")
    session = await bot.store.sessions.create(
        Session(key=key, channel=channel, chat_id=chat_id, agent_id=agent_id, owner_key=owner)
    )
    entries = [
        TranscriptEntry(role="user" if i % 2 == 0 else "assistant", content=(TextBlock(text=t),))
        for i, t in enumerate(texts)
    ]
    if entries:
        await bot.store.transcripts.append(session, entries)
    return session


async def running_turn(bot: Clawbot, session: Session) -> str:
    """A turn of ``session`` stored as running (what a working subagent has)."""
    job_id = new_id("turn")
    await bot.store.jobs.submit(
        session,
        TurnJob(id=job_id, session_key=session.key, status="running", attempts=1),
        entry=TranscriptEntry(role="user", content=(TextBlock(text="work on it"),), turn_id=job_id),
    )
    return job_id
