"""Tools the model can call.

``registry`` is the typed tool shape and the registry (schemas from signatures); one module
per family of built-in tools: ``files`` (workspace-confined), ``agents``, ``memory``,
``skills`` (``skill_read``), ``shell`` (with ``sandbox``, bubblewrap, and the private
``shell_paths``), ``web`` (web_fetch, with the private ``html_text``), ``web_search`` (its
provider a setting; both web tools share ``web_client``'s HTTP) and ``sending`` (send_file: a
workspace file to the person's chat, through the outbox).

It never imports ``runtime``, ``scheduling``, ``subagents``, ``commands``, ``routing``,
``app``, ``cli`` or ``adapters``.
"""

__all__ = [
    "agents",
    "files",
    "host_shell",
    "memory",
    "registry",
    "sandbox",
    "sending",
    "shell",
    "skills",
    "web",
    "web_client",
    "web_search",
]
