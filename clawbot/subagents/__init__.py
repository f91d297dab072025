"""Subagents: child sessions that an agent spawns, which report back to their parent."""
