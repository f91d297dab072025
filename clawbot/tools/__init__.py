"""Tools the model can call: the registry and the typed tool shape (``registry``), and one
module per family of built-in tools (``files``, ``agents``)."""

from clawbot.risk import Risk
from clawbot.tools.registry import (
    MAX_ERROR_CHARS,
    MAX_RESULT_CHARS,
    ListedSkill,
    Tool,
    ToolContext,
    ToolRegistry,
    make_tool,
)

__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_RESULT_CHARS",
    "ListedSkill",
    "Risk",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "make_tool",
]
