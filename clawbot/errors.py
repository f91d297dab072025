"""One small error hierarchy: every error clawbot raises on purpose says what to do next."""

from __future__ import annotations


class ClawbotError(Exception):
    """Base of every error clawbot raises deliberately.

    ``hint`` tells the reader what to do next; ``str()`` joins both so a single log or chat
    line is self-explanatory.
    """

    hint: str = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} — {self.hint}" if self.hint else self.message


class ConfigError(ClawbotError):
    """A setting is missing or invalid."""

    hint = "fix the setting in the environment, .env or clawbot.toml"


class MissingCredentialsError(ConfigError):
    """The chosen model's provider has no key configured."""


class StoreError(ClawbotError):
    """The database cannot be opened, read or written."""

    hint = "check CLAWBOT_HOME points at a writable folder and the database file is not damaged"


class WorkspaceError(ClawbotError):
    """The workspace folder is missing or a path tries to leave it."""

    hint = "use a path relative to the workspace, without '..' or links that leave it"


class ToolError(ClawbotError):
    """A tool call failed; the message goes back to the model as the tool result."""


class ToolArgumentsError(ToolError):
    """The model sent arguments that do not match the tool's schema."""

    hint = "call the tool again with arguments that match its JSON schema"


class ToolNotAllowedError(ToolError):
    """The active agent's policy does not allow this tool."""

    hint = "use one of the tools you were offered"


class ProviderError(ClawbotError):
    """The model provider failed after retries (timeout, rate limit, server error)."""

    hint = "try again in a moment"


class ContextLengthError(ClawbotError):
    """The request was longer than the model's input window (the runtime compacts the
    conversation and tries once more before failing the turn)."""

    hint = "try /compact, or /new to start a fresh conversation"


class CompactionError(ClawbotError):
    """Summarizing the older part of a conversation failed; the conversation is unchanged."""

    hint = "the conversation is unchanged; try /compact again later"


class InputError(ClawbotError):
    """An inbound message cannot be processed (empty, too large, not text)."""


class DeliveryError(ClawbotError):
    """An outbound message could not be delivered to its channel."""

    hint = "check the channel's connection and token; the reply is kept in the transcript"


class RateLimitedError(DeliveryError):
    """The platform refused a call for now (HTTP 429, Telegram's flood control) and said
    when to try again: the chat's pacer waits ``retry_after`` seconds, never retries sooner."""

    hint = "nothing to do: clawbot waits as long as the platform asked and sends again"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(0.0, retry_after)


class LeaseLostError(StoreError):
    """Another process took over a job whose lease this process let expire."""

    hint = "nothing to do: the other process finishes the turn and sends its reply"


class ShuttingDownError(ClawbotError):
    """A message arrived after shutdown began; it was not accepted."""

    hint = "send it again in a minute, once clawbot is back"


class SubagentError(ClawbotError):
    """A spawn, message or stop between agents was refused: a limit, an unknown agent or
    session, a loop. The message says which; the tool call gets it as its result."""


class MemoryInputError(ClawbotError):
    """A memory or a memory query was refused: too large, empty, an invalid key or tag.
    Nothing was stored; the message says what to change."""


class EmbeddingError(ClawbotError):
    """The embedding model for semantic recall could not load or answer. Recall falls back
    to full-text search alone; the message says which model and why."""

    hint = "check CLAWBOT_MEMORY_EMBEDDINGS (off, local, or a litellm embedding model)"


class MalformedMetaError(ClawbotError):
    """A stored payload (an announce, an injection header, a child's record) is unreadable."""

    hint = "it was written by another version or damaged; the message itself is kept"


class CredentialsRejected(ConfigError):
    """A platform or a model provider refused a token or key (``clawbot onboard``'s checks);
    the message never says which part was wrong, nor shows it."""

    hint = "enter it again (copy it anew from where it was issued)"


class CheckFailed(ClawbotError):
    """A check of a token or key could not be made: no answer, or not the API's."""

    hint = "check the network (and the API base URL setting), then try again"


class ScheduleError(ClawbotError):
    """A scheduled task cannot be created, found or cancelled as asked."""

    hint = "e.g. 'in 20 minutes', 'every 30 minutes', 'cron 0 8 * * 1-5' or '2030-01-31T09:00'"


class BudgetExceededError(ClawbotError):
    """A budget is spent: the model call it covers was refused before it was made.
    ``budget`` names which one (the same for each refusal of it, whatever was spent)."""

    hint = "commands still work"

    def __init__(self, message: str, *, hint: str | None = None, budget: str = "") -> None:
        super().__init__(message, hint=hint)
        self.budget = budget
