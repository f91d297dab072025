"""MCP servers the tests start, written with the official SDK clawbot connects with."""
