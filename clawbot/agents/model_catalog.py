"""Which models a session can switch to: the configured ones (the global default and every
agent's model) plus the chat models litellm knows for providers whose API key is present.

Listings stay short enough for a chat message: at most ``MAX_LINES`` lines, a provider with
many models shows its first ``PER_PROVIDER`` then ``+ (n more)``.
"""

from __future__ import annotations

import difflib
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from clawbot.agents.registry import AgentRegistry
from clawbot.providers import KNOWN_PROVIDER_KEYS, listed_keys, litellm_module, provider_of
from clawbot.settings import Settings

MAX_LINES = 60
PER_PROVIDER = 8

KnownModels = Callable[[], Mapping[str, Sequence[str]]]


@functools.cache
def litellm_chat_models() -> dict[str, list[str]]:
    """provider -> its chat models as ``provider/model``, from litellm's bundled list (which
    does not change while the process runs)."""
    litellm = litellm_module()
    found: dict[str, list[str]] = {}
    for provider, names in litellm.models_by_provider.items():
        models = set()
        for name in names:
            info = litellm.model_cost.get(name) or litellm.model_cost.get(f"{provider}/{name}")
            if info is None or info.get("mode") != "chat":
                continue
            models.add(name if name.startswith(f"{provider}/") else f"{provider}/{name}")
        if models:
            found[str(provider)] = sorted(models)
    return found


def key_variables(provider: str) -> tuple[str, ...]:
    """The environment variables that hold ``provider``'s key (by litellm's convention when
    the provider is not one of the well-known ones)."""
    if provider in KNOWN_PROVIDER_KEYS:
        return KNOWN_PROVIDER_KEYS[provider]
    return (provider.upper().replace("-", "_") + "_API_KEY",)


def provider_has_key(provider: str) -> bool:
    return bool(listed_keys(provider)) or any(os.environ.get(n) for n in key_variables(provider))


@dataclass(frozen=True)
class ModelCheck:
    """The answer to "may this session use that model?": ``model`` when yes, else why not."""

    model: str | None
    message: str = ""
    suggestions: tuple[str, ...] = ()
    known: bool = True
    """False when no provider knows the model (a typo), not when its key is missing."""


class ModelCatalog:
    def __init__(
        self, settings: Settings, agents: AgentRegistry, known: KnownModels = litellm_chat_models
    ) -> None:
        self.settings = settings
        self.agents = agents
        self.known = known

    def configured(self) -> list[str]:
        """The global default first, then every agent's model, without repeats."""
        models = [self.settings.model, *(a.model for a in self.agents.all() if a.model)]
        return list(dict.fromkeys(models))

    def available(self) -> dict[str, list[str]]:
        """provider -> switchable models: configured ones first, then litellm's for
        providers whose key is present."""
        groups: dict[str, list[str]] = {}
        for model in self.configured():
            groups.setdefault(provider_of(model), []).append(model)
        for provider, models in sorted(self.known().items()):
            if not provider_has_key(provider):
                continue
            group = groups.setdefault(provider, [])
            group.extend(m for m in models if m not in group)
        return groups

    def listing(self, current: str) -> str:
        """``/models``: every provider, the first few models each, at most MAX_LINES lines."""
        groups = self.available()
        lines = [f"Models (current: {current}); switch with /model <provider>/<model>:"]
        budget = MAX_LINES - 2  # the header and a possible "more providers" line
        shown = 0
        for provider, models in groups.items():
            rest = max(len(models) - PER_PROVIDER, 0)
            block = models[:PER_PROVIDER] + (
                [f"+ ({rest} more) — /models {provider}"] if rest else []
            )
            if len(lines) - 1 + len(block) > budget:
                break
            lines += block
            shown += 1
        hidden = list(groups)[shown:]
        if hidden:
            names = ", ".join(hidden[:8]) + (", …" if len(hidden) > 8 else "")
            lines.append(f"+ ({len(hidden)} more providers: {names}) — /models <provider>")
        return "\n".join(lines)

    def provider_listing(self, provider: str, text: str = "") -> str:
        """``/models <provider> [text]``: that provider's models, optionally filtered."""
        provider = provider.strip().lower()
        groups = self.available()
        if provider not in groups:
            return self._no_such_provider(provider)
        models = [m for m in groups[provider] if text.lower() in m.lower()]
        if not models:
            return f"No {provider} model contains {text!r}. /models {provider} lists them all."
        lines = [f"{provider} models{f' containing {text!r}' if text else ''}:"]
        room = MAX_LINES - 2
        lines += models[:room]
        if len(models) > room:
            lines.append(
                f"+ ({len(models) - room} more) — /models {provider} <part of a name> narrows it"
            )
        return "\n".join(lines)

    def _no_such_provider(self, provider: str) -> str:
        known = self.known()
        if provider in known:
            variables = " or ".join(key_variables(provider))
            return (
                f"{provider} has {len(known[provider])} chat models, but no API key is set: "
                f"set {variables} in the environment or .env and restart."
            )
        names = sorted(set(self.available()) | set(known))
        close = difflib.get_close_matches(provider, names, n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        return f"No models known for provider {provider!r}.{hint} /models lists what is available."

    def fallback_problems(self) -> list[str]:
        """Each fallback list (``CLAWBOT_FALLBACK_MODELS``, an agent's ``fallback_models``)
        that names a model no provider knows, naming the models; [] when all are known."""
        lists = [("CLAWBOT_FALLBACK_MODELS", self.settings.fallback_models)]
        lists += [
            (f"agent {spec.agent_id!r} fallback_models", spec.fallback_models)
            for spec in self.agents.all()
            if spec.fallback_models
        ]
        problems = []
        for where, models in lists:
            unknown = [(ref, self.check(ref)) for ref in models]
            named = [f"{ref} ({check.message})" for ref, check in unknown if not check.known]
            if named:
                problems.append(f"{where} names unknown models: {'; '.join(named)}")
        return problems

    def check(self, ref: str) -> ModelCheck:
        """Whether ``ref`` can be used; a typo gets "did you mean" suggestions instead."""
        ref = ref.strip()
        configured = self.configured()
        if ref in configured:
            return ModelCheck(model=ref)
        known = self.known()
        # A configured model is usually one litellm lists too: each is suggested once.
        everything = list(dict.fromkeys([*configured, *(m for ms in known.values() for m in ms)]))
        provider, slash, name = ref.partition("/")
        if not slash or not provider or not name:
            same_name = [m for m in everything if m.split("/", 1)[-1] == ref][:3]
            return _refusal(
                f"Give the model as provider/model, e.g. {self.settings.model}.",
                same_name or _close(ref, everything),
            )
        if provider in known:
            if ref not in known[provider]:
                # A typo in the model's name: its provider's models are the likely ones.
                own = [m for m in everything if provider_of(m) == provider]
                close = _close(ref, own) or _close(ref, everything)
                return _refusal(
                    f"Unknown model {ref!r}.",
                    close,
                    f"/models {provider} lists them; a model litellm does not list can be "
                    "configured as CLAWBOT_MODEL or an agent's model.",
                )
            if not provider_has_key(provider):
                variables = " or ".join(key_variables(provider))
                return ModelCheck(
                    model=None, message=f"No API key for {provider}: set {variables} first."
                )
            return ModelCheck(model=ref)
        if provider in _litellm_providers():
            if provider in KNOWN_PROVIDER_KEYS and not provider_has_key(provider):
                variables = " or ".join(key_variables(provider))
                return ModelCheck(
                    model=None, message=f"No API key for {provider}: set {variables} first."
                )
            return ModelCheck(model=ref)
        return _refusal(
            f"Unknown provider {provider!r}.", _close(ref, everything), "/models lists the models."
        )


def _close(ref: str, candidates: Sequence[str]) -> list[str]:
    """Up to three of ``candidates`` (which hold no repeats) that look like ``ref``."""
    return difflib.get_close_matches(ref, candidates, n=3, cutoff=0.6)


def _refusal(message: str, suggestions: Sequence[str], otherwise: str = "") -> ModelCheck:
    if suggestions:
        text = f"{message} Did you mean {', '.join(suggestions)}?"
    else:
        text = f"{message} {otherwise}".strip()
    return ModelCheck(model=None, message=text, suggestions=tuple(suggestions), known=False)


def _litellm_providers() -> set[str]:
    """Providers litellm can call, whether or not it lists their models (ollama, custom)."""
    litellm = litellm_module()
    providers = {getattr(p, "value", str(p)) for p in litellm.provider_list}
    return providers | {item["provider"] for item in litellm.custom_provider_map}
