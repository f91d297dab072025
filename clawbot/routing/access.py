"""The access gateway: who may talk to the bot, where, and when a message starts a turn.

Safe defaults: in DMs an unknown sender gets a pairing code and nothing reaches the agent
until the owner approves it (``clawbot pairing approve``); in groups the bot answers only in
allowed groups and only when mentioned or replied to; slash commands are accepted only from
allowed senders and ignored from anyone else (logged, not answered), except the answers to an
approval request (``/approve``, ``/deny``, a button press), which reach the approvals from
anyone in an allowed group: they take an approver's answer and tell anyone else why not. The
console is the local owner.

It plugs into the router as its :data:`~clawbot.routing.router.AccessCheck`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from clawbot.errors import ClawbotError
from clawbot.messages import InboundMessage, parse_command, utcnow
from clawbot.routing.pairing import (
    CODE_TTL,
    MAX_PENDING_PER_CHANNEL,
    PairingRequest,
    new_code,
    normalize_code,
)
from clawbot.routing.router import ALLOW, AccessDecision
from clawbot.settings import DmPolicy, Settings
from clawbot.store import Store

log = logging.getLogger("clawbot.access")

Clock = Callable[[], datetime]
OWNER_CHANNELS = frozenset({"console"})
"""Channels whose only user is the person running clawbot."""

IGNORE = AccessDecision(allow=False)


ANSWERS_TO_REQUESTS = frozenset({"approve", "deny"})
"""Commands that answer an approval request: the approvals decide who may (in a group, the
senders in CLAWBOT_APPROVERS, allowed senders or not) and tell anyone else why not."""


def is_start(text: str) -> bool:
    parsed = parse_command(text)
    return parsed is not None and parsed[0] == "start"


def answers_a_request(text: str) -> bool:
    parsed = parse_command(text)
    return parsed is not None and parsed[0] in ANSWERS_TO_REQUESTS


def pairing_reply(request: PairingRequest, now: datetime) -> str:
    minutes = max(1, round((request.expires_at - now).total_seconds() / 60))
    return (
        f"Hi! I don't know you yet. Your pairing code is {request.code}.\n"
        f"Ask the owner of this bot to run: clawbot pairing approve {request.channel} "
        f"{request.code}\n"
        f"The code expires in {minutes} minutes. Until it is approved, your messages are not "
        "passed on."
    )


def pairing_full_reply(channel: str) -> str:
    return (
        f"Too many people are waiting for approval on {channel} right now. Please try again later."
    )


@dataclass(frozen=True)
class AccessRules:
    """The access settings, parsed once."""

    dm_policy: DmPolicy
    dm_policies: dict[str, DmPolicy]
    allowed_senders: frozenset[tuple[str, str]]
    allowed_groups: frozenset[tuple[str, str]]
    group_require_mention: bool

    @classmethod
    def from_settings(cls, settings: Settings) -> AccessRules:
        return cls(
            dm_policy=settings.dm_policy,
            dm_policies=dict(settings.dm_policies),
            allowed_senders=_pairs(settings.allowed_senders),
            allowed_groups=_pairs(settings.allowed_groups),
            group_require_mention=settings.group_require_mention,
        )

    def dm_policy_for(self, channel: str) -> DmPolicy:
        return self.dm_policies.get(channel, self.dm_policy)

    def listed_sender(self, channel: str, sender_id: str) -> bool:
        return (channel, sender_id) in self.allowed_senders or (
            channel,
            "*",
        ) in self.allowed_senders

    def allowed_group(self, channel: str, chat_id: str) -> bool:
        return (channel, chat_id) in self.allowed_groups or (channel, "*") in self.allowed_groups

    def unreachable(self, channel: str, sender_id: str) -> str | None:
        """Why ``sender_id`` can never write to the bot on ``channel``, or None when they
        can: in an allowed group of the channel (anyone in it may, commands aside), or in a
        DM the channel's policy takes from them (open; pairing, once the owner approves
        their code; allowlist, when listed). What ``clawbot doctor`` checks approvers by."""
        if any(group_channel == channel for group_channel, _ in self.allowed_groups):
            return None
        policy = self.dm_policy_for(channel)
        if policy in ("open", "pairing"):
            return None
        if policy == "allowlist" and self.listed_sender(channel, sender_id):
            return None
        dms = "DMs are disabled" if policy == "disabled" else "DMs take only allowed senders"
        return f"no {channel} group is allowed (CLAWBOT_ALLOWED_GROUPS) and {channel} {dms}"


def _pairs(items: list[str]) -> frozenset[tuple[str, str]]:
    pairs = set()
    for item in items:
        channel, _, ident = item.partition(":")
        pairs.add((channel.strip().lower(), ident.strip()))
    return frozenset(pairs)


class AccessGateway:
    """The router's access check. The clock is injected so code expiry is testable."""

    def __init__(self, store: Store, settings: Settings, *, clock: Clock = utcnow) -> None:
        self.store = store
        self.rules = AccessRules.from_settings(settings)
        self.clock = clock

    async def __call__(self, message: InboundMessage) -> AccessDecision:
        if message.channel in OWNER_CHANNELS:
            return ALLOW
        is_command = parse_command(message.text) is not None
        if message.chat_type == "dm":
            return await self._dm(message, is_command)
        return await self._group(message, is_command)

    async def sender_allowed(self, channel: str, sender_id: str) -> bool:
        """Whether this sender may use the bot (and its slash commands) on this channel."""
        if self.rules.dm_policy_for(channel) == "open":
            return True
        if self.rules.listed_sender(channel, sender_id):
            return True
        return await self.store.access.is_approved_sender(channel, sender_id)

    async def _dm(self, message: InboundMessage, is_command: bool) -> AccessDecision:
        policy = self.rules.dm_policy_for(message.channel)
        if policy == "disabled":
            log.info("ignored a %s DM: DMs are disabled on this channel", message.channel)
            return IGNORE
        if await self.sender_allowed(message.channel, message.sender_id):
            return ALLOW
        # /start is how Telegram opens a chat with a bot: a newcomer's first message, so
        # under pairing it asks for a code like any other first message (nothing runs).
        if policy == "allowlist" or (is_command and not is_start(message.text)):
            log.info(
                "ignored a %s DM from %s: not an allowed sender",
                message.channel,
                message.sender_id,
            )
            return IGNORE
        return await self._pair(message)

    async def _pair(self, message: InboundMessage) -> AccessDecision:
        now = self.clock()
        request = await self.store.pairing.request(
            channel=message.channel,
            sender_id=message.sender_id,
            sender_name=message.sender_name,
            chat_id=message.chat_id,
            now=now,
            expires_at=now + CODE_TTL,
            max_pending=MAX_PENDING_PER_CHANNEL,
            new_code=new_code,
        )
        if request is None:
            log.warning(
                "%s: %d pairing requests are already waiting; told %s to try later",
                message.channel,
                MAX_PENDING_PER_CHANNEL,
                message.sender_id,
            )
            return AccessDecision(allow=False, reply=pairing_full_reply(message.channel))
        log.info(
            "%s: %s (%s) is waiting for approval — clawbot pairing approve %s %s",
            message.channel,
            message.sender_name or "someone",
            message.sender_id,
            message.channel,
            request.code,
        )
        return AccessDecision(allow=False, reply=pairing_reply(request, now))

    async def _group(self, message: InboundMessage, is_command: bool) -> AccessDecision:
        if not self.rules.allowed_group(message.channel, message.chat_id):
            log.info(
                "ignored a message in %s group %s: not in CLAWBOT_ALLOWED_GROUPS",
                message.channel,
                message.chat_id,
            )
            return IGNORE
        commands = await self.sender_allowed(message.channel, message.sender_id)
        if is_command and not commands:
            if answers_a_request(message.text):
                # A button press or a typed /approve: answered by the approvals, which accept
                # the approvers and tell anyone else why not.
                return AccessDecision(allow=True, commands=True, start_turn=False)
            log.info(
                "ignored a command from %s in %s group %s: not an allowed sender",
                message.sender_id,
                message.channel,
                message.chat_id,
            )
            return IGNORE
        addressed = message.mentioned or not self.rules.group_require_mention
        return AccessDecision(allow=True, commands=commands, start_turn=addressed)


class Pairing:
    """The owner's side of pairing: what ``clawbot pairing list|approve|reject`` runs."""

    def __init__(self, store: Store, *, clock: Clock = utcnow) -> None:
        self.store = store
        self.clock = clock

    async def pending(self) -> list[PairingRequest]:
        return await self.store.pairing.pending(self.clock())

    async def approve(self, channel: str, code: str) -> PairingRequest:
        """Approve a pending code; the sender's next message reaches the agent."""
        return await self._decide(channel, code, approve=True)

    async def reject(self, channel: str, code: str) -> PairingRequest:
        return await self._decide(channel, code, approve=False)

    async def _decide(self, channel: str, code: str, *, approve: bool) -> PairingRequest:
        channel, code = channel.strip().lower(), normalize_code(code)
        now = self.clock()
        request = await self.store.pairing.get(channel, code)
        if request is None:
            raise ClawbotError(
                f"there is no pairing code {code} on {channel}",
                hint="run `clawbot pairing list` to see the codes waiting for approval",
            )
        if request.status != "pending":
            raise ClawbotError(
                f"the pairing code {code} on {channel} was already {request.status}",
                hint="ask the sender to message the bot again for a new code",
            )
        if request.expires_at <= now:
            raise ClawbotError(
                f"the pairing code {code} on {channel} has expired",
                hint="ask the sender to message the bot again for a new code",
            )
        if not await self.store.pairing.decide(channel, code, approve=approve, now=now):
            raise ClawbotError(
                f"the pairing code {code} on {channel} is no longer pending",
                hint="run `clawbot pairing list` to see the codes waiting for approval",
            )
        return request
