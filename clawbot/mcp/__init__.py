"""MCP servers as tools: each ``[mcp_servers.NAME]`` server's tools offered as ``NAME__TOOL``
while it is connected (``clawbot.mcp.plugin``), through the official ``mcp`` SDK.

Owns: the connections to MCP servers and the tools they become. Never imports: the stages
above the runtime (it is a turn plug-in, assembled in ``clawbot.app``).
"""
