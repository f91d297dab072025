"""Switching models and agents, and creating or changing agents, by natural language.

The same operations as ``/models``, ``/model``, ``/agents`` and ``/agent``, for the model to
call. ``session_set_agent`` accepts a near match (``/agent`` does not). ``agent_create`` is
guided: an incomplete or invalid draft comes back with what is missing or wrong, and nothing
is written until it validates. Changes take effect on the next turn.
"""

from __future__ import annotations

from typing import Annotated, Any, NoReturn

from pydantic import Field

from clawbot.agents.profiles import AgentSpec
from clawbot.agents.switchboard import Switchboard
from clawbot.errors import ToolError
from clawbot.security.reach import siblings_beyond
from clawbot.tools.registry import Tool, ToolContext, make_tool

NEXT_TURN = "It takes effect from the next message."
DRAFT_FIELDS = (
    "Fields: name, description, system_prompt (required); agent_id (default: from the name); "
    "model ('provider/model', default: the global model); temperature (0-2); "
    "tools {allow: [...], deny: [...]} with tool names, '*' wildcards or groups such as "
    "'group:files'; skills {allow, deny}; context {memory_recall, recall_from, recall_items, "
    "recall_chars, recall_tags, max_history_messages}; "
    "workspace_overlay (bool); siblings {agent_id or '*': 'read' | 'write'}: other agents' "
    "folders it may use besides its own."
)


def _board(ctx: ToolContext) -> Switchboard:
    if ctx.switchboard is None:
        raise ToolError("switching models and agents is not available here")
    return ctx.switchboard


async def models_list(
    ctx: ToolContext,
    provider: Annotated[
        str | None, Field(description="only this provider's models, e.g. 'openai'")
    ] = None,
) -> str:
    """List the models this conversation can switch to, as provider/model lines."""
    board = _board(ctx)
    if provider:
        return board.catalog.provider_listing(provider)
    current, source = board.model_of(ctx.session)
    return board.catalog.listing(f"{current}, {source}")


async def session_set_model(
    model_ref: Annotated[
        str, Field(description="'provider/model' as listed by models_list, or 'default'")
    ],
    ctx: ToolContext,
) -> str:
    """Switch this conversation's model ('default' goes back to the agent's own model)."""
    board = _board(ctx)
    if model_ref.strip().lower() == "default":
        ctx.session = await board.update_session(ctx.session, model_override=None)
        model, source = board.model_of(ctx.session)
        return f"Cleared the model override: {model} ({source}). {NEXT_TURN}"
    check = board.catalog.check(model_ref)
    if check.model is None:
        raise ToolError(check.message, hint="ask the user which model they meant")
    ctx.session = await board.update_session(ctx.session, model_override=check.model)
    return f"This conversation now uses {check.model}. {NEXT_TURN}"


async def agents_list(ctx: ToolContext) -> str:
    """List the agents this conversation can switch to; the active one is marked."""
    board = _board(ctx)
    lines = []
    for spec in board.agents.all():
        active = " [active]" if spec.agent_id == ctx.session.agent_id else ""
        model = spec.model or f"{board.settings.model} (global)"
        lines.append(f"- {spec.agent_id}: {spec.name} — {spec.description} ({model}){active}")
    return "\n".join(lines)


async def session_set_agent(
    agent: Annotated[str, Field(description="the agent's id or name; a near match is accepted")],
    ctx: ToolContext,
) -> str:
    """Hand this conversation to another agent, with its own model, tools and persona."""
    board = _board(ctx)
    spec, candidates = board.agents.fuzzy(agent)
    if spec is None:
        if candidates:
            names = ", ".join(f"{c.agent_id} ({c.name})" for c in candidates)
            raise ToolError(
                f"{agent!r} could mean several agents: {names}",
                hint="ask the user which one, then call session_set_agent with its id",
            )
        known = ", ".join(s.agent_id for s in board.agents.all())
        raise ToolError(f"no agent matches {agent!r}", hint=f"the agents are: {known}")
    ctx.session = await board.update_session(ctx.session, agent_id=spec.agent_id)
    note = ""
    if ctx.session.model_override:
        note = f" The conversation's model override ({ctx.session.model_override}) still applies."
    return (
        f"Switched this conversation to {spec.agent_id} ({spec.name}). {NEXT_TURN}{note} "
        "Finish this reply briefly; the next agent takes over."
    )


async def agent_create(
    draft: Annotated[dict[str, Any], Field(description="the new agent. " + DRAFT_FIELDS)],
    ctx: ToolContext,
) -> str:
    """Create a new agent profile from a draft; an incomplete draft is answered with what is
    missing, so ask the user and call again with the whole draft."""
    board = _board(ctx)
    review = board.agents.review_draft(draft)
    if review.spec is None:
        _refuse(review.problems)
    spec = _checked(board, review.spec, None, ctx)
    await board.agents.create(spec)
    return (
        f"Created agent {spec.agent_id} ({spec.name}). Switch to it with "
        f"session_set_agent or /agent {spec.agent_id}; `clawbot agents export` writes it "
        f"to agents/{spec.agent_id}.toml."
    )


async def agent_update(
    agent: Annotated[str, Field(description="the agent's id or exact name")],
    patch: Annotated[
        dict[str, Any],
        Field(description="only the fields to change; tools/skills/context merge. " + DRAFT_FIELDS),
    ],
    ctx: ToolContext,
) -> str:
    """Change an existing agent profile."""
    board = _board(ctx)
    current = board.agents.exact(agent)
    if current is None:
        close = ", ".join(s.agent_id for s in board.agents.suggest(agent))
        raise ToolError(
            f"no agent is called {agent!r}",
            hint=f"did you mean {close}?" if close else "agents_list shows the agents",
        )
    review = board.agents.review_draft(patch, updating=current)
    if review.spec is None:
        _refuse(review.problems)
    spec = _checked(board, review.spec, current, ctx)
    if spec == current:
        return f"Nothing changed: {spec.agent_id} already has these settings."
    await board.agents.update(spec)
    before, after = current.model_dump(), spec.model_dump()
    changed = ", ".join(key for key in after if after[key] != before[key])
    return f"Updated {spec.agent_id}: {changed}. {NEXT_TURN}"


def _checked(
    board: Switchboard, spec: AgentSpec, old: AgentSpec | None, ctx: ToolContext
) -> AgentSpec:
    problems = []
    if spec.model is not None and (old is None or spec.model != old.model):
        check = board.catalog.check(spec.model)
        if check.model is None:
            problems.append(f"model: {check.message}")
    actor = board.agents.get(ctx.agent_id)
    beyond = board.granted_beyond(actor, spec, old)
    if beyond:
        problems.append(
            f"tools: you cannot grant {', '.join(beyond)}, which you do not have yourself"
        )
    folders = siblings_beyond(actor, spec, old)
    if folders:
        problems.append(
            f"siblings: you cannot grant {', '.join(folders)}, a folder you do not reach so"
        )
    if problems:
        _refuse("wrong: " + "; ".join(problems))
    return spec


def _refuse(problems: str) -> NoReturn:
    raise ToolError(
        f"nothing was saved — {problems}",
        hint="ask the user for what is missing or wrong, then call again with the whole draft",
    )


def agent_tools() -> list[Tool]:
    """The catalog tools are safe; switching and agent administration are high-risk."""
    return [
        make_tool(models_list, risk="safe", groups=("group:catalog",)),
        make_tool(agents_list, risk="safe", groups=("group:catalog",)),
        make_tool(session_set_model, risk="guarded", groups=("group:sessions",)),
        make_tool(session_set_agent, risk="guarded", groups=("group:sessions",)),
        make_tool(agent_create, risk="guarded", groups=("group:agents",)),
        make_tool(agent_update, risk="guarded", groups=("group:agents",)),
    ]
