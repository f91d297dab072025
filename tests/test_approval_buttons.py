"""Approval buttons on the platforms that have them, through the whole pipeline: the request
carries Approve once / Approve for this session / Deny, and a press is the presser's command
(acknowledged as the platform requires), so who may answer is checked as for a typed one.
Once answered (or expired) the request's message is edited: its buttons gone, a line saying
what was decided and by whom; an edit the platform refuses changes nothing else.

Real adapter <-> platform stand-in (callback query, block action, component interaction),
service, router, runtime with a scripted model, outbox.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import discord
import pytest

from adapters.discord.buttons import view_for
from adapters.slack.buttons import blocks_for
from adapters.telegram.adapter import TelegramAdapter
from adapters.telegram.sending import part_to_send_kwargs
from clawbot.app import Clawbot
from clawbot.channels.rendering import render_parts
from clawbot.cli.service import Service
from clawbot.messages import Action, InboundMessage, OutboundEdit, OutboundMessage
from clawbot.routing.access import AccessGateway
from clawbot.settings import Settings
from clawbot.testing import ScriptedModel, call
from tests.standins.discord import GENERAL_CHANNEL_ID, DiscordHarness
from tests.standins.harness import ButtonHarness, SentRecord
from tests.standins.slack import SlackHarness
from tests.standins.telegram import DEFAULT_GROUP_ID, TelegramHarness

OWNER = "1001"
BOSS = "3003"
MALLORY = "4004"
LONG = Action(label="Too long", command="/deny " + "x" * 100)
DENY = Action(label="Deny", command="/deny k7m2pq")


@dataclass(frozen=True)
class Platform:
    name: str
    harness: Callable[[], ButtonHarness]
    group_id: str

    def __str__(self) -> str:
        return self.name


PLATFORMS = [
    Platform("telegram", TelegramHarness, str(DEFAULT_GROUP_ID)),
    Platform("discord", DiscordHarness, GENERAL_CHANNEL_ID),
    Platform("slack-socket", lambda: SlackHarness("socket"), "C0GENERAL"),
    Platform("slack-http", lambda: SlackHarness("http"), "C0GENERAL"),
]


@dataclass
class World:
    platform: Platform
    harness: ButtonHarness
    bot: Clawbot
    service: Service
    model: ScriptedModel

    async def request(
        self, text: str, *, sender_id: str = OWNER, chat_type: Literal["dm", "group"] = "dm"
    ) -> SentRecord:
        """Say ``text``; the approval request its turn sends."""
        await self.harness.inject_message(
            text, sender_id=sender_id, chat_type=chat_type, mention=chat_type == "group"
        )
        (record,) = await self.sent_where(lambda r: "Approval needed (" in r.text)
        return record

    async def sent_where(
        self, wanted: Callable[[SentRecord], bool], count: int = 1
    ) -> list[SentRecord]:
        async def found() -> list[SentRecord]:
            while True:
                matching = [r for r in self.harness.sent() if wanted(r)]
                if len(matching) >= count:
                    return matching
                await self.harness.wait_sent(len(self.harness.sent()) + 1, timeout=10)

        return await asyncio.wait_for(found(), 10)


@pytest.fixture(params=PLATFORMS, ids=str)
async def world(
    request: pytest.FixtureRequest, settings: Settings, scripted: ScriptedModel
) -> AsyncIterator[World]:
    async with running(request.param, settings, scripted) as opened:
        yield opened


@asynccontextmanager
async def running(
    platform: Platform, settings: Settings, scripted: ScriptedModel, **updates: Any
) -> AsyncIterator[World]:
    harness = platform.harness()
    await harness.start()
    bot_settings = settings.model_copy(
        update={
            "autonomy": "supervised",
            "allowed_senders": [f"{harness.channel}:{OWNER}"],
            "allowed_groups": [f"{harness.channel}:{platform.group_id}"],
            "approvers": [f"{harness.channel}:{BOSS}"],
            # these tests read the messages sent; streamed replies have tests of their own
            "streaming": False,
            **updates,
        }
    )
    try:
        async with await Clawbot.open(bot_settings) as bot:
            bot.router.access = AccessGateway(bot.store, bot.settings)  # as `clawbot run` does
            service = Service(bot, [harness.make_adapter()], shutdown_timeout=10)
            await service.start()
            try:
                yield World(platform, harness, bot, service, scripted)
            finally:
                await service.stop()
    finally:
        await harness.stop()


def writes(path: str) -> Any:
    return call("file_write", path=path, content="hello")


async def test_an_approval_request_carries_the_three_buttons(world: World) -> None:
    world.model.add(writes("notes.md"), "Written.")

    record = await world.request("write notes.md")

    rid = record.text.split("Approval needed (", 1)[1].split(")", 1)[0]
    assert world.harness.buttons(record) == [
        ("Approve once", f"/approve {rid} once"),
        ("Approve for this session", f"/approve {rid} session"),
        ("Deny", f"/deny {rid}"),
    ]
    await world.harness.press(record, "Deny")
    await world.sent_where(lambda r: r.text.startswith("Denied: file_write"))


async def test_a_press_by_the_dm_owner_approves_and_the_turn_runs_the_tool(world: World) -> None:
    world.model.add(writes("notes.md"), "Written.")
    record = await world.request("write notes.md")

    await world.harness.press(record, "Approve once", sender_id=OWNER)

    await world.sent_where(lambda r: r.text == "Written.")
    texts = [r.text for r in world.harness.sent()]
    assert any(t.startswith("Approved once: file_write") for t in texts)
    assert (world.bot.workspace.root / "notes.md").read_text() == "hello"


REFUSAL = (
    "Only this chat's approvers can answer approval requests (CLAWBOT_APPROVERS); ask one of them."
)


async def test_a_press_by_a_non_approver_in_a_group_is_refused_to_them_alone(
    world: World,
) -> None:
    """Slack: an ephemeral message; Telegram: the press's answer, as an alert; Discord: an
    ephemeral follow-up of the interaction. The group never reads it."""
    world.model.add(writes("notes.md"), "Written.")
    record = await world.request("write notes.md", chat_type="group")

    await world.harness.press(record, "Approve for this session", sender_id=MALLORY)
    refusals = await world.harness.wait_private(1)
    await world.harness.press(record, "Approve once", sender_id=BOSS)
    await world.sent_where(lambda r: r.text == "Written.")

    assert refusals == [(MALLORY, REFUSAL)]
    assert not any(r.text.startswith("Only this chat's") for r in world.harness.sent())
    assert (world.bot.workspace.root / "notes.md").read_text() == "hello"


@pytest.mark.parametrize("platform", [p for p in PLATFORMS if p.name.startswith("slack")], ids=str)
async def test_on_slack_a_typed_answer_by_a_non_approver_is_refused_to_them_alone(
    platform: Platform, settings: Settings, scripted: ScriptedModel
) -> None:
    async with running(platform, settings, scripted) as world:
        world.model.add(writes("notes.md"), "Written.")
        record = await world.request("write notes.md", chat_type="group")
        rid = record.text.split("Approval needed (", 1)[1].split(")", 1)[0]

        await world.harness.inject_message(
            f"/approve {rid} once", sender_id=MALLORY, sender_name="Mallory", chat_type="group"
        )
        refusals = await world.harness.wait_private(1)

    assert refusals == [(MALLORY, REFUSAL)]
    assert not any(r.text.startswith("Only this chat's") for r in world.harness.sent())


async def test_an_approver_who_is_not_an_allowed_sender_answers_by_typing_in_a_group(
    world: World,
) -> None:
    world.model.add(writes("notes.md"), "Written.")
    record = await world.request("write notes.md", chat_type="group")
    rid = record.text.split("Approval needed (", 1)[1].split(")", 1)[0]

    await world.harness.inject_message(
        f"/approve {rid} once", sender_id=BOSS, sender_name="Boss", chat_type="group"
    )

    await world.sent_where(lambda r: r.text == "Written.")
    assert world.harness.shown(record).text.endswith("\nApproved once by Boss.")


async def test_a_second_press_of_the_same_button_is_answered_not_dropped(world: World) -> None:
    world.model.add(writes("notes.md"), "Written.")
    record = await world.request("write notes.md")
    rid = record.text.split("Approval needed (", 1)[1].split(")", 1)[0]

    await world.harness.press(record, "Approve once")
    await world.sent_where(lambda r: r.text == "Written.")
    await world.harness.press(record, "Approve once")

    (again,) = await world.sent_where(lambda r: r.text.startswith(f"Request {rid} was already"))
    assert again.text == f"Request {rid} was already approved once by Ann."


def the_request_without_its_commands(record: SentRecord) -> str:
    """The request's text up to the line with the commands that answer it."""
    return record.text.split("\nAnswer within", 1)[0]


async def test_a_press_removes_the_buttons_and_the_message_says_who_approved(
    world: World,
) -> None:
    world.model.add(writes("notes.md"), "Written.")
    record = await world.request("write notes.md")

    await world.harness.press(record, "Approve once")
    await world.sent_where(lambda r: r.text == "Written.")

    now = world.harness.shown(record)
    assert world.harness.buttons(now) == []
    assert now.text == the_request_without_its_commands(record) + "\nApproved once by Ann."


async def test_a_typed_deny_removes_the_buttons_and_the_message_says_who_denied(
    world: World,
) -> None:
    world.model.add(writes("notes.md"), "I will not write it.")
    record = await world.request("write notes.md")
    rid = record.text.split("Approval needed (", 1)[1].split(")", 1)[0]

    await world.harness.inject_message(f"/deny {rid}")
    await world.sent_where(lambda r: r.text == "I will not write it.")

    now = world.harness.shown(record)
    assert world.harness.buttons(now) == []
    assert now.text == the_request_without_its_commands(record) + "\nDenied by Ann."


@pytest.mark.parametrize("platform", PLATFORMS, ids=str)
async def test_an_expired_request_loses_its_buttons_and_says_it_expired(
    platform: Platform, settings: Settings, scripted: ScriptedModel
) -> None:
    async with running(platform, settings, scripted, approval_timeout=0.05) as world:
        world.model.add(writes("notes.md"), "Nobody answered.")
        record = await world.request("write notes.md")
        await world.sent_where(lambda r: r.text == "Nobody answered.")

        now = world.harness.shown(record)

    assert world.harness.buttons(now) == []
    assert now.text == the_request_without_its_commands(record) + "\nExpired: no answer in 0.05 s."


async def test_an_edit_the_platform_refuses_is_logged_once_and_the_answer_stands(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.model.add(writes("notes.md"), "Written.")
    record = await world.request("write notes.md")
    rid = record.text.split("Approval needed (", 1)[1].split(")", 1)[0]
    world.harness.delete(record)

    with caplog.at_level(logging.WARNING):
        await world.harness.inject_message(f"/approve {rid} once")
        await world.sent_where(lambda r: r.text == "Written.")

    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    (logged,) = [r for r in warnings if record.message_id in r.getMessage()]
    assert logged.getMessage().startswith(f"could not update message {record.message_id}")
    assert any(r.text.startswith("Approved once: file_write") for r in world.harness.sent())
    assert (world.bot.workspace.root / "notes.md").read_text() == "hello"


async def test_telegram_takes_message_is_not_modified_as_the_edit_done() -> None:
    harness = TelegramHarness()
    await harness.start()
    adapter = harness.make_adapter()

    async def ignore(_message: InboundMessage) -> None:
        return None

    await adapter.start(ignore)
    try:
        request = OutboundMessage(
            channel="telegram", chat_id=OWNER, text="Approval needed", actions=(DENY,)
        )
        (sent,) = await adapter.send(request)
        assert sent.message_id is not None
        edit = OutboundEdit(
            channel="telegram", chat_id=OWNER, message_id=sent.message_id, text="Denied by Ann."
        )
        await adapter.edit(edit)
        await adapter.edit(edit)  # Telegram refuses it: the message shows this already
    finally:
        await adapter.stop()
        await harness.stop()

    edits = [name for name, _ in harness.server.calls if name == "editMessageText"]
    assert len(edits) == 2
    assert harness.server.edits == [(int(OWNER), int(sent.message_id))]


# ---- the conversions, where a platform limit decides ----------------------------------------


def test_telegram_puts_the_buttons_on_the_last_part_only_and_skips_an_oversized_command() -> None:
    message = OutboundMessage(
        channel="telegram",
        chat_id="1001",
        text="request",
        actions=(Action(label="Yes", command="/approve k7m2pq once"), LONG),
    )
    part = render_parts("request", TelegramAdapter.limits)[0]

    first = part_to_send_kwargs(part, message, first=True)
    last = part_to_send_kwargs(part, message, first=False, last=True)

    assert "reply_markup" not in first
    rows = last["reply_markup"].inline_keyboard
    assert [(b.text, b.callback_data) for row in rows for b in row] == [
        ("Yes", "/approve k7m2pq once")
    ]


def test_slack_splits_a_long_text_into_sections_slack_accepts_above_the_buttons() -> None:
    text = "x" * 3500

    blocks = blocks_for(text, (Action(label="Yes", command="/approve k7m2pq once"),), markup=True)

    sections = [b["text"]["text"] for b in blocks if b["type"] == "section"]
    assert [len(s) for s in sections] == [3000, 500] and "".join(sections) == text
    assert blocks[-1]["elements"][0]["value"] == "/approve k7m2pq once"


def test_slack_sends_no_empty_actions_block_when_no_command_fits_a_button() -> None:
    too_long = Action(label="Yes", command="/approve " + "x" * 2000)

    blocks = blocks_for("Approve?", (too_long,), markup=True)

    assert [b["type"] for b in blocks] == ["section"]  # Slack refuses empty actions blocks


async def test_discord_gives_no_button_to_a_command_over_100_characters() -> None:
    view = view_for((Action(label="Yes", command="/approve k7m2pq once"), LONG))

    assert view is not None
    assert [item.custom_id for item in view.children if isinstance(item, discord.ui.Button)] == [
        "/approve k7m2pq once"
    ]
    view.stop()
