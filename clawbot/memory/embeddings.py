"""Embedding models for semantic recall (``CLAWBOT_MEMORY_EMBEDDINGS``): ``local``, the
wordllama model whose wheel ships its weights and tokenizer (nothing is downloaded, nothing
leaves the machine), or any litellm embedding model (``openai/text-embedding-3-small``...).

Nothing here imports numpy or the model until the first text is embedded, so a bot with
semantic recall off never loads them. Every vector is a float32 row of unit length, so a dot
product is the cosine similarity.

The local model's files are read directly, not through ``wordllama.WordLlama.load``: that
loader looks for the tokenizer in a folder the wheel does not have and then falls back to a
download from the Hugging Face hub, and importing ``wordllama`` configures the root logger.
The model itself is a table of token vectors averaged over a text's tokens."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawbot.errors import EmbeddingError
from clawbot.redaction import redactor
from clawbot.runtime.metering import UsageMeter, response_cost
from clawbot.store.protocols.memories import Embedder

if TYPE_CHECKING:
    from clawbot.settings import Settings
    from clawbot.store.protocols.memories import Vectors

OFF = "off"
LOCAL = "local"
LOCAL_MODEL = "l2_supercat"
LOCAL_WEIGHTS = "weights/l2_supercat_256.safetensors"
LOCAL_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
INLINE_TEXTS = 16
"""The local model embeds this many texts right on the event loop (well under a millisecond);
more (an import, a backfill) go to a thread."""
BATCH = 128
"""Texts per litellm embedding request."""


def unit_rows(matrix: Vectors) -> Vectors:
    """Each row scaled to length 1 (a zero row stays zero)."""
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


class _LocalModel:
    """wordllama's token vectors (the first ``dims`` of each) and its tokenizer."""

    def __init__(self, dims: int) -> None:
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        spec = importlib.util.find_spec("wordllama")  # where it is, without importing it
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("the package wordllama is not installed")
        root = Path(next(iter(spec.submodule_search_locations)))
        table = load_file(str(root / LOCAL_WEIGHTS))["embedding.weight"]
        self.table = np.ascontiguousarray(table[:, :dims], dtype=np.float32)
        self.tokenizer = Tokenizer.from_file(str(root / LOCAL_TOKENIZER))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()

    def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        out = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        encoded = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        for row, encoding in enumerate(encoded):
            if encoding.ids:
                ids = np.asarray(encoding.ids, dtype=np.int64)
                np.clip(ids, 0, self.table.shape[0] - 1, out=ids)
                out[row] = self.table[ids].mean(axis=0)
        return unit_rows(out)


class LocalEmbedder:
    """The wordllama model, loaded (about 0.2 s, on a thread) at the first embedding."""

    def __init__(self, dims: int = 128) -> None:
        self.dims = dims
        self._model: _LocalModel | None = None
        self._loading = asyncio.Lock()

    @property
    def name(self) -> str:
        return f"local/wordllama-{LOCAL_MODEL}-{self.dims}"

    async def embed(self, texts: Sequence[str]) -> Vectors:
        model = self._model or await self._load()
        if len(texts) <= INLINE_TEXTS:
            return model.embed(texts)
        return await asyncio.to_thread(model.embed, texts)

    async def _load(self) -> _LocalModel:
        async with self._loading:
            if self._model is None:
                try:
                    self._model = await asyncio.to_thread(_LocalModel, self.dims)
                except Exception as exc:  # missing package or files, a damaged wheel
                    raise EmbeddingError(
                        f"the local embedding model did not load: {exc}",
                        hint="pip install 'clawbot[semantic]', or set "
                        "CLAWBOT_MEMORY_EMBEDDINGS=off",
                    ) from None
            return self._model


class LitellmEmbedder:
    """An embedding model through litellm (the provider's key from the environment, as for
    chat models); texts are sent in batches of ``BATCH``."""

    def __init__(self, model: str, *, timeout: float = 60.0) -> None:
        self.model = model
        self.timeout = timeout
        self.meter: UsageMeter | None = None
        """Where each request is counted (set where the bot is assembled)."""

    @property
    def name(self) -> str:
        return self.model

    async def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        rows: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            rows += await self._request(list(texts[start : start + BATCH]))
        if len(rows) != len(texts) or len({len(row) for row in rows}) != 1:
            raise EmbeddingError(f"{self.model} answered with vectors that do not fit")
        return unit_rows(np.asarray(rows, dtype=np.float32))

    async def _request(self, batch: list[str]) -> list[list[float]]:
        from clawbot.providers import litellm_module  # offline, and without litellm's banners

        meter = self.meter
        started = UsageMeter.started()
        try:
            response: Any = await litellm_module().aembedding(
                model=self.model, input=batch, timeout=self.timeout
            )
            data = sorted(response.data, key=lambda item: _field(item, "index"))
            vectors = [list(_field(item, "embedding")) for item in data]
        except Exception as exc:  # litellm raises many types; the reason is in the text
            if meter is not None:
                await meter.failed("embedding", self.model, started, exc)
            text = redactor.redact(str(exc)).strip()
            reason = text.splitlines()[0][:300] if text else type(exc).__name__
            raise EmbeddingError(f"the embedding model {self.model} failed: {reason}") from None
        if meter is not None:
            usage = getattr(response, "usage", None)
            await meter.record(
                purpose="embedding",
                model=self.model,
                started=started,
                input_tokens=getattr(usage, "prompt_tokens", None),
                cost_usd=response_cost(response),
            )
        return vectors


def _field(item: Any, name: str) -> Any:
    return item[name] if isinstance(item, dict) else getattr(item, name)


def configured_embedder(settings: Settings) -> Embedder | None:
    """The embedder the settings name (``CLAWBOT_MEMORY_EMBEDDINGS``); None when off."""
    return embedder_for(
        settings.memory_embeddings,
        dims=settings.memory_embedding_dims,
        timeout=settings.provider_timeout,
    )


def embedder_for(setting: str, *, dims: int = 128, timeout: float = 60.0) -> Embedder | None:
    """The embedder ``CLAWBOT_MEMORY_EMBEDDINGS`` names; None when it is off. Nothing is
    loaded yet: a model that cannot load says so at its first use."""
    choice = setting.strip()
    if choice.lower() == OFF:
        return None
    if choice.lower() == LOCAL:
        return LocalEmbedder(dims)
    return LitellmEmbedder(choice, timeout=timeout)
