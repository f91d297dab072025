"""Channels: the adapter interface, rendering, chunking and the outbox."""
