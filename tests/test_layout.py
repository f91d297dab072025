"""The layout rules of design.md that code can check."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_adapters_resolves_to_this_project() -> None:
    import adapters

    assert Path(adapters.__file__).resolve().parent == ROOT / "adapters"


def test_core_never_imports_adapters() -> None:
    offenders = []
    for path in (ROOT / "clawbot").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "adapters"]
    assert offenders == []


def test_agents_folder_is_data_not_a_package() -> None:
    assert not list((ROOT / "agents").glob("*.py"))
