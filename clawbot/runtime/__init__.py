"""The runtime: one turn of one session.

``turn`` (``Runtime``) resolves the agent, builds the prompt and runs the tool loop;
``llm`` is the litellm call; ``usage`` the tokens and cost each call used (below the store);
``transcripts`` the in-memory tails of the conversations; ``compaction`` the older part of
a conversation summarized in its place; ``resolved_turn`` what a turn resolves to;
``tool_offer`` which tools a session may use (private).

It never imports ``scheduling``, ``commands``, ``routing``, ``app``, ``cli`` or
``adapters``. Today ``turn`` still imports features by name (``subagents``' ceiling,
chains, announce context and scratchpad; ``memory.recall``; approvals; skills;
compaction): tests/test_layout.py lists the ones that point up.
"""

__all__ = [
    "compaction",
    "control",
    "llm",
    "plugins",
    "resolved_turn",
    "transcripts",
    "turn",
    "usage",
]
