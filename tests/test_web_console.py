"""The web console over HTTP: who gets in (the printed login URL, its cookie), forged
forms refused, everything escaped, long transcripts paginated, what a turn's model saw
read from the audit, and where the console may listen."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import sqlite3
from pathlib import Path

import httpx

from clawbot.agents.profiles import AgentSpec
from clawbot.cli.checks import console_check
from clawbot.clock import ManualClock
from clawbot.console.auth import COOKIE
from clawbot.console.context import ConsoleContext
from clawbot.console.logtail import LogTail
from clawbot.console.server import ConsoleServer, listening_problem
from clawbot.store import SqliteStore
from clawbot.testing import MemoryChannel, ScriptedModel

from .console_site import Site, console_settings, conversation, csrf_of, logged_in, site

__all__ = ["site"]

PLANTED = "<script>window.planted = 1</script>"


async def test_a_page_without_a_login_is_refused_with_401(site: Site) -> None:
    async with httpx.AsyncClient(base_url=site.base) as client:
        response = await client.get("/")

    assert response.status_code == 401


async def test_a_wrong_token_a_missing_one_and_a_forged_cookie_get_the_same_401(
    site: Site,
) -> None:
    async with httpx.AsyncClient(base_url=site.base) as client:
        wrong = await client.get("/login?token=not-the-token")
        missing = await client.get("/login")
        forged = await client.get("/", headers={"cookie": f"{COOKIE}=forged"})

    assert {wrong.status_code, missing.status_code, forged.status_code} == {401}
    assert wrong.text == missing.text == forged.text
    assert COOKIE not in wrong.headers.get("set-cookie", "")


async def test_the_login_url_sets_a_secure_httponly_strict_cookie_and_drops_the_token(
    site: Site,
) -> None:
    async with httpx.AsyncClient(base_url=site.base) as client:
        response = await client.get(site.login_url)

    cookie = response.headers["set-cookie"].lower()
    assert response.status_code == 303 and response.headers["location"] == "/"
    assert "secure" in cookie and "httponly" in cookie and "samesite=strict" in cookie


async def test_only_hashes_of_the_token_and_the_cookie_are_stored(site: Site) -> None:
    token = site.login_url.split("token=", 1)[1]
    async with logged_in(site) as client:
        cookie = client.headers["cookie"].split("=", 1)[1]
    store = site.bot.store
    assert isinstance(store, SqliteStore)
    await store.flush()

    with contextlib.closing(sqlite3.connect(store.path)) as db:
        dump = "\n".join(db.iterdump())

    assert token not in dump and cookie not in dump
    assert hashlib.sha256(token.encode()).hexdigest() in dump


async def test_the_logged_in_operator_sees_the_sessions_page(site: Site) -> None:
    await conversation(site.bot, "memory:alice", ["hello", "hi there"])
    async with logged_in(site) as client:
        response = await client.get("/", params={"q": "alice"})

    assert response.status_code == 200
    assert "memory:alice" in response.text


async def test_a_form_without_the_csrf_token_is_refused_and_changes_nothing(site: Site) -> None:
    async with logged_in(site) as client:
        response = await client.post(
            "/agents/main", data={"toml": 'agent_id = "main"\nname = "hijacked"\n'}
        )

    assert response.status_code == 403
    assert site.bot.agents.get("main").name == "main"


async def test_another_logins_csrf_token_is_refused(site: Site) -> None:
    async with logged_in(site) as mine, logged_in(site) as theirs:
        their_token = csrf_of((await theirs.get("/agents/main")).text)
        response = await mine.post(
            "/agents/main",
            data={"toml": 'agent_id = "main"\nname = "hijacked"\n', "csrf": their_token},
        )

    assert response.status_code == 403
    assert site.bot.agents.get("main").name == "main"


async def test_an_agent_edit_with_the_token_is_checked_saved_and_audited(site: Site) -> None:
    async with logged_in(site) as client:
        page = (await client.get("/agents/main")).text
        response = await client.post(
            "/agents/main",
            data={
                "toml": 'agent_id = "main"\nname = "main"\ndescription = "Edited."\n',
                "csrf": csrf_of(page),
            },
        )
        refused = await client.post(
            "/agents/main",
            data={"toml": 'agent_id = "main"\nname = ""\n', "csrf": csrf_of(page)},
        )

    assert response.status_code == 303
    assert site.bot.agents.get("main").description == "Edited."
    assert refused.status_code == 400 and "Not saved" in refused.text
    records = [r for r in await site.bot.store.audit.all() if r.kind == "operator"]
    assert [(r.tool, r.agent_id, r.arguments) for r in records] == [
        ("agent_update", "operator", {"agent": "main"})
    ]


async def test_a_script_in_a_transcript_an_agent_name_and_a_memory_is_shown_as_text(
    site: Site,
) -> None:
    bot = site.bot
    await conversation(bot, "memory:eve", [PLANTED, "ok"])
    await bot.agents.create(AgentSpec(agent_id="evil", name=PLANTED))
    await bot.store.memories.put(
        namespace="main", key="x", text=PLANTED, tags=(), session_key="memory:eve", agent_id="main"
    )
    async with logged_in(site) as client:
        pages = [
            await client.get("/conversation", params={"key": "memory:eve"}),
            await client.get("/agents"),
            await client.get("/agents/evil"),
            await client.get("/memory"),
        ]

    for page in pages:
        assert page.status_code == 200
        assert PLANTED not in page.text
        assert "&lt;script&gt;window.planted = 1&lt;/script&gt;" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]


async def test_a_long_transcript_is_shown_a_page_at_a_time(site: Site) -> None:
    await conversation(site.bot, "memory:long", [f"message {i}" for i in range(250)])
    async with logged_in(site) as client:
        latest = await client.get("/conversation", params={"key": "memory:long"})
        older_link = latest.text.split('id="older" href="', 1)[1].split('"', 1)[0]
        older = await client.get(older_link.replace("&amp;", "&"))

    assert latest.text.count('class="entry ') == 100
    assert "message 249" in latest.text and "message 149" not in latest.text
    assert "message 149" in older.text and "message 150" not in older.text


async def test_the_conversation_shows_the_ephemeral_blocks_a_turn_saw_from_the_audit(
    site: Site, scripted: ScriptedModel
) -> None:
    bot = site.bot
    recalling = AgentSpec(agent_id="recaller", name="recaller")
    await bot.agents.create(
        recalling.model_copy(
            update={"context": recalling.context.model_copy(update={"memory_recall": True})}
        )
    )
    await bot.store.memories.put(
        namespace="recaller",
        key="colour",
        text="The user's favourite colour is teal.",
        tags=(),
        session_key="memory:x",
        agent_id="recaller",
    )
    await conversation(bot, "memory:rec", [], agent_id="recaller")
    scripted.add("Teal, I remember.")
    channel = bot.outbox.adapter("memory")
    assert isinstance(channel, MemoryChannel)
    receipt = await bot.router.receive(
        channel.message("what is my favourite colour", chat_id="rec")
    )
    await receipt.wait()
    async with logged_in(site) as client:
        page = await client.get("/conversation", params={"key": "memory:rec"})

    stored = await bot.store.transcripts.load("memory:rec", 0)
    assert "teal" not in " ".join(e.text for e in stored if e.role == "user").lower()
    assert "ephemeral context shown to the model" in page.text
    assert "The user&#39;s favourite colour is teal." in page.text


async def test_the_log_tail_masks_secrets(site: Site) -> None:
    secret = "sk-" + "a1b2c3d4e5f6g7h8i9j0k1l2"
    logging.getLogger("clawbot.test").warning("the key is %s", secret)
    async with logged_in(site) as client:
        page = await client.get("/logs")

    assert "the key is [redacted]" in page.text
    assert secret not in page.text


def test_every_interface_without_tls_is_refused_unless_allowed(tmp_path: Path) -> None:
    model = ScriptedModel(name="m")
    exposed = console_settings(tmp_path, model, console_host="0.0.0.0")
    allowed = console_settings(
        tmp_path, model, console_host="0.0.0.0", console_allow_plain_http=True
    )
    local = console_settings(tmp_path, model)

    assert listening_problem(exposed) is not None
    assert console_check(exposed).status == "problem"
    assert listening_problem(allowed) is None
    assert console_check(allowed).status == "warning"
    assert listening_problem(local) is None and console_check(local).status == "ok"


async def test_logging_out_ends_the_login(site: Site) -> None:
    async with logged_in(site) as client:
        page = (await client.get("/")).text
        out = await client.post("/logout", data={"csrf": csrf_of(page)})
        after = await client.get("/")

    assert out.status_code == 200
    assert after.status_code == 401


async def test_a_form_replayed_after_logging_out_is_refused_and_changes_nothing(
    site: Site,
) -> None:
    async with logged_in(site) as client:
        token = csrf_of((await client.get("/agents/main")).text)
        await client.post("/logout", data={"csrf": token})
        replayed = await client.post(
            "/agents/main",
            data={"toml": 'agent_id = "main"\nname = "main"\ndescription = "x"\n', "csrf": token},
        )

    assert replayed.status_code == 401
    assert site.bot.agents.get("main").description != "x"


async def test_a_login_ends_after_the_login_hours_and_a_new_start_retires_the_old_token(
    site: Site,
) -> None:
    bot = site.bot
    clock = ManualClock()
    context = ConsoleContext(
        settings=bot.settings,
        store=bot.store,
        agents=bot.agents,
        approvals=None,
        logs=LogTail(),
        clock=clock,
    )
    server = ConsoleServer(context, host="127.0.0.1", port=0)
    url = await server.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
            cookie = (await client.get(url)).cookies[COOKIE]
            headers = {"cookie": f"{COOKIE}={cookie}"}
            fresh = await client.get("/", headers=headers)
            clock.advance(bot.settings.console_login_hours * 3600 + 1)
            stale = await client.get("/", headers=headers)
            first_token = await client.get(site.login_url)
    finally:
        await server.stop()

    assert fresh.status_code == 200
    assert stale.status_code == 401
    assert first_token.status_code == 401  # the site's token, drawn before this start
