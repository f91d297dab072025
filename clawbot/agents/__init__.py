"""Agents: the profiles and what an agent carries.

``profiles`` is ``AgentSpec`` and its policies (below the store: it imports only the
foundation, whose ``policies`` holds ``ToolPolicy``); ``files`` reads and writes their TOML
files; ``registry`` is the set the bot knows; ``model_catalog`` the models it may switch to
(litellm's lists, through ``clawbot.providers``); ``switchboard`` switching agents and
models; ``skills`` the skill folders; ``workspace`` the workspace and its bootstrap files;
``home`` the home folder, seeded on first run; ``beneath`` paths opened beneath the
workspace's root; ``chains`` the agents from a root session down to a child's.

It never imports ``security`` (beyond its records), ``tools``, ``memory``, ``runtime``,
``scheduling``, ``subagents``, ``commands``, ``routing``, ``app``, ``cli`` or ``adapters``
(the ``skill_read`` tool is ``clawbot.tools.skills``).
"""

__all__ = [
    "beneath",
    "chains",
    "files",
    "home",
    "model_catalog",
    "profiles",
    "registry",
    "skills",
    "switchboard",
    "workspace",
]
