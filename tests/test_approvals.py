"""Approvals: a guarded call waits for a person's yes, asked once in the chat with the
exact commands (and buttons); once, session, deny and timeout; grants and their ends; who
may answer; unsafe tools asking every time; a subagent asking its root's person; a restart
while a request waits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from clawbot.app import Clawbot
from clawbot.messages import OutboundMessage
from clawbot.policies import ToolPolicy
from clawbot.routing.router import Receipt
from clawbot.security.audit import audit_line
from clawbot.settings import Settings
from clawbot.testing import MemoryChannel, ModelRequest, ScriptedModel, Step, call

from .conftest import add_agent, parent_key


def is_request(message: OutboundMessage) -> bool:
    return message.text.startswith("[") and "Approval needed (" in message.text


def request_id(message: OutboundMessage) -> str:
    return message.text.split("Approval needed (", 1)[1].split(")", 1)[0]


def supervised(tmp_path: Path, model: ScriptedModel, **fields: Any) -> Settings:
    fields.setdefault("autonomy", "supervised")
    fields.setdefault("shell_unsandboxed", "allow-host-access")  # where bubblewrap cannot run
    return Settings(
        home=tmp_path / "home",
        model=model.model_string,
        retry_backoff=0,
        _env_file=None,  # type: ignore[call-arg]
        **fields,
    )


@pytest.fixture
async def bot(tmp_path: Path, scripted: ScriptedModel) -> AsyncIterator[Clawbot]:
    async with await Clawbot.open(supervised(tmp_path, scripted)) as opened:
        opened.connect(MemoryChannel())
        yield opened


@pytest.fixture
def channel(bot: Clawbot) -> MemoryChannel:
    adapter = bot.outbox.adapter("memory")
    assert isinstance(adapter, MemoryChannel)
    return adapter


def writes(path: str, content: str = "hello") -> Step:
    return call("file_write", path=path, content=content)


async def ask(bot: Clawbot, channel: MemoryChannel, text: str) -> tuple[Receipt, str]:
    """Send ``text``; wait for the approval request its turn makes; the request's id."""
    asked = [m for m in channel.sent if is_request(m)]
    receipt = await bot.router.receive(channel.message(text))
    request = await channel.sent_when(lambda m: is_request(m) and m not in asked)
    return receipt, request_id(request)


async def command(bot: Clawbot, channel: MemoryChannel, text: str, **fields: Any) -> str:
    await bot.router.handle(channel.message(text, **fields))
    return channel.texts[-1]


async def test_a_guarded_call_waits_and_the_chat_gets_one_clear_request(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(writes("notes.md"), "Written.")

    receipt, rid = await ask(bot, channel, "write notes.md")

    request = next(m for m in channel.sent if is_request(m))
    assert not (bot.workspace.root / "notes.md").exists()
    assert request.text.splitlines() == [
        f"[main]: Approval needed ({rid}): file_write — guarded",
        "  path=notes.md content=hello",
        "Once: this call (and file_write on notes.md for the rest of this turn). Session: "
        "file_write without asking in this session until /new or /grants clear.",
        f"Answer within 300 s: /approve {rid} once · /approve {rid} session · /deny {rid}",
    ]
    assert [(a.label, a.command) for a in request.actions] == [
        ("Approve once", f"/approve {rid} once"),
        ("Approve for this session", f"/approve {rid} session"),
        ("Deny", f"/deny {rid}"),
    ]
    assert await command(bot, channel, f"/approve {rid} once") == (
        f"Approved once: file_write ({rid})."
    )
    await receipt.wait()
    assert (bot.workspace.root / "notes.md").read_text() == "hello"
    call_record, answer = sorted(await bot.store.audit.all(), key=lambda r: r.kind != "tool_call")
    assert (call_record.approval_required, call_record.approval_result) == (True, "approved once")
    assert audit_line(answer).endswith(
        f"main approval {rid} for file_write → approved once by user1"
    )
    assert channel.texts[-1] == "Written."
    assert sum(is_request(m) for m in channel.sent) == 1


async def test_once_covers_the_same_file_for_the_rest_of_the_run_only(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(writes("a.md"), writes("a.md", "again"), writes("b.md"), "Done.")

    receipt, first = await ask(bot, channel, "write twice, then b")
    await command(bot, channel, f"/approve {first} once")
    second = request_id(await channel.sent_when(lambda m: is_request(m) and first not in m.text))
    await command(bot, channel, f"/approve {second}")
    await receipt.wait()

    requests = [m.text for m in channel.sent if is_request(m)]
    assert len(requests) == 2  # a.md asked once for both writes, b.md asked anew
    assert "path=b.md" in requests[1]
    assert (bot.workspace.root / "a.md").read_text() == "again"
    assert await bot.store.approvals.grants_under(parent_key(channel)) == []  # revoked


async def test_the_next_run_asks_again_after_an_approve_once(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(writes("a.md"), "one", writes("a.md"), "two")
    receipt, rid = await ask(bot, channel, "first")
    await command(bot, channel, f"/approve {rid} once")
    await receipt.wait()

    receipt, again = await ask(bot, channel, "second")

    assert again != rid
    await command(bot, channel, f"/deny {again}")
    await receipt.wait()


async def test_a_session_approval_lets_later_runs_go_until_grants_clear(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(writes("a.md"), "one", writes("b.md"), "two", writes("c.md"), "three")
    receipt, rid = await ask(bot, channel, "first")
    await command(bot, channel, f"/approve {rid} session")
    await receipt.wait()

    await bot.router.handle(channel.message("second"))
    listed = await command(bot, channel, "/grants")
    cleared = await command(bot, channel, "/grants clear")
    receipt, again = await ask(bot, channel, "third")

    assert (bot.workspace.root / "b.md").exists()
    assert listed == (
        f"Grants in this chat (/grants clear removes them):\n"
        f"- file_write: this session, request {rid}"
    )
    assert cleared == "Cleared 1 grant(s): guarded tools ask again."
    assert again != rid
    await command(bot, channel, f"/deny {again}")
    await receipt.wait()


async def test_new_ends_a_session_approval(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(writes("a.md"), "one", writes("b.md"), "two")
    receipt, rid = await ask(bot, channel, "first")
    await command(bot, channel, f"/approve {rid} session")
    await receipt.wait()

    await bot.router.handle(channel.message("/new"))
    receipt, again = await ask(bot, channel, "second")

    assert again != rid
    assert await command(bot, channel, "/grants") == (
        "No grants: guarded tools ask before they run."
    )
    await command(bot, channel, f"/deny {again}")
    await receipt.wait()


async def test_a_denied_call_is_not_run_and_the_model_is_told(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(writes("a.md"), "I will not write it then.")

    receipt, rid = await ask(bot, channel, "write")
    assert await command(bot, channel, f"/deny {rid}") == f"Denied: file_write ({rid})."
    await receipt.wait()

    assert not (bot.workspace.root / "a.md").exists()
    told = scripted.requests[1].tool_results[0]
    assert told.startswith("error: not run: the person denied this call (file_write")
    (record,) = [r for r in await bot.store.audit.all() if r.kind == "tool_call"]
    assert (record.status, record.approval_required, record.approval_result) == (
        "refused",
        True,
        "denied",
    )
    assert record.granted == ()


async def test_no_answer_within_the_timeout_is_a_denial_the_model_is_told_of(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.add(writes("a.md"), "Nobody answered.")
    settings = supervised(tmp_path, scripted, approval_timeout=0.01)
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)

        await bot.router.handle(channel.message("write"))

        (request,) = [m for m in channel.sent if is_request(m)]
        rid = request_id(request)
        late = await command(bot, channel, f"/approve {rid}")
        records = await bot.store.audit.tail(20)
    assert not (tmp_path / "home" / "workspace" / "a.md").exists()
    (approval,) = [r for r in records if r.kind == "approval"]
    assert approval.step_id == rid and approval.granted == ()
    assert "expired" in (approval.approval_result or "")
    assert scripted.requests[1].tool_results[0] == (
        f"error: not run: nobody answered the approval request {rid} for file_write within "
        "0 s, so the call was denied; tell the person it needs their approval and what you "
        "wanted to do"
    )
    assert late == f"Request {rid} was already expired."


async def test_in_a_group_only_listed_approvers_may_answer(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.add(writes("a.md"), "Written.")
    settings = supervised(
        tmp_path,
        scripted,
        approvers=["memory:boss"],
        allowed_groups=["memory:team"],
        group_require_mention=False,
    )
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        group = {"chat_id": "team", "chat_type": "group"}
        receipt = await bot.router.receive(channel.message("write", sender_id="alice", **group))
        rid = request_id(await channel.sent_when(is_request))

        refused = await command(bot, channel, f"/approve {rid}", sender_id="mallory", **group)
        approved = await command(bot, channel, f"/approve {rid}", sender_id="boss", **group)
        await receipt.wait()

    assert refused == (
        "Only this chat's approvers can answer approval requests (CLAWBOT_APPROVERS); "
        "ask one of them."
    )
    assert approved == f"Approved once: file_write ({rid})."


async def test_a_request_cannot_be_answered_from_another_chat(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel
) -> None:
    scripted.add(writes("a.md"), "Written.")
    receipt, rid = await ask(bot, channel, "write")

    elsewhere = await command(bot, channel, f"/approve {rid}", chat_id="other")

    assert elsewhere == f"Request {rid} was asked in another chat: answer it there."
    await command(bot, channel, f"/deny {rid}")
    await receipt.wait()


async def test_an_unsafe_tool_asks_at_every_call_and_cannot_be_approved_for_the_session(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.add(writes("a.md"), writes("b.md"), "Done.")
    settings = supervised(
        tmp_path, scripted, risk_profiles={"default": {"risk": {"file_write": "unsafe"}}}
    )
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        receipt, first = await ask(bot, channel, "write twice")
        session = await command(bot, channel, f"/approve {first} session")
        await command(bot, channel, f"/approve {first} once")
        second = request_id(
            await channel.sent_when(lambda m: is_request(m) and first not in m.text)
        )
        await command(bot, channel, f"/approve {second} once")
        await receipt.wait()

    assert session == (
        f"file_write is unsafe: every call asks, so it can only be approved once "
        f"(/approve {first} once)."
    )
    assert sum(is_request(m) for m in channel.sent) == 2


async def test_a_standing_grant_runs_without_asking(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.add(writes("a.md"), "Written.")
    async with await Clawbot.open(supervised(tmp_path, scripted, grants=["file_write"])) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.router.handle(channel.message("write"))
        (record,) = await bot.store.audit.all()

    assert channel.texts == ["Written."]
    assert (record.approval_required, record.approval_result) == (False, "standing grant")


async def test_full_autonomy_runs_guarded_calls_but_unsafe_ones_still_ask(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    edit = call("file_edit", path="a.md", old_text="hello", new_text="bye")
    scripted.add(writes("a.md"), edit, "Done.")
    profile = {"autonomy": "full", "risk": {"file_edit": "unsafe"}}
    settings = supervised(tmp_path, scripted, risk_profiles={"default": profile})
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        receipt = await bot.router.receive(channel.message("go"))
        request = await channel.sent_when(is_request)
        await command(bot, channel, f"/deny {request_id(request)}")
        await receipt.wait()

    assert (tmp_path / "home" / "workspace" / "a.md").read_text() == "hello"
    assert "file_edit — unsafe" in request.text
    assert sum(is_request(m) for m in channel.sent) == 1


async def test_a_read_only_agent_is_offered_only_safe_tools(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.add("ok")
    settings = supervised(tmp_path, scripted, autonomy="read_only")
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.router.handle(channel.message("hi"))

    offered = set(scripted.requests[0].tool_names)
    assert {"file_read", "list_dir"} <= offered
    assert not offered & {"file_write", "file_edit", "sessions_spawn", "delegate"}


async def test_a_subagents_request_goes_to_the_root_chat_labelled_with_its_chain(
    tmp_path: Path, scripted: ScriptedModel, worker: ScriptedModel
) -> None:
    def parent(request: ModelRequest) -> Step:
        if request.last_user_text == "research":
            return call("sessions_spawn", task="write it", agent="worker")
        return "ok"

    scripted.function = parent
    worker.add(writes("agents/worker/w.md"), "written")
    settings = supervised(tmp_path, scripted, grants=["sessions_spawn"])
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await add_agent(
            bot,
            "worker",
            model=worker.model_string,
            tools=ToolPolicy(allow=("file_write",)),
        )
        await bot.router.handle(channel.message("research"))
        request = await channel.sent_when(is_request)
        await command(bot, channel, f"/approve {request_id(request)}")
        await bot.scheduler.wait_idle()

    assert request.text.startswith(f"[main>worker]: Approval needed ({request_id(request)})")
    assert request.session_key == parent_key(channel)
    assert (tmp_path / "home" / "workspace" / "agents" / "worker" / "w.md").exists()


async def test_a_restart_while_a_request_waits_keeps_it_answerable(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    scripted.function = lambda request: (
        writes("a.md") if not request.tool_results else "Written after the restart."
    )
    settings = supervised(tmp_path, scripted)
    async with await Clawbot.open(settings) as bot:
        first = MemoryChannel()
        bot.connect(first)
        await bot.router.receive(first.message("write"))
        rid = request_id(await first.sent_when(is_request))

    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        await bot.scheduler.start()
        answered = await command(bot, channel, f"/approve {rid}")
        await channel.sent_when(lambda m: m.text == "Written after the restart.")

    assert answered == f"Approved once: file_write ({rid})."
    assert not any(is_request(m) for m in channel.sent)  # asked once, before the restart
    assert (tmp_path / "home" / "workspace" / "a.md").read_text() == "hello"


async def test_a_request_whose_drawn_id_is_taken_draws_another(
    bot: Clawbot, channel: MemoryChannel, scripted: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    letters = iter("aaaaaa" + "aaaaaa" + "bbbbbb")  # the second request first draws the first's
    monkeypatch.setattr("clawbot.security.approvals.secrets.choice", lambda alphabet: next(letters))
    scripted.add(
        [
            call("file_write", path="a.md", content="hello"),
            call("file_write", path="b.md", content="hello"),
        ],
        "Both written.",
    )

    _, first = await ask(bot, channel, "write two files")
    asked = [m for m in channel.sent if is_request(m)]
    await bot.router.handle(channel.message(f"/approve {first} once"))
    async with asyncio.timeout(30):  # a crash on the taken id would leave nothing to wait for
        second = await channel.sent_when(lambda m: is_request(m) and m not in asked)

    assert first == "aaaaaa"
    assert request_id(second) == "bbbbbb"
