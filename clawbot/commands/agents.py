"""Slash commands to see and switch models and agents, answered without an LLM call.

``/agent`` switches by exact id or name only; a near miss gets suggestions and changes
nothing. ``/model`` checks the model against the catalog; a typo gets "did you mean".
"""

from __future__ import annotations

from typing import Protocol

from clawbot.agents.switchboard import Switchboard
from clawbot.commands.registry import CommandContext, CommandRegistry
from clawbot.routing.sessions import Session
from clawbot.runtime.resolved_turn import ResolvedTurn


class TurnResolver(Protocol):
    """What ``/skills`` and ``/context`` ask of the runtime: what a turn would get."""

    def resolve(self, session: Session) -> ResolvedTurn: ...


def register_agent_commands(
    registry: CommandRegistry, board: Switchboard, turns: TurnResolver
) -> None:
    @registry.command("models", "list the models you can switch to", usage="[provider [text]]")
    async def _models(ctx: CommandContext) -> str:
        provider, _, text = ctx.args.partition(" ")
        if provider:
            return board.catalog.provider_listing(provider, text.strip())
        model, source = board.model_of(ctx.session)
        return board.catalog.listing(f"{model}, {source}")

    @registry.command(
        "model",
        "show or switch this conversation's model",
        usage="[<provider>/<model> | default]",
    )
    async def _model(ctx: CommandContext) -> str:
        model, source = board.model_of(ctx.session)
        ref = ctx.args.strip()
        if not ref:
            return (
                f"Model: {model} ({source}). Switch with /model <provider>/<model>; "
                "/models lists them."
            )
        if ref.lower() == "default":
            if ctx.session.model_override is None:
                return f"There is no override to clear; the model is {model} ({source})."
            await ctx.update_session(model_override=None)
            model, source = board.model_of(ctx.session)
            return f"Cleared the override. Model: {model} ({source})."
        check = board.catalog.check(ref)
        if check.model is None:
            return f"{check.message} The model is still {model}."
        await ctx.update_session(model_override=check.model)
        return f"Model for this conversation: {check.model} (session override)."

    @registry.command("agents", "list the agents; the active one is marked")
    async def _agents(ctx: CommandContext) -> str:
        lines = ["Agents (switch with /agent <name|id>):"]
        for spec in board.agents.all():
            mark = "▶" if spec.agent_id == ctx.session.agent_id else "•"
            model = f" [{spec.model}]" if spec.model else ""
            lines.append(f"{mark} {spec.label}{model} — {spec.description}")
        problems = board.agents.problems
        if problems:
            lines.append(f"{len(problems)} agent file(s) could not be loaded:")
            lines += [f"  {problem}" for problem in problems]
        return "\n".join(lines)

    @registry.command("agent", "show or switch this conversation's agent", usage="[name|id]")
    async def _agent(ctx: CommandContext) -> str:
        current = board.agents.get(ctx.session.agent_id)
        ref = ctx.args.strip()
        if not ref:
            return f"Agent: {current.label}. Switch with /agent <name|id>; /agents lists them."
        spec = board.agents.exact(ref)
        if spec is None:
            close = board.agents.suggest(ref)
            hint = (
                " Did you mean " + ", ".join(f"/agent {s.agent_id}" for s in close) + "?"
                if close
                else " /agents lists them."
            )
            return f"No agent is called {ref!r}; still {current.agent_id}.{hint}"
        if spec.agent_id == current.agent_id:
            return f"Already talking to {spec.label}."
        await ctx.update_session(agent_id=spec.agent_id)
        model, source = board.model_of(ctx.session)
        return f"Switched to {spec.label}: {spec.description}\nModel: {model} ({source})."

    @registry.command("skills", "list the skills of this conversation's agent")
    async def _skills(ctx: CommandContext) -> str:
        resolved = turns.resolve(ctx.session)
        agent = resolved.agent
        if not resolved.skills:
            return f"{agent.label} has no skills."
        lines = [f"Skills of {agent.label}:"]
        lines += [f"• {skill.name} — {skill.description}" for skill in resolved.skills]
        return "\n".join(lines)

    @registry.command("context", "show what goes into this conversation's system prompt")
    async def _context(ctx: CommandContext) -> str:
        resolved = turns.resolve(ctx.session)
        agent = resolved.agent
        lines = [
            f"Agent: {agent.label}",
            f"Model: {resolved.model} ({resolved.model_source})",
            "System prompt: "
            + ("the agent's own prompt, then " if agent.system_prompt else "")
            + f"{len(resolved.prompt_files)} workspace file(s), "
            f"{len(resolved.system_prompt):,} characters",
        ]
        lines += [f"• {path}" for path in resolved.prompt_files]
        skills = ", ".join(s.name for s in resolved.skills) or "none"
        lines.append(f"Skills listed: {skills}")
        lines.append(f"Tools offered: {', '.join(t.name for t in resolved.tools) or 'none'}")
        return "\n".join(lines)
