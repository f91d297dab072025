"""The access gateway: DM policies and pairing, group allowlist and mention gating, commands."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from clawbot.app import Clawbot
from clawbot.errors import ClawbotError, ConfigError
from clawbot.messages import InboundMessage
from clawbot.routing.access import AccessGateway, Pairing
from clawbot.routing.router import Handled
from clawbot.settings import Settings, load_settings
from clawbot.testing import MemoryChannel, ScriptedModel

CODE = re.compile(r"pairing code is ([A-Z2-9]{8})\.")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class Gated:
    """A bot behind the access gateway, with helpers to speak as anyone anywhere."""

    def __init__(self, bot: Clawbot, channel: MemoryChannel, clock: Clock) -> None:
        self.bot = bot
        self.channel = channel
        self.clock = clock
        self.pairing = Pairing(bot.store, clock=clock)

    async def dm(self, text: str, sender: str = "ann", channel: str = "memory") -> Handled:
        return await self.bot.router.handle(
            InboundMessage(
                channel=channel, chat_id=f"dm-{sender}", sender_id=sender, sender_name=sender,
                text=text, message_id=None,
            )
        )  # fmt: skip

    async def group(
        self, text: str, sender: str = "ann", chat: str = "g1", **fields: Any
    ) -> Handled:
        return await self.bot.router.handle(
            InboundMessage(
                channel="memory", chat_id=chat, chat_type="group", sender_id=sender,
                sender_name=sender.title(), text=text, **fields,
            )
        )  # fmt: skip

    def code_in(self, handled: Handled) -> str:
        assert handled.reply is not None
        match = CODE.search(handled.reply)
        assert match, handled.reply
        return match.group(1)


@pytest.fixture
def access_settings() -> dict[str, Any]:
    return {}


@pytest.fixture
async def gated(settings: Settings, access_settings: dict[str, Any]) -> AsyncIterator[Gated]:
    settings = settings.model_copy(update=access_settings)
    clock = Clock()
    async with await Clawbot.open(settings) as bot:
        channel = MemoryChannel()
        bot.connect(channel)
        bot.connect(MemoryChannel("other"))
        bot.connect(MemoryChannel("console"))
        bot.router.access = AccessGateway(bot.store, settings, clock=clock)
        yield Gated(bot, channel, clock)


def configure(**values: Any) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("access_settings", [values])


# ---- pairing ------------------------------------------------------------------------------


async def test_unknown_dm_sender_gets_a_code_and_nothing_reaches_the_agent(
    gated: Gated, scripted: ScriptedModel
) -> None:
    handled = await gated.dm("hello bot")

    assert handled.kind == "rejected"
    assert re.fullmatch(r"[ABCDEFGHJKLMNPQRSTUVWXYZ23456789]{8}", gated.code_in(handled))
    assert "clawbot pairing approve memory " in gated.channel.texts[0]
    assert scripted.requests == []
    assert await gated.bot.store.transcripts.count("memory:dm-ann") == 0


async def test_a_sender_writing_again_gets_the_same_pending_code(gated: Gated) -> None:
    first = gated.code_in(await gated.dm("hello"))
    gated.clock.advance(minutes=30)

    second = gated.code_in(await gated.dm("hello again?"))

    assert second == first
    assert len(await gated.pairing.pending()) == 1


async def test_at_most_three_codes_wait_per_channel_then_try_later(
    gated: Gated, scripted: ScriptedModel
) -> None:
    for sender in ("ann", "bob", "cid"):
        gated.code_in(await gated.dm("hi", sender=sender))

    fourth = await gated.dm("hi", sender="dan")

    assert fourth.reply is not None and "try again later" in fourth.reply
    assert CODE.search(fourth.reply) is None
    assert [r.sender_id for r in await gated.pairing.pending()] == ["ann", "bob", "cid"]
    assert scripted.requests == []


async def test_the_pending_cap_is_per_channel(gated: Gated) -> None:
    for sender in ("ann", "bob", "cid"):
        await gated.dm("hi", sender=sender)

    other = await gated.dm("hi", sender="dan", channel="other")

    gated.code_in(other)


async def test_concurrent_strangers_never_exceed_the_cap(gated: Gated) -> None:
    senders = ["ann", "bob", "cid", "dan", "eve", "ann", "bob"]

    results = await asyncio.gather(*(gated.dm("hi", sender=s) for s in senders))

    codes = {CODE.search(r.reply or "") for r in results} - {None}
    assert len(await gated.pairing.pending()) == 3
    assert len({m.group(1) for m in codes if m}) == 3


async def test_approved_sender_reaches_the_agent_with_the_next_message(
    gated: Gated, scripted: ScriptedModel
) -> None:
    code = gated.code_in(await gated.dm("hello"))
    scripted.add("Nice to meet you.")

    await gated.pairing.approve("memory", code)
    handled = await gated.dm("now can we talk?")

    assert handled.kind == "turn"
    assert gated.channel.texts[-1] == "Nice to meet you."
    assert [r.last_user_text for r in scripted.requests] == ["now can we talk?"]
    assert await gated.pairing.pending() == []


async def test_approval_persists_in_the_database(
    settings: Settings, scripted: ScriptedModel
) -> None:
    clock = Clock()
    async with await Clawbot.open(settings) as bot:
        bot.router.access = AccessGateway(bot.store, settings, clock=clock)
        bot.connect(MemoryChannel())
        handled = await bot.router.handle(
            InboundMessage(channel="memory", chat_id="dm-ann", sender_id="ann", text="hi")
        )
        code = CODE.search(handled.reply or "")
        assert code
        await Pairing(bot.store, clock=clock).approve("memory", code.group(1))

    async with await Clawbot.open(settings) as reopened:
        reopened.router.access = AccessGateway(reopened.store, settings, clock=clock)
        reopened.connect(MemoryChannel())
        handled = await reopened.router.handle(
            InboundMessage(channel="memory", chat_id="dm-ann", sender_id="ann", text="back")
        )

    assert handled.kind == "turn"


async def test_codes_are_approved_whatever_their_case_and_spacing(gated: Gated) -> None:
    code = gated.code_in(await gated.dm("hello"))

    await gated.pairing.approve(" Memory ", f"{code[:4].lower()} {code[4:]}")

    assert (await gated.dm("hi")).kind == "turn"


async def test_a_code_expires_after_one_hour(gated: Gated) -> None:
    code = gated.code_in(await gated.dm("hello"))
    gated.clock.advance(minutes=59)
    assert len(await gated.pairing.pending()) == 1
    gated.clock.advance(minutes=1)

    with pytest.raises(ClawbotError, match="has expired") as raised:
        await gated.pairing.approve("memory", code)

    assert "message the bot again" in str(raised.value)
    assert await gated.pairing.pending() == []


async def test_after_expiry_the_sender_gets_a_new_code_and_the_slot_is_free(gated: Gated) -> None:
    old = {gated.code_in(await gated.dm("hi", sender=s)) for s in ("ann", "bob", "cid")}
    gated.clock.advance(hours=1, seconds=1)

    again = gated.code_in(await gated.dm("hi", sender="ann"))
    newcomer = gated.code_in(await gated.dm("hi", sender="dan"))

    assert again not in old and newcomer not in old
    assert {r.sender_id for r in await gated.pairing.pending()} == {"ann", "dan"}


async def test_rejected_sender_stays_out_and_the_code_is_spent(
    gated: Gated, scripted: ScriptedModel
) -> None:
    code = gated.code_in(await gated.dm("hello"))

    await gated.pairing.reject("memory", code)

    with pytest.raises(ClawbotError, match="already rejected"):
        await gated.pairing.approve("memory", code)
    assert (await gated.dm("please?")).kind == "rejected"
    assert scripted.requests == []


async def test_approving_an_unknown_code_says_how_to_list_the_codes(gated: Gated) -> None:
    with pytest.raises(ClawbotError, match="no pairing code ABCDEFGH on memory") as raised:
        await gated.pairing.approve("memory", "ABCDEFGH")

    assert "clawbot pairing list" in str(raised.value)


async def test_a_code_approves_only_on_its_own_channel(gated: Gated) -> None:
    code = gated.code_in(await gated.dm("hello"))

    with pytest.raises(ClawbotError, match="no pairing code"):
        await gated.pairing.approve("other", code)


# ---- DM policies --------------------------------------------------------------------------


@configure(dm_policy="allowlist", allowed_senders=["memory:bob"])
async def test_allowlist_ignores_unknown_senders_without_a_reply(
    gated: Gated, scripted: ScriptedModel
) -> None:
    denied = await gated.dm("hello", sender="ann")
    allowed = await gated.dm("hello", sender="bob")

    assert (denied.kind, allowed.kind) == ("ignored", "turn")
    assert len(gated.channel.sent) == 1
    assert [r.last_user_text for r in scripted.requests] == ["hello"]
    assert await gated.pairing.pending() == []


async def test_allowlist_also_admits_senders_approved_by_pairing(
    gated: Gated, settings: Settings
) -> None:
    code = gated.code_in(await gated.dm("hello"))
    await gated.pairing.approve("memory", code)
    strict = settings.model_copy(update={"dm_policy": "allowlist"})
    gated.bot.router.access = AccessGateway(gated.bot.store, strict, clock=gated.clock)

    assert (await gated.dm("hi")).kind == "turn"


@configure(dm_policy="open")
async def test_open_policy_lets_anyone_in(gated: Gated) -> None:
    assert (await gated.dm("hi", sender="stranger")).kind == "turn"


@configure(dm_policy="disabled", allowed_senders=["memory:ann"])
async def test_disabled_policy_ignores_every_dm(gated: Gated, scripted: ScriptedModel) -> None:
    handled = await gated.dm("hi")

    assert handled.kind == "ignored"
    assert gated.channel.sent == [] and scripted.requests == []


@configure(dm_policy="disabled", dm_policies={"memory": "open"})
async def test_a_per_channel_policy_overrides_the_global_one(gated: Gated) -> None:
    assert (await gated.dm("hi", channel="memory")).kind == "turn"
    assert (await gated.dm("hi", channel="other")).kind == "ignored"


@configure(dm_policy="disabled")
async def test_the_console_owner_is_always_allowed(gated: Gated) -> None:
    assert (await gated.dm("hi", channel="console")).kind == "turn"


@configure(allowed_senders=["memory:*"])
async def test_a_wildcard_sender_entry_admits_everyone_on_that_channel(gated: Gated) -> None:
    assert (await gated.dm("hi", sender="anyone")).kind == "turn"
    assert (await gated.dm("hi", sender="anyone", channel="other")).kind == "rejected"


# ---- groups -------------------------------------------------------------------------------


async def test_a_group_not_in_the_allowlist_is_ignored_silently(
    gated: Gated, scripted: ScriptedModel
) -> None:
    handled = await gated.group("hey @bot", mentioned=True)

    assert handled.kind == "ignored"
    assert gated.channel.sent == [] and scripted.requests == []
    assert await gated.bot.store.sessions.keys() == []


@configure(allowed_groups=["memory:g1"])
async def test_an_allowed_group_is_answered_when_the_bot_is_mentioned(
    gated: Gated, scripted: ScriptedModel
) -> None:
    scripted.add("Here I am.")

    handled = await gated.group("are you there?", mentioned=True)

    assert handled.kind == "turn"
    assert gated.channel.texts == ["Here I am."]


@configure(allowed_groups=["memory:g1"])
async def test_unmentioned_group_chatter_is_context_but_starts_no_turn(
    gated: Gated, scripted: ScriptedModel
) -> None:
    first = await gated.group("I think the deploy is on Friday", sender="bob")
    assert first.kind == "ignored" and scripted.requests == [] and gated.channel.sent == []

    await gated.group("when is the deploy?", mentioned=True)

    history = [m["content"] for m in scripted.requests[0].messages if m["role"] == "user"]
    assert history == ["[Bob] I think the deploy is on Friday", "[Ann] when is the deploy?"]


@configure(allowed_groups=["memory:g1"])
async def test_redelivered_group_chatter_is_kept_once(gated: Gated) -> None:
    await gated.group("same thing twice", message_id="m1")
    await gated.group("same thing twice", message_id="m1")

    assert await gated.bot.store.transcripts.count("memory:g1") == 1


@configure(allowed_groups=["memory:g1"], group_require_mention=False)
async def test_without_require_mention_every_group_message_is_answered(gated: Gated) -> None:
    assert (await gated.group("anyone?")).kind == "turn"


@configure(allowed_groups=["memory:*"])
async def test_a_wildcard_group_entry_allows_every_group_of_the_channel(gated: Gated) -> None:
    assert (await gated.group("hi", chat="g42", mentioned=True)).kind == "turn"


# ---- slash commands -----------------------------------------------------------------------


async def test_commands_from_an_unknown_dm_sender_are_ignored_without_reply(
    gated: Gated,
) -> None:
    handled = await gated.dm("/status")

    assert handled.kind == "ignored"
    assert gated.channel.sent == []
    assert await gated.pairing.pending() == []


async def test_start_from_an_unknown_dm_sender_asks_for_a_pairing_code(
    gated: Gated, scripted: ScriptedModel
) -> None:
    handled = await gated.dm("/start")

    assert handled.kind == "rejected"
    assert "Your pairing code is" in gated.channel.texts[0]
    assert len(await gated.pairing.pending()) == 1
    assert scripted.requests == []


@configure(allowed_senders=["memory:ann"])
async def test_start_from_an_allowed_sender_is_greeted_without_a_model_call(
    gated: Gated, scripted: ScriptedModel
) -> None:
    handled = await gated.dm("/start")

    assert handled.kind == "command"
    assert gated.channel.texts[0].startswith("Hi! Write to me in plain words")
    assert scripted.requests == []


@configure(allowed_senders=["memory:ann"])
async def test_commands_from_an_allowed_sender_are_answered(gated: Gated) -> None:
    handled = await gated.dm("/help")

    assert handled.kind == "command"
    assert gated.channel.texts[0].startswith("Commands:")


@configure(allowed_groups=["memory:g1"], allowed_senders=["memory:ann"])
async def test_in_a_group_only_allowed_senders_may_use_commands(gated: Gated) -> None:
    stranger = await gated.group("/new", sender="bob", mentioned=True)
    owner = await gated.group("/new", sender="ann", mentioned=True)

    assert (stranger.kind, owner.kind) == ("ignored", "command")
    assert len(gated.channel.sent) == 1


@configure(allowed_groups=["memory:g1"], allowed_senders=["memory:ann"])
async def test_an_ignored_group_command_is_logged(
    gated: Gated, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="clawbot.access"):
        await gated.group("/new", sender="bob", mentioned=True)

    assert "ignored a command from bob in memory group g1: not an allowed sender" in [
        record.getMessage() for record in caplog.records
    ]


@configure(allowed_groups=["memory:g1"], allowed_senders=["memory:ann"], approvers=["memory:boss"])
async def test_answers_to_approval_requests_reach_the_approvals_from_anyone_in_a_group(
    gated: Gated, caplog: pytest.LogCaptureFixture
) -> None:
    """An approver need not be an allowed sender; the approvals answer everyone else, and
    the operator sees who tried."""
    with caplog.at_level(logging.INFO, logger="clawbot.approvals"):
        approver = await gated.group("/approve k7m2pq once", sender="boss")
        stranger = await gated.group("/deny k7m2pq", sender="bob")

    assert (approver.kind, stranger.kind) == ("command", "command")
    assert approver.reply == stranger.reply == "No approval request has the id 'k7m2pq'."
    (refused,) = [r.getMessage() for r in caplog.records if "refused an answer" in r.getMessage()]
    assert refused.startswith("refused an answer to approval k7m2pq from bob in memory:")


# ---- settings -----------------------------------------------------------------------------


def test_per_channel_policies_are_read_from_one_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWBOT_DM_POLICIES", "telegram:open, Slack:allowlist")

    assert load_settings().dm_policies == {"telegram": "open", "slack": "allowlist"}


def test_an_unknown_per_channel_policy_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWBOT_DM_POLICIES", "telegram:everyone")

    with pytest.raises(ConfigError, match="CLAWBOT_DM_POLICIES"):
        load_settings()


def test_an_allowlist_entry_without_its_channel_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAWBOT_ALLOWED_SENDERS", "12345")

    with pytest.raises(ConfigError, match=r"CLAWBOT_ALLOWED_SENDERS.*channel:id"):
        load_settings()
