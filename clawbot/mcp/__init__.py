"""MCP servers as tools: each ``[mcp_servers.NAME]`` server's tools offered as ``NAME__TOOL``
while it is connected (``clawbot.mcp.plugin``), through the official ``mcp`` SDK.

It owns the connections to MCP servers and the tools they become. It sits above the runtime
(it is a turn plug-in, assembled in ``clawbot.app``) and never imports the scheduler, the
router or an adapter.
"""

__all__ = ["connection", "plugin", "tools"]
