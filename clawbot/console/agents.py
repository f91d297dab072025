"""The agents: every profile, one shown as the TOML ``clawbot agents show`` prints and
edited as such, and a form for a new one. Changes go through the registry's own review
(``AgentRegistry.review_draft``, as the chat's agent tools do): what it refuses is shown
with its reasons and nothing is saved. Each change is audited with the operator as actor."""

from __future__ import annotations

import tomllib
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from clawbot.agents.files import agent_toml
from clawbot.agents.profiles import AgentSpec
from clawbot.console.context import ConsoleContext
from clawbot.console.operator import audit_change
from clawbot.console.rendering import render

NEW_FIELDS = ("name", "description", "system_prompt", "model")


async def agents_page(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    specs = context.agents.all()
    sources = {s.agent_id: getattr(context.agents.record(s.agent_id), "source", "-") for s in specs}
    return render(
        request,
        "agents.html",
        specs=specs,
        sources=sources,
        default_agent=context.settings.agent,
        default_model=context.settings.model,
    )


def _agent(context: ConsoleContext, request: Request) -> AgentSpec | None:
    return context.agents.find(str(request.path_params["agent_id"]))


async def agent_page(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    spec = _agent(context, request)
    if spec is None:
        return PlainTextResponse("No agent has this id.\n", status_code=404)
    return render(request, "agent.html", spec=spec, text=agent_toml(spec), problems="")


async def edit_agent(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    spec = _agent(context, request)
    if spec is None:
        return PlainTextResponse("No agent has this id.\n", status_code=404)
    text = str((await request.form()).get("toml", ""))
    try:
        draft: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return render(request, "agent.html", 400, spec=spec, text=text, problems=f"not TOML: {exc}")
    review = context.agents.review_draft(draft, updating=spec)
    if review.spec is None:
        return render(request, "agent.html", 400, spec=spec, text=text, problems=review.problems)
    await context.agents.update(review.spec)
    await audit_change(context, "agent_update", agent=spec.agent_id)
    return RedirectResponse(f"/agents/{spec.agent_id}", status_code=303)


async def new_agent_page(request: Request) -> Response:
    return render(request, "agent_new.html", values={}, problems="")


async def create_agent(request: Request) -> Response:
    context: ConsoleContext = request.app.state.console
    form = await request.form()
    values = {name: str(form.get(name, "")).strip() for name in NEW_FIELDS}
    draft: dict[str, Any] = {name: value for name, value in values.items() if value}
    review = context.agents.review_draft(draft)
    if review.spec is None:
        return render(request, "agent_new.html", 400, values=values, problems=review.problems)
    await context.agents.create(review.spec)
    await audit_change(context, "agent_create", agent=review.spec.agent_id)
    return RedirectResponse(f"/agents/{review.spec.agent_id}", status_code=303)


routes = [
    Route("/agents", agents_page),
    Route("/agents/new", new_agent_page),
    Route("/agents/new", create_agent, methods=["POST"]),
    Route("/agents/{agent_id}", agent_page),
    Route("/agents/{agent_id}", edit_agent, methods=["POST"]),
]
