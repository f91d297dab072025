"""Model providers: litellm, imported once and offline (in the background at start, for
the long-running commands), the provider a model reference names, and the API keys it needs.

Foundation, because the model catalogue (``agents``) and the model client (``runtime``)
both need it, and the embedding models of ``memory`` too. litellm takes seconds to import
and would fetch a price list from the internet at import time: it is told to use its
bundled one.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
from types import ModuleType

from clawbot.errors import MissingCredentialsError
from clawbot.redaction import redactor

_litellm: ModuleType | None = None
_import_lock = threading.Lock()
_preload: threading.Thread | None = None
_ready = False
"""litellm is in and no preload still runs (see ``ModelClient.loaded``)."""


def litellm_module() -> ModuleType:
    """Import litellm once, offline: no price list is fetched from the internet."""
    global _litellm, _ready
    if _litellm is None:
        with _import_lock:
            if _litellm is None:
                os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
                import litellm

                litellm.suppress_debug_info = True
                litellm.telemetry = False
                logging.getLogger("LiteLLM").setLevel(logging.WARNING)
                _litellm = litellm
                _ready = _preload is None  # else the preload says so when it ends
    return _litellm


def preload_in_background() -> None:
    """Start importing litellm on a thread (with the openai SDK modules its first call
    loads), so the first turn waits for that import and for nothing else.

    Meant for the long-running commands, before their database opens and their adapters
    start: those run beside it. The garbage collector stays off until the import ends: a
    start makes some 340,000 objects that live until exit, and collecting while they piled
    up walked them again and again (a fifth of the import's time). Then everything made so
    far is frozen out of the collector's reach, so its full passes take milliseconds, where
    each stalled every chat for about 150 ms."""
    global _preload
    if _litellm is None and _preload is None:
        gc.disable()
        _preload = threading.Thread(target=_import_and_freeze, name="litellm-import", daemon=True)
        _preload.start()


def wait_for_preload(timeout: float = 30.0) -> None:
    """Let the preload finish before the interpreter shuts down: a daemon thread stopped in
    the middle of an import holds that module's lock, and an import at exit would wait on
    it forever."""
    if _preload is not None:
        _preload.join(timeout)


def _import_and_freeze() -> None:
    global _ready
    try:
        litellm_module()
        # litellm's first call to an OpenAI-style API imports the openai SDK's resources
        # (about 460 modules, half a second): done here, the first reply does not wait.
        import openai.lib.streaming.chat
        import openai.resources  # noqa: F401
    finally:
        # Frozen without collecting first: a full collection walking the 340,000 objects
        # took 0.3 s of the first reply's time, to free about 2,000 the imports left.
        gc.freeze()
        gc.enable()
        _ready = _litellm is not None


def litellm_ready() -> bool:
    """litellm is in, with what its first call needs, and no preload still imports it."""
    return _ready


def load_litellm() -> ModuleType:
    """litellm, once any preload in progress has ended (on a worker thread)."""
    if _preload is not None:
        _preload.join()
    return litellm_module()


def provider_of(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else "openai"


# Keys of the most used providers, so start-up need not import litellm to check them; a test
# keeps this table in agreement with litellm.validate_environment.
KNOWN_PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "groq": ("GROQ_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
}


KEY_LIST_SUFFIX = "_API_KEYS"
"""``OPENAI_API_KEYS=a,b``: several keys of one provider, taking turns (see
``clawbot.runtime.api_keys``)."""


def key_list_variable(provider: str) -> str:
    return provider.upper().replace("-", "_") + KEY_LIST_SUFFIX


def listed_keys(provider: str) -> tuple[str, ...]:
    """The keys of ``<PROVIDER>_API_KEYS`` (comma-separated), in order, without repeats;
    each is masked from then on wherever clawbot writes text (a provider's error may echo
    the key it refused)."""
    raw = os.environ.get(key_list_variable(provider), "")
    keys = tuple(dict.fromkeys(item.strip() for item in raw.split(",") if item.strip()))
    redactor.add(*keys)
    return keys


def missing_credentials(model: str) -> list[str]:
    """Environment variables of which one must be set for ``model``; [] when satisfied."""
    if listed_keys(provider_of(model)):
        return []
    if "/" in model and provider_of(model) in KNOWN_PROVIDER_KEYS:
        names = KNOWN_PROVIDER_KEYS[provider_of(model)]
        return [] if any(os.environ.get(n) for n in names) else list(names)
    litellm = litellm_module()
    if provider_of(model) in {item["provider"] for item in litellm.custom_provider_map}:
        return []
    try:
        report = litellm.validate_environment(model)
    except Exception:  # litellm cannot tell for this model; let the provider answer
        return []
    return [
        name
        for name in report.get("missing_keys", [])
        if any(word in name for word in ("KEY", "TOKEN", "SECRET"))
    ]


def check_credentials(model: str) -> None:
    """Raise MissingCredentialsError naming the variable to set when a key is missing."""
    missing = missing_credentials(model)
    if missing:
        raise MissingCredentialsError(
            f"no API key for model {model!r}",
            hint=f"set {' or '.join(missing)} in the environment or .env",
        )
