"""The console's pages that change things, over HTTP, and the commands that serve it:
approvals (deny, and a console beside the serving process that only lists them), memories
forgotten, agents created, a trace, and ``clawbot console`` printing its login URL once."""

from __future__ import annotations

import asyncio
import sys

import httpx

from clawbot.agents.profiles import AgentSpec
from clawbot.console.context import ConsoleContext
from clawbot.console.logtail import LogTail
from clawbot.console.server import ConsoleServer
from clawbot.testing import MemoryChannel, ScriptedModel, call

from .console_site import Site, conversation, csrf_of, logged_in, site
from .spawned import spawn

__all__ = ["site"]


async def waiting_request(site: Site, scripted: ScriptedModel) -> tuple[MemoryChannel, str]:
    channel = site.bot.outbox.adapter("memory")
    assert isinstance(channel, MemoryChannel)
    scripted.add(call("file_write", path="notes.md", content="hi"), "Not written, then.")
    await site.bot.router.receive(channel.message("write notes.md"))
    asked = await channel.sent_when(lambda m: "Approval needed (" in m.text)
    return channel, asked.text.split("Approval needed (", 1)[1].split(")", 1)[0]


async def test_a_call_denied_in_the_console_is_not_run_and_the_model_is_told(
    site: Site, scripted: ScriptedModel
) -> None:
    channel, rid = await waiting_request(site, scripted)
    async with logged_in(site) as client:
        page = (await client.get("/approvals")).text
        answered = await client.post(
            f"/approvals/{rid}", data={"answer": "deny", "csrf": csrf_of(page)}
        )

    assert f"Denied: file_write ({rid})." in answered.text
    await channel.sent_when(lambda m: m.text == "Not written, then.")
    assert not (site.bot.workspace.root / "notes.md").exists()
    assert "answered by operator (console)" in scripted.requests[-1].tool_results[-1]


async def test_a_console_beside_the_serving_process_lists_approvals_but_answers_none(
    site: Site, scripted: ScriptedModel
) -> None:
    _, rid = await waiting_request(site, scripted)
    bot = site.bot
    beside = ConsoleServer(
        ConsoleContext(
            settings=bot.settings,
            store=bot.store,
            agents=bot.agents,
            approvals=None,
            logs=LogTail(),
        ),
        host="127.0.0.1",
        port=0,
    )
    url = await beside.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{beside.port}") as client:
            cookie = (await client.get(url)).cookies["clawbot_console"]
            client.headers["cookie"] = f"clawbot_console={cookie}"
            page = (await client.get("/approvals")).text
            answered = await client.post(
                f"/approvals/{rid}", data={"answer": "once", "csrf": csrf_of(page)}
            )
    finally:
        await beside.stop()

    assert rid in page and "clawbot run --console" in page
    assert 'value="once"' not in page
    assert answered.status_code == 200
    stored = await bot.store.approvals.get(rid)
    assert stored is not None and stored.status == "pending"


async def test_a_memory_forgotten_in_the_console_is_gone_and_audited(site: Site) -> None:
    memories = site.bot.store.memories
    await memories.put(
        namespace="main", key="colour", text="teal", tags=(), session_key="m:a", agent_id="main"
    )
    async with logged_in(site) as client:
        page = (await client.get("/memory", params={"q": "teal"})).text
        response = await client.post(
            "/memory/forget",
            data={"namespace": "main", "key": "colour", "q": "teal", "csrf": csrf_of(page)},
        )

    assert "Forgot main:colour." in response.text
    assert await memories.get("main", "colour") is None
    records = [r for r in await site.bot.store.audit.all() if r.kind == "operator"]
    assert [(r.tool, r.arguments) for r in records] == [
        ("memory_forget", {"memory": "main:colour"})
    ]


async def test_an_agent_is_created_only_once_its_draft_passes_the_registrys_review(
    site: Site,
) -> None:
    async with logged_in(site) as client:
        token = csrf_of((await client.get("/agents/new")).text)
        incomplete = await client.post("/agents/new", data={"name": "Translator", "csrf": token})
        created = await client.post(
            "/agents/new",
            data={
                "name": "Translator",
                "description": "Translates.",
                "system_prompt": "Translate what you are given.",
                "csrf": token,
            },
        )

    assert incomplete.status_code == 400 and "missing: description" in incomplete.text
    assert created.status_code == 303 and created.headers["location"] == "/agents/translator"
    spec = site.bot.agents.find("translator")
    assert spec == AgentSpec(
        agent_id="translator",
        name="Translator",
        description="Translates.",
        system_prompt="Translate what you are given.",
    )


async def test_a_trace_page_shows_every_call_the_message_set_off(
    site: Site, scripted: ScriptedModel
) -> None:
    channel = site.bot.outbox.adapter("memory")
    assert isinstance(channel, MemoryChannel)
    scripted.add(call("list_dir", path="."), "Listed.")
    receipt = await site.bot.router.receive(channel.message("what is there?"))
    await receipt.wait()
    (record,) = [r for r in await site.bot.store.audit.all() if r.tool == "list_dir"]
    async with logged_in(site) as client:
        audit = await client.get("/audit")
        trace = await client.get("/trace", params={"id": record.trace_id})

    assert f"/trace?id={record.trace_id}" in audit.text
    assert "list_dir" in trace.text and "1 records in 1 sessions" in trace.text


async def test_the_sessions_page_shows_each_sessions_agent_model_and_messages(
    site: Site,
) -> None:
    await conversation(site.bot, "memory:carol", ["a", "b", "c"], agent_id="coder")
    async with logged_in(site) as client:
        page = (await client.get("/", params={"q": "coder"})).text

    row = page.split("memory:carol</a>", 1)[1].split("</tr>", 1)[0]
    cells = [c.split(">", 1)[1].split("</td>", 1)[0].strip() for c in row.split("<td")[1:]]
    assert cells[:4] == [
        "memory (dm)",
        "coder",
        site.bot.agents.get("coder").model or site.bot.settings.model,
        "3",
    ]


async def test_clawbot_console_prints_a_login_url_that_logs_in(
    tmp_path: object, spawned_processes: None
) -> None:
    process = await spawn(
        sys.executable,
        "-m",
        "clawbot",
        "console",
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
    url = line.removeprefix("Web console: open ").strip()
    async with httpx.AsyncClient() as client:
        response = await client.get(url)
    process.terminate()
    await process.wait()

    assert line.startswith("Web console: open http://127.0.0.1:")
    assert response.status_code == 303
    assert process.returncode == 0


async def test_clawbot_console_refuses_every_interface_without_tls(
    spawned_processes: None, monkeypatch: object
) -> None:
    import os

    env = {**os.environ, "CLAWBOT_CONSOLE_HOST": "0.0.0.0"}
    process = await spawn(
        sys.executable,
        "-m",
        "clawbot",
        "console",
        "--port",
        "0",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)

    assert process.returncode == 1 and out == b""
    assert "without TLS" in err.decode() and "CLAWBOT_CONSOLE_ALLOW_PLAIN_HTTP" in err.decode()


async def test_the_operator_answers_a_group_chats_request_though_no_approver_is_listed(
    site: Site, scripted: ScriptedModel
) -> None:
    channel = site.bot.outbox.adapter("memory")
    assert isinstance(channel, MemoryChannel)
    scripted.add(call("file_write", path="team.md", content="hi"), "Written for the team.")
    receipt = await site.bot.router.receive(
        channel.message("write team.md", chat_id="team", chat_type="group")
    )
    asked = await channel.sent_when(lambda m: "Approval needed (" in m.text)
    rid = asked.text.split("Approval needed (", 1)[1].split(")", 1)[0]
    await site.bot.router.handle(
        channel.message(f"/approve {rid}", chat_id="team", chat_type="group")
    )
    refused = channel.texts[-1]
    async with logged_in(site) as client:
        page = (await client.get("/approvals")).text
        answered = await client.post(
            f"/approvals/{rid}", data={"answer": "once", "csrf": csrf_of(page)}
        )

    assert refused.startswith("Only this chat's approvers can answer")
    assert f"Approved once: file_write ({rid})." in answered.text
    await receipt.wait()
    assert channel.texts[-1] == "Written for the team."
