"""Slash commands: one module per family, answered without a model call."""
