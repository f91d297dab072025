"""``clawbot doctor``: check what ``clawbot run`` needs, one line per check, no secrets.

Each check says ``ok``, ``problem`` (with what to do) or ``off`` (a channel that is simply not
configured). Everything runs offline: token *formats* are checked, not the tokens themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from clawbot.channels.interface import Adapter
from clawbot.errors import ClawbotError
from clawbot.routing.access import AccessRules
from clawbot.settings import Settings, config_files, config_files_read
from clawbot.tools.host_shell import HOST_ACCESS, HOST_REACH
from clawbot.tools.sandbox import INSTALL_HINT, Bubblewrap, find_bubblewrap

Status = Literal["ok", "warning", "problem", "off"]

CHANNEL_SETTINGS_HINT = (
    "set CLAWBOT_TELEGRAM_TOKEN (Telegram), CLAWBOT_DISCORD_TOKEN (Discord) or "
    "CLAWBOT_SLACK_BOT_TOKEN and CLAWBOT_SLACK_APP_TOKEN (Slack)"
)


@dataclass(frozen=True)
class Check:
    status: Status
    subject: str
    detail: str

    @property
    def line(self) -> str:
        return f"{self.status:<8} {self.subject}: {self.detail}"


def all_ok(checks: list[Check]) -> bool:
    return all(check.status != "problem" for check in checks)


async def diagnose(settings: Settings, channels: Mapping[str, type[Adapter]]) -> list[Check]:
    """Every check, in the order a person fixes things: channels, model, home, database."""
    checks = _channel_checks(settings, channels)
    checks.append(_model_check(settings))
    if settings.tts_model:
        checks.append(_model_check(settings, settings.tts_model, "speech model"))
    checks.extend(_model_check(settings, m, "fallback model") for m in settings.fallback_models)
    home = _home_check(settings)
    checks.append(home)
    if home.status == "ok":
        checks.append(database := await _database_check(settings))
        if database.status == "ok":
            checks += await leader_checks(settings, channels)
        if database.status == "ok" and settings.peer_groups:
            checks.append(await _peer_groups_check(settings))
        if database.status == "ok" and (settings.daily_budget_usd or settings.budget_per_day):
            checks.append(await budget_check(settings))
    checks.append(settings_files_check(settings))
    configured = [c for c in channels if c in _configured(checks)]
    checks.append(_access_check(settings, configured))
    if settings.approvers:
        checks.append(approvers_check(settings, configured))
    checks.append(shell_check(find_bubblewrap(), settings))
    checks.append(await semantic_check(settings))
    checks.append(console_check(settings))
    if settings.mcp_servers:
        checks += await mcp_checks(settings)
    return checks


async def mcp_checks(settings: Settings) -> list[Check]:
    """Each MCP server started once: its tools, or why it failed (``clawbot mcp list``)."""
    from clawbot.mcp.plugin import probe

    checks = []
    for status in await probe(settings):
        subject = f"mcp {status.name}"
        if status.state != "connected":
            checks.append(
                Check(
                    "problem",
                    subject,
                    f"{status.error} — check its command or url ({status.transport})",
                )
            )
            continue
        skipped = f"; {len(status.skipped)} skipped (clawbot mcp list)" if status.skipped else ""
        checks.append(Check("ok", subject, f"{len(status.tools)} tools{skipped}"))
    return checks


def console_check(settings: Settings) -> Check:
    """Where the web console would listen: a warning beyond this machine, a problem where
    it would listen in clear (it refuses to start then)."""
    from clawbot.console.server import exposure_warning, listening_problem

    problem = listening_problem(settings)
    if problem is not None:
        return Check(
            "problem",
            "web console",
            f"{problem}; set CLAWBOT_CONSOLE_TLS_CERT and CLAWBOT_CONSOLE_TLS_KEY or "
            "CLAWBOT_CONSOLE_HOST=127.0.0.1",
        )
    warning = exposure_warning(settings)
    if warning is not None:
        return Check("warning", "web console", warning)
    where = f"{settings.console_host}:{settings.console_port}"
    return Check("ok", "web console", f"listens on {where}, this machine only")


def _configured(checks: list[Check]) -> set[str]:
    return {c.subject for c in checks if c.status != "off"}


def _channel_checks(settings: Settings, channels: Mapping[str, type[Adapter]]) -> list[Check]:
    checks: list[Check] = []
    for name, adapter in sorted(channels.items()):
        problems = adapter.check_settings(settings)
        if not adapter.is_configured(settings):
            detail = "; ".join(problems) or "no settings given"
            checks.append(Check("off", name, f"not configured ({detail})"))
        elif problems:
            checks.append(Check("problem", name, "; ".join(problems)))
        else:
            checks.append(Check("ok", name, "settings and token format look right"))
    if all(check.status == "off" for check in checks):
        checks.append(
            Check(
                "problem",
                "channels",
                "none is configured, so `clawbot run` has nothing to serve — "
                + CHANNEL_SETTINGS_HINT,
            )
        )
    return checks


def _model_check(settings: Settings, model: str | None = None, what: str = "model") -> Check:
    """The model's provider key (or another model's: the speech model's)."""
    from clawbot.providers import missing_credentials

    model = model or settings.model
    subject = f"{what} {model}"
    missing = missing_credentials(model)
    if missing:
        return Check("problem", subject, f"no API key — set {' or '.join(missing)}")
    return Check("ok", subject, "provider credentials are present")


def _home_check(settings: Settings) -> Check:
    from clawbot.agents.home import prepare_home

    subject = f"home {settings.home}"
    try:
        prepare_home(settings)
    except ClawbotError as exc:
        return Check("problem", subject, str(exc))
    if not settings.workspace_dir.is_dir():
        return Check(
            "problem",
            subject,
            f"the workspace folder {settings.workspace_dir} does not exist — create it or "
            "unset CLAWBOT_WORKSPACE",
        )
    return Check("ok", subject, f"writable; workspace {settings.workspace_dir}")


async def _database_check(settings: Settings) -> Check:
    from clawbot.memory.embeddings import configured_embedder
    from clawbot.store import database_name, open_store

    subject = f"database {database_name(settings)}"
    embedder = configured_embedder(settings)
    try:
        store = await open_store(settings, embedder)
    except ClawbotError as exc:
        return Check("problem", subject, str(exc))
    try:
        version = await store.schema_version()
    finally:
        await store.close()
    detail = f"opens, schema version {version}"
    vectors = getattr(store, "vectors", None)  # PostgreSQL's: pgvector or not, and why
    if vectors is not None and embedder is not None:
        detail += f"; semantic search {vectors.line}"
    return Check("ok", subject, detail)


async def leader_checks(settings: Settings, channels: Mapping[str, type[Adapter]]) -> list[Check]:
    """On PostgreSQL, which process holds each configured connection a platform allows once
    per bot (Telegram's long polling), if any: processes sharing the database take turns."""
    from clawbot.store import leader_locks

    locks = leader_locks(settings, "clawbot doctor")
    checks: list[Check] = []
    for _name, adapter in sorted(channels.items()):
        if locks is None or not adapter.is_configured(settings) or adapter.check_settings(settings):
            continue
        exclusive = adapter.from_settings(settings).exclusive_intake
        if exclusive is None:
            continue
        lock = locks(exclusive)
        try:
            holder = await lock.holder()
        finally:
            await lock.release()
        led = f"led by `{holder}`" if holder else "no process holds it now (none is serving)"
        checks.append(Check("ok", exclusive, led))
    return checks


async def budget_check(settings: Settings, now: datetime | None = None) -> Check:
    """What today's (UTC) model calls spent of the daily budgets: the bot's cap, and how
    many conversations spent their own. A spent budget is a problem: calls are refused."""
    from clawbot.runtime.budgets import Spent
    from clawbot.runtime.usage import UsageFilter, format_usd
    from clawbot.store import open_store

    today = (now or datetime.now(UTC)).date().isoformat()
    store = await open_store(settings)
    try:
        total = await store.usage.totals(UsageFilter(day=today))
        per_conversation = await store.usage.grouped("session", UsageFilter(day=today))
    finally:
        await store.close()
    parts: list[str] = []
    spent_out: list[str] = []
    if settings.daily_budget_usd:
        limit = settings.daily_budget_usd
        calls = "1 call" if total.calls == 1 else f"{total.calls:,} calls"
        parts.append(
            f"today's {calls} spent {format_usd(total.cost_usd)} of ${limit:,.2f}"
            " (CLAWBOT_DAILY_BUDGET_USD)"
        )
        if total.cost_usd >= limit:
            spent_out.append("CLAWBOT_DAILY_BUDGET_USD")
    budget = settings.budget_per_day
    if budget is not None:
        over = [
            group.key
            for group in per_conversation
            if group.key != "-"
            and Spent(group.totals.tokens, group.totals.cost_nanousd).share_of(budget) >= 1
        ]
        parts.append(
            f"{len(over)} conversation(s) spent their daily {budget.describe()}"
            " (CLAWBOT_BUDGET_PER_DAY)" + (f": {', '.join(over[:5])}" if over else "")
        )
        if over:
            spent_out.append("CLAWBOT_BUDGET_PER_DAY")
    detail = "; ".join(parts)
    if spent_out:
        detail += (
            f". Model calls they cover are refused until the next day (UTC): raise"
            f" {' or '.join(spent_out)} to go on sooner"
        )
        return Check("problem", "budgets", detail)
    return Check("ok", "budgets", detail)


async def _peer_groups_check(settings: Settings) -> Check:
    """Every agent a peer group names exists: stored, in the agents folder, or ``main``.
    Read-only (the bot saves the folder's agents when it starts)."""
    import difflib

    from clawbot.agents.files import load_agent_folder
    from clawbot.agents.profiles import DEFAULT_AGENT_ID
    from clawbot.memory.embeddings import configured_embedder
    from clawbot.store import open_store

    store = await open_store(settings, configured_embedder(settings))
    try:
        known = {record.spec.agent_id for record in await store.agents.list()}
    finally:
        await store.close()
    files, _ = load_agent_folder(settings.agents_dir)
    known |= {item.spec.agent_id for item in files} | {DEFAULT_AGENT_ID}
    unknown = []
    for name, group in sorted(settings.peer_groups.items()):
        for agent_id in group.agents:
            if agent_id not in known:
                close = difflib.get_close_matches(agent_id, sorted(known), n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                unknown.append(f"group {name!r} names {agent_id!r}, which is no agent{hint}")
    if unknown:
        return Check(
            "problem",
            "peer groups",
            f"{'; '.join(unknown)} — correct the name in [peer_groups.<name>] of clawbot.toml "
            "or add the agent (`clawbot agents list` shows them)",
        )
    groups = ", ".join(
        f"{name} ({', '.join(group.agents)})"
        for name, group in sorted(settings.peer_groups.items())
    )
    return Check("ok", "peer groups", groups)


def settings_files_check(settings: Settings) -> Check:
    """Which ``clawbot.toml`` files were read, in order (a later one overrides)."""
    read = config_files_read(settings)
    if not read:
        looked = " and ".join(str(path.absolute()) for path in config_files(settings.home))
        return Check("ok", "settings files", f"no clawbot.toml (looked for {looked})")
    files = ", then ".join(str(path.absolute()) for path in read)
    later = " (the later overrides)" if len(read) > 1 else ""
    return Check("ok", "settings files", f"read {files}{later}")


def _access_check(settings: Settings, channels: list[str]) -> Check:
    rules = AccessRules.from_settings(settings)
    policies = ", ".join(f"{name} {rules.dm_policy_for(name)}" for name in channels)
    return Check(
        "ok",
        "access",
        f"DMs: {policies or rules.dm_policy}; {len(rules.allowed_senders)} allowed sender(s), "
        f"{len(rules.allowed_groups)} allowed group(s); groups "
        + ("need a mention" if rules.group_require_mention else "are answered without a mention"),
    )


def approvers_check(settings: Settings, channels: list[str]) -> Check:
    """Every approver (CLAWBOT_APPROVERS) can reach the bot where requests are shown."""
    rules = AccessRules.from_settings(settings)
    problems = []
    for entry in settings.approvers:
        channel, _, sender_id = entry.partition(":")
        channel = channel.strip().lower()
        if channel not in channels:
            problems.append(f"{entry} is on {channel}, which is not configured")
        elif why := rules.unreachable(channel, sender_id.strip()):
            problems.append(f"{entry} cannot reach the bot: {why}")
    if problems:
        return Check(
            "problem",
            "approvers",
            "; ".join(problems) + " — allow a group they are in, or let them DM the bot",
        )
    return Check(
        "ok",
        "approvers",
        f"{len(settings.approvers)} listed, each can reach the bot where requests are shown",
    )


async def semantic_check(settings: Settings) -> Check:
    """Whether the local embedding model loads (a litellm one is checked at its first use:
    the doctor stays offline)."""
    from clawbot.memory.embeddings import LOCAL, configured_embedder

    subject = "semantic recall"
    embedder = configured_embedder(settings)
    if embedder is None:
        return Check("off", subject, "full-text search alone (CLAWBOT_MEMORY_EMBEDDINGS=off)")
    if settings.memory_embeddings.strip().lower() != LOCAL:
        return Check("ok", subject, f"{embedder.name} through litellm (tried at first use)")
    try:
        await embedder.embed(["a test"])
    except ClawbotError as exc:
        return Check("problem", subject, str(exc))
    return Check("ok", subject, f"{embedder.name} loads (no download, nothing leaves)")


def shell_check(sandbox: Bubblewrap | None, settings: Settings) -> Check:
    """How shell_exec runs: sandboxed (risk guarded), on the host because the operator
    allowed it (risk unsafe, and what it reaches), or not at all (and how to enable it)."""
    if sandbox is not None:
        return Check("ok", "shell sandbox", "bubblewrap works: shell_exec runs sandboxed (guarded)")
    if settings.shell_unsandboxed == HOST_ACCESS:
        return Check(
            "ok",
            "shell sandbox",
            "bubblewrap (bwrap) is missing or cannot run here, and "
            f"CLAWBOT_SHELL_UNSANDBOXED={HOST_ACCESS}: shell_exec is unsafe (a confirmation "
            f"for every call) and {HOST_REACH} — to sandbox it, {INSTALL_HINT}",
        )
    return Check(
        "off",
        "shell sandbox",
        "bubblewrap (bwrap) is missing or cannot run here, so shell_exec is not offered — "
        f"{INSTALL_HINT}; or set CLAWBOT_SHELL_UNSANDBOXED={HOST_ACCESS} to run commands on "
        "the host, where they can read and change every file of the bot's user (the .env "
        "with its keys and tokens, the database with every transcript)",
    )
