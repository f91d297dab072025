"""The runtime: one turn of one session.

``turn`` (``Runtime``) resolves the agent, builds the prompt and runs the tool loop;
``llm`` is the litellm call (streamed to a ``text_stream`` sink when a turn binds one) and
``replies`` what a call produced (``ModelReply``, below the store); ``usage`` the tokens and
cost each call used (below the store); ``metering`` writes each call's row of the usage
ledger, for whom the calls made now are; ``budgets`` refuse a call a spent budget covers;
``model_health`` which models are down and resting,
so a call moves to its fallbacks, ``fallbacks`` what a person is told of that (a plugin),
``api_keys`` a provider's listed keys taking turns (private) and ``provider_errors`` how a
provider's failure is read (private);
``transcripts`` the in-memory tails of the conversations; ``compaction`` the older part of
a conversation summarized in its place; ``resolved_turn`` what a turn resolves to;
``tool_offer`` which tools a session may use (private); ``control`` what a turn is told
and gives back; ``plugins`` how features take part in a turn (tools, ephemeral context,
hooks around a turn, a model call and a tool call, a start and a stop); ``speech`` reads
a reply aloud once it went out (``/voice on``, a plugin).

It knows no feature by name: memory, subagents, approvals and what comes next plug in
through ``plugins``, bound in ``clawbot.app``. It never imports ``memory``,
``subagents``, ``scheduling`` (beyond the ``TurnJob`` record), ``commands``, ``routing``
(beyond the ``Session`` record), ``app``, ``cli`` or ``adapters``
(tests/test_turn_plugins.py).
"""

__all__ = [
    "budgets",
    "compaction",
    "control",
    "fallbacks",
    "llm",
    "metering",
    "model_health",
    "plugins",
    "replies",
    "resolved_turn",
    "speech",
    "text_stream",
    "transcripts",
    "turn",
    "usage",
]
